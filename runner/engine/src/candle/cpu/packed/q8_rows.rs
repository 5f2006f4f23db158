//! The activations of an integer q8_0 product ([`super::q8_dot`]): each input row
//! quantized on its own, per block of 32 inputs, in GGML's q8_0 way: `d = max|x| / 127`,
//! `q = round(x * (1 / d))`. Two choices differ from GGML's, both for accuracy at no
//! cost: the scale `d` is kept in f32 (GGML rounds it to f16), and `round` takes ties
//! to even (GGML's reference rounds them away from zero, its AVX builds to even).
//!
//! A row's values depend on that row alone, so a row quantizes to the same bytes alone
//! and in any batch. The portable build and the AVX-512 one do the same IEEE
//! operations in the same order (no contraction; the largest magnitude is exact in any
//! order), so every kernel sees the same integers and scales (test
//! `the_avx512_quantizer_gives_the_portable_ones_bytes`).

use super::q8::{BLOCK, OFFSET};
use super::Isa;
use rayon::prelude::*;

/// Input rows, quantized per block.
pub struct Rows {
    /// `rows x k` int8 values.
    pub q: Vec<i8>,
    /// `rows x blocks` scales.
    pub scale: Vec<f32>,
    /// `rows x blocks`: 128 times the sum of the block's values, which the weights'
    /// offset adds to each block's dot product ([`super::q8`]).
    pub offset: Vec<i32>,
}

/// Quantizes `rows` rows of depth `k` (a whole number of blocks) with `isa`'s build;
/// rows in parallel when there are many.
pub fn quantize(x: &[f32], rows: usize, k: usize, isa: Isa) -> Rows {
    assert!(
        k.is_multiple_of(BLOCK) && x.len() == rows * k,
        "q8_0 rows: input length"
    );
    let blocks = k / BLOCK;
    let mut out = Rows {
        q: vec![0; rows * k],
        scale: vec![0.0; rows * blocks],
        offset: vec![0; rows * blocks],
    };
    let row = row_for(isa);
    if rows * k < 1 << 16 {
        x.chunks_exact(k)
            .zip(out.q.chunks_exact_mut(k))
            .zip(out.scale.chunks_exact_mut(blocks))
            .zip(out.offset.chunks_exact_mut(blocks))
            .for_each(|(((x, q), s), o)| row(x, q, s, o));
    } else {
        x.par_chunks_exact(k)
            .zip(out.q.par_chunks_exact_mut(k))
            .zip(out.scale.par_chunks_exact_mut(blocks))
            .zip(out.offset.par_chunks_exact_mut(blocks))
            .for_each(|(((x, q), s), o)| row(x, q, s, o));
    }
    out
}

/// One row's quantizer: its values into `q`, its blocks' scales and offset terms.
type RowFn = fn(&[f32], &mut [i8], &mut [f32], &mut [i32]);

fn row_for(isa: Isa) -> RowFn {
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 | Isa::Avx512Vnni | Isa::Amx => |x, q, s, o| {
            // Safety: these instruction sets include AVX-512F.
            unsafe { x86::row(x, q, s, o) }
        },
        _ => row,
    }
}

/// One row: its values into `q`, its blocks' scales and offset terms.
fn row(x: &[f32], q: &mut [i8], scale: &mut [f32], offset: &mut [i32]) {
    let (xs, qs) = (x.chunks_exact(BLOCK), q.chunks_exact_mut(BLOCK));
    for (((x, q), s), o) in xs.zip(qs).zip(scale).zip(offset) {
        (*s, *o) = block(x, q);
    }
}

/// 1.5 x 2^23: adding it to an f32 below 2^22 in magnitude and taking it off again
/// rounds to an integer, ties to even, with plain additions (which vectorise, where
/// `round_ties_even` is a library call on baseline x86_64).
const ROUNDER: f32 = 12_582_912.0;

/// One block: its values into `q`, and its scale and offset term.
#[inline(always)]
fn block(x: &[f32], q: &mut [i8]) -> (f32, i32) {
    let amax = x.iter().fold(0f32, |m, v| m.max(v.abs()));
    let d = amax / 127.0;
    let id = if d != 0.0 { 1.0 / d } else { 0.0 };
    let mut sum = 0i32;
    for (q, &v) in q.iter_mut().zip(x) {
        // |v * id| <= 127 but for rounding; a NaN or an infinite input gives 0.
        let r = ((v * id + ROUNDER) - ROUNDER) as i32;
        let r = r.clamp(-127, 127);
        *q = r as i8;
        sum += r;
    }
    (d, OFFSET * sum)
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{BLOCK, OFFSET, ROUNDER};
    use std::arch::x86_64::*;

    /// [`super::row`] 16 values at a time.
    #[target_feature(enable = "avx512f")]
    pub(super) fn row(x: &[f32], q: &mut [i8], scale: &mut [f32], offset: &mut [i32]) {
        let (xs, qs) = (x.chunks_exact(BLOCK), q.chunks_exact_mut(BLOCK));
        for (((x, q), s), o) in xs.zip(qs).zip(scale).zip(offset) {
            // Safety: a block holds 32 values and 32 bytes.
            (*s, *o) = unsafe { block(x.as_ptr(), q.as_mut_ptr()) };
        }
    }

    /// NaN lanes to zero.
    #[inline]
    #[target_feature(enable = "avx512f")]
    fn numbers(v: __m512) -> __m512 {
        _mm512_maskz_mov_ps(_mm512_cmp_ps_mask::<_CMP_ORD_Q>(v, v), v)
    }

    #[inline(always)]
    unsafe fn block(x: *const f32, q: *mut i8) -> (f32, i32) {
        let v = [_mm512_loadu_ps(x), _mm512_loadu_ps(x.add(16))];
        // `f32::max` passes over NaN, and the fold starts at zero: NaN counts as zero.
        let amax = _mm512_reduce_max_ps(_mm512_max_ps(
            numbers(_mm512_abs_ps(v[0])),
            numbers(_mm512_abs_ps(v[1])),
        ));
        let d = amax / 127.0;
        let id = _mm512_set1_ps(if d != 0.0 { 1.0 / d } else { 0.0 });
        let rounder = _mm512_set1_ps(ROUNDER);
        let (lo, hi) = (_mm512_set1_ps(-127.0), _mm512_set1_ps(127.0));
        let mut sum = _mm512_setzero_si512();
        for (h, v) in v.into_iter().enumerate() {
            let r = _mm512_sub_ps(_mm512_add_ps(_mm512_mul_ps(v, id), rounder), rounder);
            // `as i32` takes NaN to 0 and saturates, then the clamp: the same as
            // clamping the (whole) float and converting it exactly.
            let r = _mm512_cvttps_epi32(_mm512_min_ps(_mm512_max_ps(numbers(r), lo), hi));
            _mm_storeu_si128(q.add(16 * h).cast(), _mm512_cvtepi32_epi8(r));
            sum = _mm512_add_epi32(sum, r);
        }
        (d, OFFSET * _mm512_reduce_add_epi32(sum))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_take_the_scale_of_their_largest_value_and_round_ties_to_even() {
        // A largest value of 127 makes the scale 1: the values are rounded as they are.
        let mut x = vec![0f32; 2 * BLOCK];
        x[..5].copy_from_slice(&[-127.0, 63.5, 0.5, 2.5, 1.4]);
        let r = quantize(&x, 1, 2 * BLOCK, Isa::Scalar);
        assert_eq!(r.scale, [1.0, 0.0]);
        assert_eq!(&r.q[..5], &[-127, 64, 0, 2, 1]);
        assert!(r.q[5..].iter().all(|&q| q == 0));
        assert_eq!(r.offset, [128 * (-127 + 64 + 2 + 1), 0]);
    }

    #[test]
    fn the_avx512_quantizer_gives_the_portable_ones_bytes() {
        use crate::candle::cpu::isa::available_isas;
        let k = 8 * BLOCK;
        let rows = 64;
        // Spread magnitudes, with specials: NaN, infinities, signed zeros, ties, tiny
        // blocks (a subnormal scale), all-zero blocks.
        let mut x: Vec<f32> = (0..rows * k)
            .map(|i| {
                let t = (i as f32 * 0.618_034).fract();
                (t - 0.5) * 10f32.powi((i / BLOCK % 9) as i32 - 4)
            })
            .collect();
        let specials = [
            f32::NAN,
            f32::INFINITY,
            -f32::INFINITY,
            -0.0,
            0.5,
            2.5,
            1e-42,
        ];
        for (i, v) in specials.iter().enumerate() {
            x[i * 37 * BLOCK + 3] = *v;
        }
        x[5 * BLOCK..6 * BLOCK].fill(0.0);
        x[7 * BLOCK..8 * BLOCK].iter_mut().for_each(|v| *v *= 1e-38);
        for (i, v) in x[9 * BLOCK..10 * BLOCK].iter_mut().enumerate() {
            *v = if i == 0 { 127.0 } else { i as f32 - 15.5 };
        }
        let want = quantize(&x, rows, k, Isa::Scalar);
        for isa in available_isas() {
            let got = quantize(&x, rows, k, isa);
            assert_eq!(got.q, want.q, "{isa:?}");
            let bits = |s: &[f32]| s.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got.scale), bits(&want.scale), "{isa:?}");
            assert_eq!(got.offset, want.offset, "{isa:?}");
        }
    }
}
