//! The process's peak resident memory over one stretch of work, from the kernel's
//! high-water mark (`VmHWM`), which Linux lets a process lower back to what it holds
//! now: `runner bench`'s figure per run, and the memory tests'.

/// Lowers the high-water mark to the memory resident now, so that the next reading is
/// the peak since this call; false where the kernel does not allow it (the reading is
/// then the peak since the process started, which is never lower).
pub fn reset() -> bool {
    // "5" resets the peak RSS (proc(5), /proc/pid/clear_refs).
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// Bytes of the peak resident memory since the process started or since [`reset`].
pub fn read() -> Option<u64> {
    status_bytes("VmHWM:")
}

/// Bytes resident now.
pub fn resident() -> Option<u64> {
    status_bytes("VmRSS:")
}

/// A size field of /proc/self/status (in kB there) in bytes.
fn status_bytes(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reset_forgets_memory_that_was_freed_before_it() {
        if !reset() {
            return; // not Linux, or a kernel that keeps the mark
        }
        let before = read().expect("VmHWM");
        // 256 MiB touched and freed: the mark rises by about that much.
        let mut block = vec![0u8; 256 << 20];
        for page in block.chunks_mut(4096) {
            page[0] = 1;
        }
        std::hint::black_box(&block);
        let high = read().expect("VmHWM");
        drop(block);
        assert!(high >= before + (200 << 20), "{high} vs {before}");
        assert!(reset());
        let after = read().expect("VmHWM");
        assert!(after + (200 << 20) <= high, "{after} vs {high}");
    }
}
