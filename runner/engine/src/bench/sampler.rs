//! `runner bench --sampler`: one decode step's token choice over synthetic logits, the
//! full-vocabulary reference sampler beside the candidate-set sampler, and the block
//! reads taken when the logits are on a device. No model loads.

use crate::bench::{row, BenchError, BenchSampling};
use crate::candle::bench::sampler_bench;
use crate::candle::runtime::device::{self, select_device, DeviceChoice};
use serde::Serialize;
use serde_json::Value;

#[derive(Debug, Clone, PartialEq)]
pub struct SamplerBench {
    /// Where the logits are held for the whole-row and block reads.
    pub device: DeviceChoice,
    /// Rows per step, each measured in turn.
    pub rows: Vec<usize>,
    pub vocab: usize,
    /// Alternating rounds of the two samplers.
    pub rounds: usize,
    pub sampling: BenchSampling,
}

/// One row count's figures. The field order is the table's column order.
#[derive(Debug, Clone, Serialize)]
pub struct SamplerResult {
    pub bench: &'static str,
    pub device: String,
    pub sampling: &'static str,
    pub rows: usize,
    pub vocab: usize,
    pub rounds: usize,
    pub threads: usize,
    pub reference_ms_per_step: f64,
    pub candidates_ms_per_step: f64,
    pub speedup: f64,
    /// The share of draws the candidate set decided without the reference.
    pub decided_by_candidates: f64,
    /// Token choice from logits held by the device: every row read whole (the way
    /// before; in place on the CPU), against block reads, whole and the host's part
    /// alone (on a GPU the block maxima and the gather are the device's work).
    pub whole_rows_ms_per_step: f64,
    pub blocks_ms_per_step: f64,
    pub blocks_host_ms_per_step: f64,
    pub blocks_speedup: f64,
    /// What whole rows move from a device per step, against what block reads move.
    pub whole_rows_kib_per_step: f64,
    pub blocks_kib_per_step: f64,
}

pub fn run(bench: &SamplerBench) -> Result<Vec<Value>, BenchError> {
    if bench.rows.contains(&0) || bench.vocab == 0 {
        return Err(BenchError::Workload(format!(
            "rows and --vocab must be 1 or more, got rows {:?} and vocab {}",
            bench.rows, bench.vocab
        )));
    }
    let rounds = bench.rounds.max(1);
    let (device, warning) = select_device(bench.device)?;
    if let Some(w) = warning {
        eprintln!("warning: {w}");
    }
    let mut out = Vec::new();
    for &rows in &bench.rows {
        let t = sampler_bench(
            rows,
            bench.vocab,
            rounds,
            bench.sampling.sampling(),
            &device,
        )?;
        out.push(row(&SamplerResult {
            bench: "sampler",
            device: device::name(&device),
            sampling: bench.sampling.name(),
            rows,
            vocab: bench.vocab,
            rounds,
            threads: rayon::current_num_threads(),
            reference_ms_per_step: t.reference_s * 1e3,
            candidates_ms_per_step: t.candidates_s * 1e3,
            speedup: t.reference_s / t.candidates_s,
            decided_by_candidates: t.decided,
            whole_rows_ms_per_step: t.whole_s * 1e3,
            blocks_ms_per_step: t.blocks_s * 1e3,
            blocks_host_ms_per_step: t.blocks_host_s * 1e3,
            blocks_speedup: t.whole_s / t.blocks_s,
            whole_rows_kib_per_step: (rows * bench.vocab * 4) as f64 / 1024.0,
            blocks_kib_per_step: t.blocks_bytes as f64 / 1024.0,
        }));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_sampler_bench_gives_one_positive_row_per_row_count() {
        let bench = SamplerBench {
            device: DeviceChoice::Cpu,
            rows: vec![1, 3],
            vocab: 512,
            rounds: 2,
            sampling: BenchSampling::Protocol,
        };
        let rows = run(&bench).unwrap();
        assert_eq!(rows.len(), 2);
        for (r, want) in rows.iter().zip([1, 3]) {
            assert_eq!(r["rows"], want);
            assert_eq!(r["sampling"], "protocol");
            assert_eq!(r["device"], "cpu");
            assert!(r["reference_ms_per_step"].as_f64().unwrap() > 0.0, "{r}");
            assert!(r["candidates_ms_per_step"].as_f64().unwrap() > 0.0, "{r}");
            let decided = r["decided_by_candidates"].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&decided), "{r}");
            // At least the block maxima, at most every block of every row again.
            let read = r["blocks_kib_per_step"].as_f64().unwrap();
            let whole = r["whole_rows_kib_per_step"].as_f64().unwrap();
            assert!(read > 0.0 && read <= 2.1 * whole, "{r}");
        }
    }
}
