//! The AVX2 and AVX-512 builds of [`Lanes`]: the scalar build's chains, one output
//! per f32 lane.

use super::{Lanes, PANEL};
use std::arch::x86_64::*;

#[derive(Clone, Copy)]
pub(crate) struct Avx2([__m256; 2]);

impl Lanes for Avx2 {
    #[inline(always)]
    fn zero() -> Self {
        // Safety: avx is implied by every caller's target features.
        unsafe { Avx2([_mm256_setzero_ps(); 2]) }
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        Avx2([_mm256_loadu_ps(p), _mm256_loadu_ps(p.add(8))])
    }
    #[inline(always)]
    unsafe fn load_bf16(p: *const u16) -> Self {
        Avx2([widen8(p), widen8(p.add(8))])
    }
    #[inline(always)]
    unsafe fn load_f16(p: *const u16) -> Self {
        Avx2([
            _mm256_cvtph_ps(_mm_loadu_si128(p.cast())),
            _mm256_cvtph_ps(_mm_loadu_si128(p.add(8).cast())),
        ])
    }
    #[inline(always)]
    fn fma(self, x: f32, w: Self) -> Self {
        // Safety: as for `zero`.
        unsafe {
            let xv = _mm256_set1_ps(x);
            Avx2([
                _mm256_fmadd_ps(xv, w.0[0], self.0[0]),
                _mm256_fmadd_ps(xv, w.0[1], self.0[1]),
            ])
        }
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32) {
        _mm256_storeu_ps(p, self.0[0]);
        _mm256_storeu_ps(p.add(PANEL / 2), self.0[1]);
    }
}

/// 8 bf16 values as f32 (exact: the bits shift into the high half).
#[inline(always)]
unsafe fn widen8(p: *const u16) -> __m256 {
    let h = _mm_loadu_si128(p.cast());
    _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16))
}

#[derive(Clone, Copy)]
pub(crate) struct Avx512(pub(crate) __m512);

impl Lanes for Avx512 {
    #[inline(always)]
    fn zero() -> Self {
        // Safety: avx512f is implied by every caller's target features.
        unsafe { Avx512(_mm512_setzero_ps()) }
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        Avx512(_mm512_loadu_ps(p))
    }
    #[inline(always)]
    unsafe fn load_bf16(p: *const u16) -> Self {
        let h = _mm256_loadu_si256(p.cast());
        Avx512(_mm512_castsi512_ps(_mm512_slli_epi32(
            _mm512_cvtepu16_epi32(h),
            16,
        )))
    }
    #[inline(always)]
    unsafe fn load_f16(p: *const u16) -> Self {
        Avx512(_mm512_cvtph_ps(_mm256_loadu_si256(p.cast())))
    }
    #[inline(always)]
    fn fma(self, x: f32, w: Self) -> Self {
        // Safety: as for `zero`.
        unsafe { Avx512(_mm512_fmadd_ps(_mm512_set1_ps(x), w.0, self.0)) }
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32) {
        _mm512_storeu_ps(p, self.0)
    }
}
