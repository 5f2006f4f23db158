//! The AVX2 and AVX-512 entry points of the packed products: each instruction set's
//! tile shape, compiled with its features over the lanes of `cpu/lanes/x86.rs`.

use super::{group, Job, Weight};
use crate::candle::cpu::lanes::x86::{Avx2, Avx512};

pub(super) const AVX2_PANELS: usize = 2;
pub(super) const AVX512_PANELS: usize = 4;

/// 3 rows x 2 panels: 12 accumulators of the 16 ymm registers (each lane set is two).
#[target_feature(enable = "avx2,fma,f16c")]
pub(super) unsafe fn avx2<W: Weight>(job: &Job<W>, g: usize) {
    group::<Avx2, W, 3, AVX2_PANELS>(job, g)
}

/// 6 rows x 4 panels: 24 accumulators, 4 weight vectors and a broadcast of 32 zmm.
#[target_feature(enable = "avx512f")]
pub(super) unsafe fn avx512<W: Weight>(job: &Job<W>, g: usize) {
    group::<Avx512, W, 6, AVX512_PANELS>(job, g)
}
