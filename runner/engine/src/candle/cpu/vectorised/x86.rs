//! The AVX-512 builds. [`gated`](super::gated)'s is the portable code compiled for
//! AVX-512 (element by element, so any vector width gives the same bits).
//!
//! [`exp_shifted`](super::exp_shifted)'s is written out: the same operations as
//! the portable code in the same order, 16 lanes at a time, so that it gives the AVX2
//! build's bits (the tests compare them). The sum keeps the portable code's eight
//! partial sums: lane `j` adds the elements at `j`, `j + 8`, `j + 16`, .. in order, so
//! a 16-wide chunk adds its low half and then its high half.

use super::{gated_portable, GatedAct};
use std::arch::x86_64::*;
use std::mem::MaybeUninit;

/// # Safety
/// The CPU must have AVX-512F (with AVX2 and FMA).
#[target_feature(enable = "avx512f,avx2,fma")]
pub(super) unsafe fn gated_avx512(
    gate_up: &[f32],
    inner: usize,
    act: GatedAct,
    out: &mut [MaybeUninit<f32>],
) {
    gated_portable::<true>(gate_up, inner, act, out)
}

/// # Safety
/// The CPU must have AVX-512F (with AVX2 and FMA).
#[target_feature(enable = "avx512f,avx2,fma")]
pub(super) unsafe fn exp_shifted_avx512(x: &mut [f32], scale: f32) -> f32 {
    let len = x.len();
    let p = x.as_mut_ptr();
    let neg = _mm512_set1_ps(f32::NEG_INFINITY);
    // The maximum does not depend on the order it is taken in.
    let (mut m0, mut m1) = (neg, neg);
    let mut i = 0;
    while i + 32 <= len {
        m0 = _mm512_max_ps(_mm512_loadu_ps(p.add(i)), m0);
        m1 = _mm512_max_ps(_mm512_loadu_ps(p.add(i + 16)), m1);
        i += 32;
    }
    while i < len {
        let mask = tail_mask(len - i);
        m0 = _mm512_max_ps(_mm512_mask_loadu_ps(neg, mask, p.add(i)), m0);
        i += 16;
    }
    let shift = _mm512_reduce_max_ps(_mm512_max_ps(m0, m1)) * scale;
    let (vscale, vshift) = (_mm512_set1_ps(scale), _mm512_set1_ps(-shift));
    let exp = |v: __m512| exp16(_mm512_fmadd_ps(v, vscale, vshift));
    // Lanes 0..16 and 16..32 of the portable code's partial sums.
    let mut sums = [_mm512_setzero_ps(); 2];
    let mut i = 0;
    while i + 32 <= len {
        for (h, sum) in sums.iter_mut().enumerate() {
            let e = exp(_mm512_loadu_ps(p.add(i + 16 * h)));
            _mm512_storeu_ps(p.add(i + 16 * h), e);
            *sum = _mm512_add_ps(*sum, e);
        }
        i += 32;
    }
    // A partial chunk adds into its first lanes; the others add nothing (+0, exactly).
    let mut h = 0;
    while i < len {
        let mask = tail_mask(len - i);
        let e = _mm512_maskz_mov_ps(mask, exp(_mm512_maskz_loadu_ps(mask, p.add(i))));
        _mm512_mask_storeu_ps(p.add(i), mask, e);
        sums[h] = _mm512_add_ps(sums[h], e);
        i += 16;
        h += 1;
    }
    // The portable code's tree: lane j + 16 into j, then + 8, + 4, + 2, + 1.
    let s16 = _mm512_add_ps(sums[0], sums[1]);
    let s8 = _mm256_add_ps(
        _mm512_castps512_ps256(s16),
        _mm256_castpd_ps(_mm512_extractf64x4_pd::<1>(_mm512_castps_pd(s16))),
    );
    let s4 = _mm_add_ps(_mm256_castps256_ps128(s8), _mm256_extractf128_ps::<1>(s8));
    let s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
    let s1 = _mm_add_ss(s2, _mm_movehdup_ps(s2));
    _mm_cvtss_f32(s1)
}

/// The lanes of the first `n` (at most 16 counted) elements.
#[inline(always)]
fn tail_mask(n: usize) -> __mmask16 {
    if n >= 16 {
        0xffff
    } else {
        (1u16 << n) - 1
    }
}

/// [`exp_nonpositive`] on 16 lanes, operation for operation.
#[inline(always)]
unsafe fn exp16(x: __m512) -> __m512 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const ROUND: f32 = 12_582_912.0;
    let x = _mm512_max_ps(x, _mm512_set1_ps(-87.0));
    let t = _mm512_fmadd_ps(x, _mm512_set1_ps(LOG2E), _mm512_set1_ps(ROUND));
    let n = _mm512_sub_ps(t, _mm512_set1_ps(ROUND));
    // fma(-n, c, y) is -(n c) + y, one rounding either way.
    let r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693_359_4), x);
    let r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.121_944_4e-4), r);
    let mut p = _mm512_set1_ps(1.987_569_1e-4);
    for c in [
        1.398_199_9e-3,
        8.333_452e-3,
        4.166_579_6e-2,
        0.166_666_65,
        0.5,
    ] {
        p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(c));
    }
    let e_r = _mm512_fmadd_ps(
        p,
        _mm512_mul_ps(r, r),
        _mm512_add_ps(r, _mm512_set1_ps(1.0)),
    );
    // e_r * 2^n in one instruction: n is an integer in -126..=0, so 2^n is exact and
    // both this and the portable code's product by it round the same exact value once.
    _mm512_scalef_ps(e_r, n)
}
