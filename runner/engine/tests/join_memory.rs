//! Resident memory around a join of prefill caches, under the binary's allocator
//! settings (`process::tune`), which keep freed blocks resident for reuse. A test
//! binary of its own: it reads the whole process's memory, which no other test may
//! move meanwhile.

use candle_core::{DType, Device, Tensor};
use runner_engine::candle::runtime::kv_cache::KvCache;
use runner_engine::peak_rss;

const MIB: u64 = 1 << 20;

#[test]
fn a_join_leaves_the_joined_cache_resident_not_the_parts_beside_it() {
    runner_engine::process::tune();
    if !peak_rss::reset() {
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
    let before = peak_rss::resident().expect("VmRSS");
    assert!(peak_rss::reset());

    let joined = KvCache::join(parts, 0).unwrap();

    let after = peak_rss::resident().expect("VmRSS");
    let peak = peak_rss::read().expect("VmHWM");
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
