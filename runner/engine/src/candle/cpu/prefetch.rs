//! Asking for memory ahead of its use, where a kernel's reads stream from memory in a
//! pattern the hardware prefetchers follow poorly (a decode step's attention over the
//! cache, the q8_0 weight panels).

/// Asks for the `bytes` from `start` to be brought into the second-level cache, line by
/// line. Only a hint: it reads nothing and cannot fault, so the range may run past the
/// data.
#[inline(always)]
pub fn into_l2<T>(start: *const T, bytes: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T1};
        const LINE: usize = 64;
        let start = start.cast::<i8>();
        for off in (0..bytes).step_by(LINE) {
            // SAFETY: a prefetch is a hint; it neither reads memory nor faults.
            unsafe { _mm_prefetch::<_MM_HINT_T1>(start.wrapping_add(off)) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (start, bytes);
}
