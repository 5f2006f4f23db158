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
    /// AMX-INT8 tiles, beside AVX-512 VNNI: the q8_0 product's tiles of 16 rows; every
    /// other kernel, and the rows left over, run as on `Avx512Vnni`.
    #[cfg(target_arch = "x86_64")]
    Amx,
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
                    if amx::usable() {
                        v.push(Isa::Amx);
                    }
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

/// Whether AMX tiles can be used: the CPU has AMX-TILE and AMX-INT8, the kernel lets
/// this process use the tiles' state (Linux asks a process to request it once), and
/// `CREG_CPU_AMX` is not `off` (which leaves the q8_0 products to AVX-512 VNNI, for
/// comparing the two).
#[cfg(target_arch = "x86_64")]
mod amx {
    pub fn usable() -> bool {
        if std::env::var("CREG_CPU_AMX").is_ok_and(|v| v == "off") {
            return false;
        }
        in_cpu() && permitted()
    }

    /// Whether CPUID reports AMX-TILE and AMX-INT8.
    pub fn in_cpu() -> bool {
        let edx = std::arch::x86_64::__cpuid_count(7, 0).edx;
        edx >> 24 & 1 == 1 && edx >> 25 & 1 == 1
    }

    /// Asks Linux for the tile data state (`ARCH_REQ_XCOMP_PERM`, `XFEATURE_XTILEDATA`):
    /// without it the first tile instruction faults.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    fn permitted() -> bool {
        const ARCH_REQ_XCOMP_PERM: libc::c_long = 0x1023;
        const XFEATURE_XTILEDATA: libc::c_long = 18;
        // Safety: arch_prctl with these arguments only changes this process's permissions.
        unsafe {
            libc::syscall(
                libc::SYS_arch_prctl,
                ARCH_REQ_XCOMP_PERM,
                XFEATURE_XTILEDATA,
            ) == 0
        }
    }

    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    fn permitted() -> bool {
        false
    }
}

#[cfg(all(test, target_arch = "x86_64", target_os = "linux", target_env = "gnu"))]
mod tests {
    use super::*;

    /// AMX is detected where the CPU has it (unless turned off), so that the kernels'
    /// tests, which run every available set, cover its kernel on such a CPU.
    #[test]
    fn a_cpu_with_amx_int8_runs_the_amx_kernel() {
        let has = amx::in_cpu();
        let off = std::env::var("CREG_CPU_AMX").is_ok_and(|v| v == "off");
        let avx512 = available_isas().contains(&Isa::Avx512Vnni);
        assert_eq!(
            available_isas().contains(&Isa::Amx),
            has && avx512 && !off,
            "cpuid says AMX-INT8 {has}"
        );
    }
}
