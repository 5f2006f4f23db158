//! q8_0 panels, laid out for integer dot products ([`super::q8_dot`]). A panel's depth
//! is cut into GGML's q8_0 blocks of 32, made by candle's quantizer one weight row at
//! a time. Each panel's block holds its 16 outputs' values as 8 groups of 4 depths:
//! `[group][lane][4 depths]`, 512 bytes, so that one 64-byte load gives every lane (a
//! 32-bit slot, one output) the 4 consecutive depths that `vpdpbusd` sums into it. The
//! f16 scales sit apart, `[panel][block][lane]`, so that the values' blocks stay on
//! cache lines (scales inline would shift every other block by half a line).
//!
//! The values are stored offset by 128, as unsigned bytes (`w + 128`): `vpdpbusd`
//! multiplies unsigned by signed bytes, and the activations, quantized per row at each
//! product, take the signed side. The offset adds `128 * sum(x's block)` to every dot,
//! a per-row term the row's quantization computes once; storing the weights signed
//! and offsetting the activations instead would need `128 * sum(w's block)` per
//! output and block, 6% more weight memory to stream at decode.

use super::lines::Lines;
use super::PANEL;
use crate::candle::cpu::quantized::{with_rows_f32, Rows};
use candle_core::quantized::k_quants::{BlockQ8_0, GgmlType};
use candle_core::Result;
use rayon::prelude::*;

/// Depths per q8_0 block (one scale each).
pub const BLOCK: usize = 32;
/// Depths one 32-bit lane sums per step.
pub const GROUP: usize = 4;
/// Bytes of one panel's block of values: 32 depths x 16 lanes.
pub const BLOCK_BYTES: usize = BLOCK * PANEL;
/// What a stored byte is above the int8 value it holds.
pub const OFFSET: i32 = 128;

/// A weight's q8_0 panels.
#[derive(Debug, Clone)]
pub struct Panels {
    /// `[panel][block][group][lane][4]`, each byte the value plus 128.
    pub values: Lines<u8>,
    /// `[panel][block][lane]`, f16 bit patterns.
    pub scales: Lines<u16>,
    /// Blocks per panel.
    pub blocks: usize,
}

/// Offset in a panel's block of the byte for `lane` at depth `d` of the block.
#[inline(always)]
pub fn value_at(lane: usize, d: usize) -> usize {
    d / GROUP * GROUP * PANEL + lane * GROUP + d % GROUP
}

/// Quantizes `parts` (each (n_i, k), stacked along the outputs) into `panels` panels;
/// rows in parallel, each widened to f32 on its own. Lanes past the last output hold
/// zeros with a zero scale.
pub(crate) fn pack(parts: &[Rows], panels: usize, k: usize) -> Result<Panels> {
    if !k.is_multiple_of(BLOCK) {
        candle_core::bail!("q8_0 quantizes blocks of {BLOCK} inputs; this layer has {k}");
    }
    let blocks = k / BLOCK;
    let (value_bytes, scale_len) = (blocks * BLOCK_BYTES, blocks * PANEL);
    let mut values = Lines::zeroed(panels * value_bytes);
    let mut scales = Lines::zeroed(panels * scale_len);
    values.as_mut_slice().fill(OFFSET as u8);
    let (vstore, sstore) = (values.as_mut_slice(), scales.as_mut_slice());
    let mut first = 0;
    for part in parts {
        let rows = part.dims()?.0;
        let (p0, p1) = (first / PANEL, (first + rows).div_ceil(PANEL));
        let mine = first..first + rows;
        let vchunk = &mut vstore[p0 * value_bytes..p1 * value_bytes];
        let schunk = &mut sstore[p0 * scale_len..p1 * scale_len];
        with_rows_f32(*part, k, |row_of| {
            vchunk
                .par_chunks_mut(value_bytes)
                .zip(schunk.par_chunks_mut(scale_len))
                .enumerate()
                .try_for_each_init(
                    || (vec![0f32; k], vec![BlockQ8_0::zeros(); blocks]),
                    |(row, qs), (i, (panel, scales))| {
                        for lane in 0..PANEL {
                            let out = (p0 + i) * PANEL + lane;
                            if mine.contains(&out) {
                                row_of(out - first, row)?;
                                BlockQ8_0::from_float(row, qs);
                                place(panel, scales, lane, qs);
                            }
                        }
                        Ok(())
                    },
                )
        })?;
        first += rows;
    }
    Ok(Panels {
        values,
        scales,
        blocks,
    })
}

/// Writes one output's blocks into lane `lane` of its panel.
fn place(panel: &mut [u8], scales: &mut [u16], lane: usize, blocks: &[BlockQ8_0]) {
    const _: () = assert!(std::mem::size_of::<BlockQ8_0>() == 2 + BLOCK);
    for (b, block) in blocks.iter().enumerate() {
        // Safety: BlockQ8_0 is repr(C) { d: f16, qs: [i8; 32] } with no padding
        // (asserted above): GGML's block layout, the scale's two bytes first.
        let bytes: &[u8; 2 + BLOCK] = unsafe { &*(block as *const BlockQ8_0).cast() };
        scales[b * PANEL + lane] = u16::from_ne_bytes([bytes[0], bytes[1]]);
        let base = b * BLOCK_BYTES;
        for (d, &q) in bytes[2..].iter().enumerate() {
            panel[base + value_at(lane, d)] = (q as i8 as i32 + OFFSET) as u8;
        }
    }
}
