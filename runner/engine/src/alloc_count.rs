//! Host heap allocations, counted: a global allocator that forwards to the system's and
//! counts the calls and bytes, so that `runner bench` can report allocations per decode
//! step. On the CPU every candle op allocates its output, so the count is the nearest
//! measured figure to the op count of a step.
//!
//! Only a binary can install a global allocator (`runner`'s `main.rs` does); in a test
//! binary that does not, [`snapshot`] says so with `None` instead of reporting zeros.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::OnceLock;

/// Allocation calls and the bytes they asked for. Relaxed atomics: each counter is exact
/// once the threads that allocated are joined; between two reads on a busy process they
/// are a consistent-enough sum for per-step medians.
#[derive(Debug)]
pub struct Counter {
    allocs: AtomicU64,
    bytes: AtomicU64,
}

impl Counter {
    pub const fn new() -> Counter {
        Counter {
            allocs: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
        }
    }

    fn record(&self, bytes: usize) {
        self.allocs.fetch_add(1, Relaxed);
        self.bytes.fetch_add(bytes as u64, Relaxed);
    }

    pub fn read(&self) -> AllocCount {
        AllocCount {
            allocs: self.allocs.load(Relaxed),
            bytes: self.bytes.load(Relaxed),
        }
    }
}

impl Default for Counter {
    fn default() -> Self {
        Counter::new()
    }
}

/// Allocations and bytes allocated since the process started, or between two snapshots.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AllocCount {
    pub allocs: u64,
    pub bytes: u64,
}

impl AllocCount {
    /// What was allocated after `earlier` up to `self`.
    pub fn since(self, earlier: AllocCount) -> AllocCount {
        AllocCount {
            allocs: self.allocs.saturating_sub(earlier.allocs),
            bytes: self.bytes.saturating_sub(earlier.bytes),
        }
    }
}

/// The counter the installed allocator feeds.
static HEAP: Counter = Counter::new();

/// The system allocator with every allocation counted. A `realloc` counts as one
/// allocation of its new size: it is a call into the allocator that may move the block,
/// which is the cost being counted. Frees are not counted.
pub struct CountingAlloc {
    counter: &'static Counter,
}

impl CountingAlloc {
    /// The allocator `main.rs` installs, feeding [`snapshot`].
    pub const HEAP: CountingAlloc = CountingAlloc { counter: &HEAP };

    /// An allocator feeding its own counter (for calling it directly).
    pub const fn new(counter: &'static Counter) -> CountingAlloc {
        CountingAlloc { counter }
    }
}

// SAFETY: every call forwards to `System` with the caller's arguments unchanged, so the
// contract `System` keeps is the one this keeps; the counting touches only atomics and
// never allocates.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        self.counter.record(layout.size());
        System.alloc(layout)
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        self.counter.record(layout.size());
        System.alloc_zeroed(layout)
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout)
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        self.counter.record(new_size);
        System.realloc(ptr, layout, new_size)
    }
}

/// Whether [`CountingAlloc::HEAP`] is this process's global allocator: a heap
/// allocation made here must move its counter. Checked rather than declared, so that a
/// figure can never come from a counter nothing feeds; checked once, so that the probe
/// never lands between two snapshots.
pub fn installed() -> bool {
    static INSTALLED: OnceLock<bool> = OnceLock::new();
    *INSTALLED.get_or_init(|| {
        let before = HEAP.read().allocs;
        let probe = std::hint::black_box(Box::new(0u64));
        let after = HEAP.read().allocs;
        drop(probe);
        after != before
    })
}

/// Allocations so far in this process, or `None` when the counting allocator is not
/// installed (a count would read 0 and look like a measurement).
pub fn snapshot() -> Option<AllocCount> {
    installed().then(|| HEAP.read())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_direct_allocation_is_counted_with_its_size_and_a_realloc_with_its_new_size() {
        static OWN: Counter = Counter::new();
        let heap = CountingAlloc::new(&OWN);
        let start = OWN.read();
        let layout = Layout::from_size_align(4096, 8).unwrap();
        // SAFETY: a non-zero layout; the block is freed with the layout it now has.
        unsafe {
            let p = heap.alloc(layout);
            assert!(!p.is_null());
            let z = heap.alloc_zeroed(layout);
            assert!(!z.is_null() && *z.add(4095) == 0);
            heap.dealloc(z, layout);
            let q = heap.realloc(p, layout, 10_000);
            assert!(!q.is_null());
            heap.dealloc(q, Layout::from_size_align(10_000, 8).unwrap());
        }
        let used = OWN.read().since(start);
        assert_eq!(
            used,
            AllocCount {
                allocs: 3,
                bytes: 4096 + 4096 + 10_000
            }
        );
    }

    #[test]
    fn without_the_global_allocator_there_is_no_snapshot() {
        // The library's test binary does not install it, and the directly called
        // allocator above feeds its own counter, not the heap's.
        assert!(!installed());
        assert_eq!(snapshot(), None);
    }

    #[test]
    fn since_subtracts_and_never_underflows() {
        let a = AllocCount {
            allocs: 5,
            bytes: 100,
        };
        let b = AllocCount {
            allocs: 8,
            bytes: 160,
        };
        assert_eq!(
            b.since(a),
            AllocCount {
                allocs: 3,
                bytes: 60
            }
        );
        assert_eq!(a.since(b), AllocCount::default());
    }
}
