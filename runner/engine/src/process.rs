//! Process-wide settings for inference on the CPU, made once by the binary before any
//! other thread starts: candle's thread count read once, its element-wise pool kept
//! from spinning, and freed memory kept for reuse; and the call that hands freed
//! memory back when a large cache is gone.

/// Sets them all; call it first thing in `main`, before any thread exists (it sets
/// environment variables, which is unsound while other threads read the environment).
pub fn tune() {
    keep_freed_memory();
    count_cores_once();
    short_spins_in_candle_pool();
}

/// candle runs its element-wise ops on large tensors (a prefill's residual adds) in a
/// pool of its own, beside rayon's, whose workers spin 25,000 times after each op
/// before they sleep: on a machine with as many cores as threads they then take a core
/// from the matrix product that follows (about 1 ms per op at a pause instruction's
/// cost). 200 spins still catch back-to-back ops. Measured on 2 cores, 1,500-token
/// prompts: prefill 2-4% faster, decode unchanged (decode's ops are too small for the
/// pool). A value the user set is kept.
fn short_spins_in_candle_pool() {
    const VAR: &str = "CANDLE_BARRIER_POOL_SPIN_LIMIT";
    if std::env::var_os(VAR).is_none() {
        // No other thread exists yet, so nothing reads the environment meanwhile.
        std::env::set_var(VAR, "200");
    }
}

/// candle asks how many threads a CPU matrix product may use at every product, and
/// unless `RAYON_NUM_THREADS` is set it answers by reading `/proc/cpuinfo` (for the
/// physical cores), many times per decode step. Setting the variable once to that
/// same count makes every later answer a lookup. rayon's
/// global pool reads the same variable, so it is built here with its own default (the
/// logical CPUs): neither pool changes size.
fn count_cores_once() {
    if std::env::var_os("RAYON_NUM_THREADS").is_some() {
        return;
    }
    let physical = candle_core::utils::get_num_threads();
    let logical = std::thread::available_parallelism().map_or(1, |n| n.get());
    // No other thread exists yet, so nothing reads the environment meanwhile.
    std::env::set_var("RAYON_NUM_THREADS", physical.to_string());
    // A pool already built (there is none this early) keeps its size.
    let _ = rayon::ThreadPoolBuilder::new()
        .num_threads(logical)
        .build_global();
}

/// Every layer of a forward pass allocates and frees tensors of megabytes. By default
/// glibc serves those with fresh mappings or a heap top it trims on every free, so each
/// use starts with a page fault and zeroing per 4 KiB page. With 256 MiB of slack kept
/// at the heap top and blocks up to 32 MiB served from the heap, freed memory is
/// reused instead. The cost is resident memory that stays after a peak.
///
/// One heap for every thread: a run decodes on a rayon worker (`runtime::workers`),
/// after loading on the main thread, and a heap of the worker's own would keep a second
/// slack beside the main one's (measured: 60 MB more peak RSS at batch 1), and the
/// shared heap's lock cost no measurable decode speed.
fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets allocator parameters; it is called before any other
    // thread exists.
    unsafe {
        libc::mallopt(libc::M_TOP_PAD, 256 << 20);
        libc::mallopt(libc::M_MMAP_THRESHOLD, 32 << 20);
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

/// Hands the heap's freed memory back to the kernel: after a cache of hundreds of
/// megabytes was freed, which [`keep_freed_memory`] would otherwise keep resident
/// beside the memory that replaced it.
pub fn return_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only releases free pages of the allocator's own heaps.
    unsafe {
        libc::malloc_trim(0);
    }
}
