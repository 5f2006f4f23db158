//! The x86 kernels of the integer q8_0 product. AVX-512 VNNI: `vpdpbusd` sums 4 products of
//! unsigned weight bytes and signed activation bytes into each 32-bit lane, 64 per
//! instruction. A tile of rows x panels keeps one integer accumulator per (row, panel)
//! for the block under way and one f32 accumulator for the chain over blocks. (And a
//! kernel for AVX2, which has no VNNI on most CPUs that lack AVX-512 VNNI.)

use super::super::q8::GROUP;
use super::super::PANEL;
use super::{Job, BLOCK};
use std::arch::x86_64::*;

/// Panels per tile (and per group of panels a thread takes).
pub(super) const PANELS: usize = 2;
/// Rows per tile: 4 x 2 integer and 4 x 2 f32 accumulators, 2 weight vectors and a
/// broadcast, of 32 zmm registers.
pub(super) const ROWS: usize = 4;

/// Panels `g * PANELS ..` (fewer at the end), every row.
#[target_feature(enable = "avx512f,avx512bw,avx512vnni")]
pub(super) unsafe fn vnni(job: &Job, g: usize) {
    let first = g * PANELS;
    let count = PANELS.min(job.panels - first);
    let mut r = 0;
    while r < job.rows {
        let mr = ROWS.min(job.rows - r);
        if count == PANELS {
            rows_tile::<PANELS>(job, mr, r, first);
        } else {
            for p in first..first + count {
                rows_tile::<1>(job, mr, r, p);
            }
        }
        r += mr;
    }
}

#[inline(always)]
pub(super) unsafe fn rows_tile<const NP: usize>(job: &Job, mr: usize, r: usize, p: usize) {
    match mr {
        1 => tile::<1, NP>(job, r, p),
        2 => tile::<2, NP>(job, r, p),
        3 => tile::<3, NP>(job, r, p),
        _ => tile::<ROWS, NP>(job, r, p),
    }
}

/// Rows `r..r+MR` by panels `p..p+NP`, over all blocks.
#[inline(always)]
unsafe fn tile<const MR: usize, const NP: usize>(job: &Job, r: usize, p: usize) {
    let (blocks, k) = (job.w.blocks, job.k);
    let mut acc = [[_mm512_setzero_ps(); NP]; MR];
    let xq = job.x.q[r * k..].as_ptr();
    for b in 0..blocks {
        let mut dot = [[_mm512_setzero_si512(); NP]; MR];
        let mut values = [std::ptr::null(); NP];
        for (j, v) in values.iter_mut().enumerate() {
            *v = job.values(p + j, b);
        }
        for g in 0..BLOCK / GROUP {
            let mut ws = [_mm512_setzero_si512(); NP];
            for (j, w) in ws.iter_mut().enumerate() {
                *w = _mm512_loadu_si512(values[j].add(g * GROUP * PANEL).cast());
            }
            for (i, d) in dot.iter_mut().enumerate() {
                let four = xq.add(i * k + b * BLOCK + g * GROUP);
                let xv = _mm512_set1_epi32(std::ptr::read_unaligned(four.cast::<i32>()));
                for (j, d) in d.iter_mut().enumerate() {
                    *d = _mm512_dpbusd_epi32(*d, ws[j], xv);
                }
            }
        }
        let mut wscale = [_mm512_setzero_ps(); NP];
        for (j, s) in wscale.iter_mut().enumerate() {
            *s = _mm512_cvtph_ps(_mm256_loadu_si256(job.scales(p + j, b).cast()));
        }
        for (i, (a, d)) in acc.iter_mut().zip(&dot).enumerate() {
            let row = (r + i) * blocks + b;
            let xs = _mm512_set1_ps(*job.x.scale.get_unchecked(row));
            let offset = _mm512_set1_epi32(*job.x.offset.get_unchecked(row));
            for (j, (a, d)) in a.iter_mut().zip(d).enumerate() {
                let exact = _mm512_cvtepi32_ps(_mm512_sub_epi32(*d, offset));
                *a = _mm512_fmadd_ps(exact, _mm512_mul_ps(wscale[j], xs), *a);
            }
        }
    }
    for (i, a) in acc.iter().enumerate() {
        for (j, a) in a.iter().enumerate() {
            _mm512_storeu_ps(job.out(r + i, p + j), *a);
        }
    }
}

/// Panel `p`, every row, for CPUs without VNNI: the weights are made signed again and
/// multiplied as GGML's AVX2 q8_0 product does, `maddubs(|x|, w * sign(x))`, whose
/// pairs stay within i16 (127 x 127 x 2; the quantizer writes no -128), then summed
/// into each 32-bit lane by `madd` with ones: the same integer dot, so the same bits.
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn avx2(job: &Job, p: usize) {
    let (blocks, k) = (job.w.blocks, job.k);
    let flip = _mm256_set1_epi8(i8::MIN);
    let ones = _mm256_set1_epi16(1);
    for r in 0..job.rows {
        let mut acc = [_mm256_setzero_ps(); 2];
        let xq = job.x.q[r * k..].as_ptr();
        for b in 0..blocks {
            let values = job.values(p, b);
            let mut dot = [_mm256_setzero_si256(); 2];
            for g in 0..BLOCK / GROUP {
                let four = xq.add(b * BLOCK + g * GROUP);
                let x = _mm256_set1_epi32(std::ptr::read_unaligned(four.cast::<i32>()));
                let ax = _mm256_abs_epi8(x);
                for (h, d) in dot.iter_mut().enumerate() {
                    let at = values.add(g * GROUP * PANEL + h * GROUP * PANEL / 2);
                    let w = _mm256_xor_si256(_mm256_loadu_si256(at.cast()), flip);
                    let pairs = _mm256_maddubs_epi16(ax, _mm256_sign_epi8(w, x));
                    *d = _mm256_add_epi32(*d, _mm256_madd_epi16(pairs, ones));
                }
            }
            let scales = job.scales(p, b);
            let xs = _mm256_set1_ps(*job.x.scale.get_unchecked(r * blocks + b));
            for (h, (a, d)) in acc.iter_mut().zip(dot).enumerate() {
                let s = _mm256_cvtph_ps(_mm_loadu_si128(scales.add(h * PANEL / 2).cast()));
                *a = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), _mm256_mul_ps(s, xs), *a);
            }
        }
        let out = job.out(r, p);
        _mm256_storeu_ps(out, acc[0]);
        _mm256_storeu_ps(out.add(PANEL / 2), acc[1]);
    }
}
