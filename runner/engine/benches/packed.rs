//! GFMA/s of the packed linear kernel per format and instruction set, on the layer
//! shapes of the small fixture (hidden 256) and of a 7B model's attention (3584), at
//! Gemma 3 270M's MLP and output head (640 wide, 262,144 outputs), at the batch sizes
//! of prefill (a 1,500-token prompt) and decode (1, 8 and 32 rows).
//!
//!     cargo bench -p runner-engine --bench packed [-- FILTER]
//!
//! Each case is timed as the median of several runs after a warm-up; the figures are
//! for comparing kernels side by side in one run, on an otherwise idle machine.

use candle_core::{Device, Tensor};
use runner_engine::candle::cpu::isa::available_isas;
use runner_engine::candle::cpu::packed::{PackedWeight, Packing};
use std::time::Instant;

mod common;
use common::values;

fn main() {
    let filter = std::env::args().skip(1).find(|a| !a.starts_with('-'));
    // (name, outputs, depth): the small fixture's qkv, o, gate+up, down; a 7B's o.
    let shapes = [
        ("small.qkv", 384, 256),
        ("small.o", 256, 256),
        ("small.gate_up", 1408, 256),
        ("small.down", 256, 704),
        ("7b.o", 3584, 3584),
        ("gemma3.gate_up", 4096, 640),
        ("gemma3.down", 640, 2048),
        ("gemma3.head", 262_144, 640),
    ];
    println!(
        "{:<16} {:>5} {:>6} {:>8} {:>9} {:>8}",
        "shape", "rows", "format", "isa", "ms", "GFMA/s"
    );
    for (name, n, k) in shapes {
        let w = Tensor::from_vec(values(n * k, 3), (n, k), &Device::Cpu).unwrap();
        for packing in [Packing::F32, Packing::Bf16, Packing::Q8_0] {
            let packed = PackedWeight::pack(&[&w], packing).unwrap();
            for rows in [1usize, 8, 32, 1500] {
                let label = format!("{name} {rows} {packing:?}");
                if filter.as_ref().is_some_and(|f| !label.contains(f.as_str())) {
                    continue;
                }
                let x = values(rows * k, 5);
                let mut out = vec![0f32; rows * n];
                let fma = (rows * n * k) as f64;
                // About 0.2 s of work per timing, at least 3 runs.
                let reps = ((2e9 / fma) as usize).clamp(1, 20_000);
                for isa in available_isas().into_iter().rev().take(2) {
                    packed.matmul(&x, rows, &mut out, isa);
                    let mut times: Vec<f64> = (0..5)
                        .map(|_| {
                            let t = Instant::now();
                            for _ in 0..reps {
                                packed.matmul(&x, rows, &mut out, isa);
                            }
                            t.elapsed().as_secs_f64() / reps as f64
                        })
                        .collect();
                    times.sort_by(f64::total_cmp);
                    let t = times[2];
                    println!(
                        "{name:<16} {rows:>5} {:>6} {:>8} {:>9.3} {:>8.1}",
                        format!("{packing:?}"),
                        format!("{isa:?}"),
                        t * 1e3,
                        fma / t / 1e9
                    );
                }
            }
        }
    }
}
