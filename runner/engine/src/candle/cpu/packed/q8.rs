//! q8_0 panels. A panel's depth is cut into blocks of 32; each block holds its 16
//! outputs' f16 scales (32 bytes) and then its 32 depth steps of 16 int8 values, so
//! that a block's scales are one load and each step one 16-byte load. The blocks are
//! GGML's q8_0, made by candle's quantizer one weight row at a time.

use super::lines::Lines;
use super::PANEL;
use crate::candle::cpu::quantized::with_rows_f32;
use candle_core::quantized::k_quants::{BlockQ8_0, GgmlType};
use candle_core::{Result, Tensor};
use rayon::prelude::*;

/// Depths per q8_0 block (one scale each).
pub const BLOCK: usize = 32;
/// The 16 f16 scales at the head of a panel's block.
const SCALES: usize = PANEL * 2;
/// Bytes of one panel's block: its scales and 32 x 16 int8 values.
pub const BLOCK_BYTES: usize = SCALES + BLOCK * PANEL;

/// Offset in a panel of the scales for depth `d`.
#[inline(always)]
pub fn scales_at(d: usize) -> usize {
    d / BLOCK * BLOCK_BYTES
}

/// Offset in a panel of depth `d`'s 16 values.
#[inline(always)]
pub fn values_at(d: usize) -> usize {
    d / BLOCK * BLOCK_BYTES + SCALES + d % BLOCK * PANEL
}

/// Quantizes `parts` (each (n_i, k), stacked along the outputs) into `panels` panels;
/// rows in parallel, each widened to f32 on its own. Lanes past the last output stay
/// zero (a zero scale).
pub fn pack(parts: &[&Tensor], panels: usize, k: usize) -> Result<Lines<u8>> {
    if !k.is_multiple_of(BLOCK) {
        candle_core::bail!("q8_0 quantizes blocks of {BLOCK} inputs; this layer has {k}");
    }
    let panel_bytes = k / BLOCK * BLOCK_BYTES;
    let mut lines = Lines::zeroed(panels * panel_bytes);
    let store = lines.as_mut_slice();
    let mut first = 0;
    for part in parts {
        let rows = part.dim(0)?;
        let (p0, p1) = (first / PANEL, (first + rows).div_ceil(PANEL));
        let mine = first..first + rows;
        let chunk = &mut store[p0 * panel_bytes..p1 * panel_bytes];
        with_rows_f32(part, k, |row_of| {
            chunk.par_chunks_mut(panel_bytes).enumerate().for_each_init(
                || (vec![0f32; k], vec![BlockQ8_0::zeros(); k / BLOCK]),
                |(row, blocks), (i, panel)| {
                    for lane in 0..PANEL {
                        let out = (p0 + i) * PANEL + lane;
                        if mine.contains(&out) {
                            row_of(out - first, row);
                            BlockQ8_0::from_float(row, blocks);
                            place(panel, lane, blocks);
                        }
                    }
                },
            );
            Ok(())
        })?;
        first += rows;
    }
    Ok(lines)
}

/// Writes one output's blocks into lane `lane` of its panel.
fn place(panel: &mut [u8], lane: usize, blocks: &[BlockQ8_0]) {
    const _: () = assert!(std::mem::size_of::<BlockQ8_0>() == 2 + BLOCK);
    for (b, block) in blocks.iter().enumerate() {
        // Safety: BlockQ8_0 is repr(C) { d: f16, qs: [i8; 32] } with no padding
        // (asserted above): GGML's block layout, the scale's two bytes first.
        let bytes: &[u8; 2 + BLOCK] = unsafe { &*(block as *const BlockQ8_0).cast() };
        let base = b * BLOCK_BYTES;
        panel[base + 2 * lane..base + 2 * lane + 2].copy_from_slice(&bytes[..2]);
        for (d, &q) in bytes[2..].iter().enumerate() {
            panel[base + SCALES + d * PANEL + lane] = q;
        }
    }
}
