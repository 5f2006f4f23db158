//! Milliseconds per step of the CPU attention kernel over Gemma 3 270M's 18 layers (4
//! query heads on one key head of 256; 3 global layers, 15 through a 512-slot window),
//! 1,628 slots, with an f32 and an f16 cache: a decode step at 1, 8 and 32 rows, and one
//! 128-query prefill chunk; and the cache bytes the step reads per second. The keys are
//! held in panels, as the model's cache holds them on the CPU, and by slot ("rows").
//!
//!     cargo bench -p runner-engine --bench attention [-- FILTER]
//!
//! Each case is the median of several runs after a warm-up; the figures are for
//! comparing the kernel with itself, before and after a change, on an idle machine.

use candle_core::{DType, Device, Tensor};
use runner_engine::candle::cpu::attention::attention_in;
use runner_engine::candle::runtime::kv_cache::{KvCache, SlotOrder, StepLayout};
use std::time::Instant;

mod common;
use common::values;

fn main() {
    let filter = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    let (heads, kv_heads, d, slots) = (4, 1, 256, 1628);
    // Gemma 3's 18 layers: every sixth global, the rest through a 512-slot window. Each
    // layer has its own cache, as in a model, so that a step's reads come from memory
    // rather than from a cache the step before left warm.
    let nl: usize = std::env::var("LAYERS")
        .map(|v| v.parse().unwrap())
        .unwrap_or(18);
    let windows: Vec<Option<usize>> = (0..nl)
        .map(|l| if l % 6 == 5 { None } else { Some(512) })
        .collect();
    println!("{:<20} {:>9} {:>9}", "case", "ms", "GB/s");
    for (phase, new) in [("decode", 1usize), ("prefill", 128)] {
        for rows in [1usize, 8, 32] {
            if phase == "prefill" && rows != 1 {
                continue;
            }
            for (dtype, order) in [DType::F32, DType::F16]
                .into_iter()
                .flat_map(|t| [(t, SlotOrder::Panels), (t, SlotOrder::Rows)])
            {
                let label = match order {
                    SlotOrder::Panels => format!("{phase} {rows} {dtype:?}"),
                    SlotOrder::Rows => format!("{phase} {rows} {dtype:?} rows"),
                };
                if filter.as_ref().is_some_and(|f| !label.contains(f.as_str())) {
                    continue;
                }
                let dev = Device::Cpu;
                let q = Tensor::from_vec(
                    values(rows * heads * new * d, 1),
                    (rows, heads, new, d),
                    &dev,
                )
                .unwrap();
                let kv = |seed| {
                    Tensor::from_vec(
                        values(rows * kv_heads * slots * d, seed),
                        (rows, kv_heads, slots, d),
                        &dev,
                    )
                    .unwrap()
                    .to_dtype(dtype)
                    .unwrap()
                };
                let pad: Vec<usize> = (0..rows).map(|b| b * 7).collect();
                // Written as a model's cache writes them.
                let caches: Vec<(Tensor, Tensor)> = (0..windows.len() as u64)
                    .map(|l| {
                        let mut cache = KvCache::new(1, pad.clone());
                        let (k, v) = (kv(2 + 2 * l), kv(3 + 2 * l));
                        cache.append_in(0, &k, &v, order).unwrap()
                    })
                    .collect();
                let layout = StepLayout {
                    past: slots - new,
                    new,
                    pad: pad.clone(),
                };
                let scale = 1.0 / (d as f32).sqrt();
                let step = || {
                    for ((k, v), &window) in caches.iter().zip(&windows) {
                        std::hint::black_box(
                            attention_in(&q, (k, order), v, &layout, window, scale).unwrap(),
                        );
                    }
                };
                step();
                let mut times: Vec<f64> = (0..7)
                    .map(|_| {
                        let t = Instant::now();
                        step();
                        t.elapsed().as_secs_f64() * 1e3
                    })
                    .collect();
                times.sort_by(f64::total_cmp);
                let ms = times[3];
                // Keys and values of every slot a query of the step sees.
                let read: usize = windows
                    .iter()
                    .map(|w| {
                        pad.iter()
                            .map(|p| w.unwrap_or(slots).min(slots - p))
                            .sum::<usize>()
                    })
                    .sum::<usize>()
                    * kv_heads
                    * d
                    * 2
                    * dtype.size_in_bytes();
                println!("{label:<20} {ms:>9.3} {:>9.1}", read as f64 / ms / 1e6);
            }
        }
    }
}
