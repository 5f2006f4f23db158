//! The AMX kernel of the integer q8_0 product. A panel's block is already laid out as
//! AMX's right-hand tile wants it: 8 rows (groups of 4 depths) of 64 bytes, each the
//! 16 lanes' 4 depths ([`super::super::q8`]). So one `tdpbsud` (signed activation
//! bytes times unsigned weight bytes) gives the integer dots of 16 rows by one panel's
//! 16 outputs for a block: the 128 `vpdpbusd` of the VNNI kernel in one instruction.
//!
//! The integer dots are exact, so they are the VNNI kernel's integers; each block's
//! dots are stored and then scaled into the f32 chains with the same instructions in
//! the same order as there, so the bits are the same. Rows left over from the tiles of
//! 16 run through the VNNI kernel.

use super::{x86, Job, BLOCK, BLOCK_BYTES};
use crate::candle::cpu::packed::PANEL;
use crate::candle::cpu::prefetch::into_l2;
use std::arch::asm;
use std::arch::x86_64::*;
use std::cell::Cell;

/// Rows per tile.
pub(super) const ROWS: usize = 16;

/// The tile registers' shapes: tmm0 and tmm3 a block of 16 activation rows (32
/// bytes each), tmm1 and tmm4 a panel's block (8 rows of 64 bytes), tmm2 and tmm5 the
/// 16 x 16 integer dots. Two sets, taken block by block in turn, so that a block's
/// tile loads need not wait for the product before it to free their registers.
#[repr(C, align(64))]
struct Config([u8; 64]);

const CONFIG: Config = {
    let mut c = [0u8; 64];
    c[0] = 1; // palette 1
    let shapes: [(u8, u16); 6] = [(16, 32), (8, 64), (16, 64), (16, 32), (8, 64), (16, 64)];
    let mut t = 0;
    while t < shapes.len() {
        let (rows, colsb) = shapes[t];
        let b = colsb.to_le_bytes();
        c[16 + 2 * t] = b[0];
        c[17 + 2 * t] = b[1];
        c[48 + t] = rows;
        t += 1;
    }
    Config(c)
};

thread_local! {
    /// Whether this thread's tile registers hold [`CONFIG`] (the configuration is a
    /// thread's state, kept across context switches).
    static CONFIGURED: Cell<bool> = const { Cell::new(false) };
}

/// Blocks of one unit of work: a tile of 16 rows by one panel over up to this many
/// blocks. The tile products of one unit run while the dots of the one before are
/// scaled into the f32 chains: the scaling reads what tile stores wrote, which it can
/// only do well after the products were issued.
const CHUNK: usize = 16;

/// Panels a thread takes at a time (the units of one group are one pipeline).
pub(super) const PANELS: usize = 4;

/// Panels ahead of the one multiplied whose weights are asked for.
const AHEAD: usize = 4;

/// The 16 x 16 integer dots of two units' blocks.
#[repr(C, align(64))]
struct Dots([[[i32; ROWS * PANEL]; CHUNK]; 2]);

/// Rows `r..r+16` by panel `p`, blocks `b0..b1`.
#[derive(Clone, Copy)]
struct Unit {
    r: usize,
    p: usize,
    b0: usize,
    b1: usize,
}

/// Panels `g * PANELS ..` (fewer at the end), every row: tiles of 16 rows on AMX, the
/// rest on VNNI.
///
/// # Safety
/// `Isa::Amx` was detected (the CPU has AMX-INT8 and the process may use the tiles).
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
pub(super) unsafe fn panels(job: &Job, g: usize) {
    if !CONFIGURED.get() {
        asm!("ldtilecfg [{}]", in(reg) CONFIG.0.as_ptr(), options(nostack, readonly));
        CONFIGURED.set(true);
    }
    let (first, blocks) = (g * PANELS, job.w.blocks);
    let last = (first + PANELS).min(job.panels);
    let tiles = job.rows / ROWS * ROWS;
    let units = (first..last).flat_map(|p| {
        (0..tiles).step_by(ROWS).flat_map(move |r| {
            (0..blocks).step_by(CHUNK).map(move |b0| Unit {
                r,
                p,
                b0,
                b1: (b0 + CHUNK).min(blocks),
            })
        })
    });
    // Written by the tile stores before anything reads it; raw pointers only, no
    // reference to the uninitialised buffer.
    let mut dots = std::mem::MaybeUninit::<Dots>::uninit();
    let dots = dots.as_mut_ptr();
    let half = |h: usize| (&raw mut (*dots).0[h]).cast::<i32>();
    // The unit before, and its half of `dots`.
    let mut before: Option<(Unit, usize)> = None;
    for (j, unit) in units.enumerate() {
        products(job, unit, half(j % 2));
        if let Some((u, h)) = before {
            scale(job, u, half(h));
        }
        before = Some((unit, j % 2));
    }
    if let Some((u, h)) = before {
        scale(job, u, half(h));
    }
    for p in first..last {
        let mut r = tiles;
        while r < job.rows {
            let mr = x86::ROWS.min(job.rows - r);
            x86::rows_tile::<1>(job, mr, r, p);
            r += mr;
        }
    }
}

/// Issues the tile products of `unit`, block `b` into `dots[b - b0]` (16 x 16 i32).
#[inline(always)]
unsafe fn products(job: &Job, unit: Unit, dots: *mut i32) {
    let xq = job.x.q[unit.r * job.k..].as_ptr();
    // The tile loads wait on memory for the weights (the first tile of rows brings a
    // panel's blocks in, the others find them in the cache): ask for the blocks a few
    // panels ahead into the second-level cache while this one's are multiplied.
    let ahead = unit.r == 0 && unit.p + AHEAD < job.panels;
    for b in unit.b0..unit.b1 {
        if ahead {
            into_l2(job.values(unit.p + AHEAD, b), BLOCK_BYTES);
        }
        let out = dots.add((b - unit.b0) * ROWS * PANEL);
        dot(b % 2, xq.add(b * BLOCK), job.k, job.values(unit.p, b), out);
    }
}

/// Scales `unit`'s dots into its 16 rows' chains: from zero at block 0, else from
/// what the unit before stored in the output (an f32 stored and reloaded is the same
/// f32, so the chain goes on exactly).
#[inline(always)]
unsafe fn scale(job: &Job, unit: Unit, dots: *const i32) {
    let blocks = job.w.blocks;
    let n = unit.b1 - unit.b0;
    let mut wscale = [_mm512_setzero_ps(); CHUNK];
    for (i, w) in wscale.iter_mut().enumerate().take(n) {
        *w = _mm512_cvtph_ps(_mm256_loadu_si256(job.scales(unit.p, unit.b0 + i).cast()));
    }
    // Four rows' chains side by side, to keep the multiply-adds' latency covered.
    for i0 in (0..ROWS).step_by(4) {
        let mut acc = [_mm512_setzero_ps(); 4];
        if unit.b0 > 0 {
            for (i, a) in acc.iter_mut().enumerate() {
                *a = _mm512_loadu_ps(job.out(unit.r + i0 + i, unit.p));
            }
        }
        for (c, w) in wscale.iter().enumerate().take(n) {
            let d = dots.add(c * ROWS * PANEL);
            for (i, a) in acc.iter_mut().enumerate() {
                let row = (unit.r + i0 + i) * blocks + unit.b0 + c;
                let xs = _mm512_set1_ps(*job.x.scale.get_unchecked(row));
                let offset = _mm512_set1_epi32(*job.x.offset.get_unchecked(row));
                let dot = _mm512_load_si512(d.add((i0 + i) * PANEL).cast());
                let exact = _mm512_cvtepi32_ps(_mm512_sub_epi32(dot, offset));
                *a = _mm512_fmadd_ps(exact, _mm512_mul_ps(*w, xs), *a);
            }
        }
        for (i, a) in acc.iter().enumerate() {
            _mm512_storeu_ps(job.out(unit.r + i0 + i, unit.p), *a);
        }
    }
}

/// The dots of one block into `out` (16 x 16 i32), through tile register set `set`
/// (0 or 1): 16 activation rows `k` bytes apart from `x`, by the panel's block at `w`.
#[inline(always)]
unsafe fn dot(set: usize, x: *const i8, k: usize, w: *const u8, out: *mut i32) {
    let line = PANEL * 4;
    if set == 0 {
        asm!(
            "tilezero tmm2",
            "tileloadd tmm0, [{x} + {k} * 1]",
            "tileloadd tmm1, [{w} + {line} * 1]",
            "tdpbsud tmm2, tmm0, tmm1",
            "tilestored [{out} + {line} * 1], tmm2",
            x = in(reg) x, k = in(reg) k, w = in(reg) w, out = in(reg) out,
            line = in(reg) line, options(nostack),
        );
    } else {
        asm!(
            "tilezero tmm5",
            "tileloadd tmm3, [{x} + {k} * 1]",
            "tileloadd tmm4, [{w} + {line} * 1]",
            "tdpbsud tmm5, tmm3, tmm4",
            "tilestored [{out} + {line} * 1], tmm5",
            x = in(reg) x, k = in(reg) k, w = in(reg) w, out = in(reg) out,
            line = in(reg) line, options(nostack),
        );
    }
}
