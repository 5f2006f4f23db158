//! Resident memory around a join of prefill caches, under the binary's allocator
//! settings (`process::tune`), which keep freed blocks resident for reuse. A test
//! binary of its own: it reads the whole process's memory, which no other test may
//! move meanwhile.

use candle_core::{DType, Device, Tensor};
use runner_engine::candle::runtime::kv_cache::KvCache;

const MIB: u64 = 1 << 20;

/// A field of /proc/self/status in bytes (VmRSS: resident now; VmHWM: the peak).
fn status_bytes(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let line = status
        .lines()
        .find(|l| l.starts_with(field))
        .unwrap_or_else(|| panic!("no {field} in /proc/self/status"));
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

#[test]
fn a_join_leaves_the_joined_cache_resident_not_the_parts_beside_it() {
    runner_engine::process::tune();
    if std::fs::write("/proc/self/clear_refs", "5").is_err() {
        eprintln!("skipped: the kernel does not let the peak be reset");
        return;
    }
    // Eight prefill groups of 2 rows, 8 layers: each layer's keys and values are 8 MiB
    // per group, under the allocator's 32 MiB threshold, so they sit in its heap, and
    // each group's logits stay alive after it, as `ModelRunner::prefill` keeps them.
    let (groups, layers, slots) = (8, 8, 1024);
    let mut parts = Vec::new();
    let mut logits = Vec::new();
    for g in 0..groups {
        let mut cache = KvCache::new(layers, vec![0; 2]);
        for l in 0..layers {
            let value = (g * layers + l) as f32;
            let kv = Tensor::full(value, (2, 4, slots, 128), &Device::Cpu).unwrap();
            cache.append(l, &kv, &kv).unwrap();
        }
        cache.advance(slots);
        parts.push(cache);
        logits.push(Tensor::ones((2, 8192), DType::F32, &Device::Cpu).unwrap());
    }
    let owned: u64 = parts.iter().map(|c| c.bytes() as u64).sum();
    assert_eq!(owned, 512 * MIB);
    let before = status_bytes("VmRSS:");
    std::fs::write("/proc/self/clear_refs", "5").unwrap();

    let joined = KvCache::join(parts, 0).unwrap();

    let after = status_bytes("VmRSS:");
    let peak = status_bytes("VmHWM:");
    assert_eq!(joined.bytes() as u64, owned);
    assert_eq!(joined.rows(), 2 * groups);
    // Had the parts' freed blocks stayed resident, `after` would be `before` plus the
    // joined cache (512 MiB more).
    assert!(
        after <= before + 64 * MIB,
        "resident {} MiB before the join, {} MiB after: the parts' memory stayed",
        before / MIB,
        after / MIB
    );
    // The plan's peak: the parts and the result's first layer (64 MiB), or the result
    // and the parts' last layer.
    assert!(
        peak <= before + 2 * 64 * MIB,
        "peak {} MiB over {} MiB resident before the join",
        peak / MIB,
        before / MIB
    );
    drop(logits);
}
