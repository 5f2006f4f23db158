//! The instruction sets the CPU kernels run on. Each kernel has a build per set, and
//! all give the same bits (the kernels' tests compare them), so the choice is speed
//! alone: the widest this machine runs.

/// An instruction set a kernel can run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isa {
    Scalar,
    /// AVX2 with FMA and F16C.
    #[cfg(target_arch = "x86_64")]
    Avx2,
    /// AVX-512F, beside AVX2.
    #[cfg(target_arch = "x86_64")]
    Avx512,
    /// AVX-512F, BW and VNNI (integer dot products of bytes), beside AVX2: the q8_0
    /// product's integer kernel; the float kernels run as on `Avx512`.
    #[cfg(target_arch = "x86_64")]
    Avx512Vnni,
}

/// The instruction sets this machine runs, widest last.
pub fn available_isas() -> Vec<Isa> {
    #[allow(unused_mut)]
    let mut v = vec![Isa::Scalar];
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        if has!("avx2") && has!("fma") && has!("f16c") {
            v.push(Isa::Avx2);
            if has!("avx512f") {
                v.push(Isa::Avx512);
                if has!("avx512bw") && has!("avx512vnni") {
                    v.push(Isa::Avx512Vnni);
                }
            }
        }
    }
    v
}

/// The widest instruction set this machine runs.
pub fn best_isa() -> Isa {
    static BEST: std::sync::OnceLock<Isa> = std::sync::OnceLock::new();
    *BEST.get_or_init(|| *available_isas().last().unwrap_or(&Isa::Scalar))
}
