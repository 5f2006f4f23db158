//! 16 f32 lanes, one output each: what the packed products' and attention's kernels
//! are written over. The portable build is here; the AVX2 and AVX-512 builds, which
//! give its bits (each lane one fused multiply-add chain), are in `lanes/x86.rs`.

/// f32 values in one set of lanes.
pub const LANES: usize = 16;
const PANEL: usize = LANES;

/// 16 f32 lanes.
pub(crate) trait Lanes: Copy {
    fn zero() -> Self;
    unsafe fn load(p: *const f32) -> Self;
    unsafe fn load_bf16(p: *const u16) -> Self;
    /// 16 IEEE half-precision values, each widened exactly.
    unsafe fn load_f16(p: *const u16) -> Self;
    /// `self + x * w`, rounded once per lane.
    fn fma(self, x: f32, w: Self) -> Self;
    unsafe fn store(self, p: *mut f32);
}

#[derive(Clone, Copy)]
pub(crate) struct Scalar([f32; PANEL]);

impl Lanes for Scalar {
    #[inline(always)]
    fn zero() -> Self {
        Scalar([0.0; PANEL])
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        Scalar(std::ptr::read_unaligned(p.cast()))
    }
    #[inline(always)]
    unsafe fn load_bf16(p: *const u16) -> Self {
        let bits: [u16; PANEL] = std::ptr::read_unaligned(p.cast());
        Scalar(bits.map(|b| f32::from_bits((b as u32) << 16)))
    }
    #[inline(always)]
    unsafe fn load_f16(p: *const u16) -> Self {
        let bits: [u16; PANEL] = std::ptr::read_unaligned(p.cast());
        Scalar(bits.map(|b| half::f16::from_bits(b).to_f32()))
    }
    #[inline(always)]
    fn fma(self, x: f32, w: Self) -> Self {
        let mut v = self.0;
        for (a, w) in v.iter_mut().zip(w.0) {
            *a = x.mul_add(w, *a);
        }
        Scalar(v)
    }
    #[inline(always)]
    unsafe fn store(self, p: *mut f32) {
        std::ptr::write_unaligned(p.cast(), self.0)
    }
}

#[cfg(target_arch = "x86_64")]
pub(crate) mod x86;
