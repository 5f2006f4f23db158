//! The activations of an integer q8_0 product ([`super::q8_dot`]): each input row
//! quantized on its own, per block of 32 inputs, in GGML's q8_0 way: `d = max|x| / 127`,
//! `q = round(x * (1 / d))`. Two choices differ from GGML's, both for accuracy at no
//! cost: the scale `d` is kept in f32 (GGML rounds it to f16), and `round` takes ties
//! to even (GGML's reference rounds them away from zero, its AVX builds to even).
//!
//! A row's values depend on that row alone, so a row quantizes to the same bytes alone
//! and in any batch. One build of this code serves every instruction set (IEEE
//! arithmetic, no contraction), so every kernel sees the same integers and scales.

use super::q8::{BLOCK, OFFSET};
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

/// Quantizes `rows` rows of depth `k` (a whole number of blocks); rows in parallel
/// when there are many.
pub fn quantize(x: &[f32], rows: usize, k: usize) -> Rows {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_take_the_scale_of_their_largest_value_and_round_ties_to_even() {
        // A largest value of 127 makes the scale 1: the values are rounded as they are.
        let mut x = vec![0f32; 2 * BLOCK];
        x[..5].copy_from_slice(&[-127.0, 63.5, 0.5, 2.5, 1.4]);
        let r = quantize(&x, 1, 2 * BLOCK);
        assert_eq!(r.scale, [1.0, 0.0]);
        assert_eq!(&r.q[..5], &[-127, 64, 0, 2, 1]);
        assert!(r.q[5..].iter().all(|&q| q == 0));
        assert_eq!(r.offset, [128 * (-127 + 64 + 2 + 1), 0]);
    }
}
