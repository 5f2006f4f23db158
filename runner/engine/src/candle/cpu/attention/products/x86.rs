//! The AVX2 and AVX-512 entry points of attention's products (each compiled with its
//! features over the lanes of `cpu/lanes/x86.rs`), and the keys' 16 x 16 transposes.

use super::{run, CacheElem, Job, PANEL};
use crate::candle::cpu::lanes::x86::{Avx2, Avx512};
use std::arch::x86_64::*;

/// Tiles of 6 rows x 16 columns: 12 accumulators of the 16 ymm registers.
///
/// # Safety
/// The CPU must have AVX2 and FMA, and `job` must be valid (see `attend`).
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn avx2<E: CacheElem>(job: &Job<E>) {
    run::<Avx2, E, 6, 1>(job)
}

/// Tiles of 12 rows x 32 columns: 24 accumulators, 2 vectors of keys or values and a
/// broadcast of the 32 zmm registers.
///
/// # Safety
/// The CPU must have AVX-512F, and `job` must be valid (see `attend`).
#[target_feature(enable = "avx512f,avx2,fma")]
pub(super) unsafe fn avx512<E: CacheElem>(job: &Job<E>) {
    run::<Avx512, E, 12, 2>(job)
}

/// Packs 16 keys (rows `k_rs` values apart from `keys`) of `d` values, a multiple of
/// 16, into `panel` (`[d][16]` f32), by 16 x 16 transposes in registers.
///
/// # Safety
/// The CPU must have AVX-512F; `keys` must be valid for 16 rows of `d` floats and
/// `panel` hold 16 x d floats.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn transpose_panel<E: CacheElem>(
    panel: &mut [f32],
    keys: *const E,
    k_rs: usize,
    d: usize,
) {
    debug_assert!(panel.len() >= PANEL * d && d.is_multiple_of(PANEL));
    let out = panel.as_mut_ptr();
    for c in (0..d).step_by(PANEL) {
        let mut r = [_mm512_setzero_ps(); 16];
        for (i, v) in r.iter_mut().enumerate() {
            *v = E::lanes::<Avx512>(keys.add(i * k_rs + c)).0;
        }
        let t = transpose16(r);
        for (i, v) in t.iter().enumerate() {
            _mm512_storeu_ps(out.add((c + i) * PANEL), *v);
        }
    }
}

/// Rows r[0..16] of 16 floats into their columns.
#[inline(always)]
unsafe fn transpose16(r: [__m512; 16]) -> [__m512; 16] {
    let mut t = [_mm512_setzero_ps(); 16];
    for i in 0..8 {
        t[2 * i] = _mm512_unpacklo_ps(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(r[2 * i], r[2 * i + 1]);
    }
    // u[4g + j], in each 128-bit lane l: element 4l + j of rows 4g..4g + 4.
    let mut u = [_mm512_setzero_ps(); 16];
    for g in 0..4 {
        let (lo, hi) = (t[4 * g], t[4 * g + 1]);
        let (lo2, hi2) = (t[4 * g + 2], t[4 * g + 3]);
        u[4 * g] = _mm512_shuffle_ps::<0x44>(lo, lo2);
        u[4 * g + 1] = _mm512_shuffle_ps::<0xee>(lo, lo2);
        u[4 * g + 2] = _mm512_shuffle_ps::<0x44>(hi, hi2);
        u[4 * g + 3] = _mm512_shuffle_ps::<0xee>(hi, hi2);
    }
    // w[j] (j < 4): lanes hold columns j, j + 8 of rows 0..4, then of rows 4..8;
    // w[4 + j]: columns j + 4, j + 12 of the same; w[8..16]: the same of rows 8..16.
    let mut w = [_mm512_setzero_ps(); 16];
    for half in 0..2 {
        let (a, b) = (8 * half, 8 * half + 4);
        for j in 0..4 {
            w[a + j] = _mm512_shuffle_f32x4::<0x88>(u[a + j], u[b + j]);
            w[a + 4 + j] = _mm512_shuffle_f32x4::<0xdd>(u[a + j], u[b + j]);
        }
    }
    let mut out = [_mm512_setzero_ps(); 16];
    for j in 0..8 {
        out[j] = _mm512_shuffle_f32x4::<0x88>(w[j], w[8 + j]);
        out[j + 8] = _mm512_shuffle_f32x4::<0xdd>(w[j], w[8 + j]);
    }
    out
}
