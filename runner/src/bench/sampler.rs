//! `runner bench --sampler`: one decode step's token choice over synthetic logits, the
//! full-vocabulary reference sampler beside the candidate-set sampler. No model loads.

use super::{row, BenchError, BenchSampling};
use crate::engine::candle::bench::sampler_bench;
use serde::Serialize;
use serde_json::Value;

#[derive(Debug, Clone, PartialEq)]
pub struct SamplerBench {
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
}

pub fn run(bench: &SamplerBench) -> Result<Vec<Value>, BenchError> {
    if bench.rows.contains(&0) || bench.vocab == 0 {
        return Err(BenchError::Workload(format!(
            "rows and --vocab must be 1 or more, got rows {:?} and vocab {}",
            bench.rows, bench.vocab
        )));
    }
    let rounds = bench.rounds.max(1);
    let mut out = Vec::new();
    for &rows in &bench.rows {
        let t = sampler_bench(rows, bench.vocab, rounds, bench.sampling.sampling())?;
        out.push(row(&SamplerResult {
            bench: "sampler",
            sampling: bench.sampling.name(),
            rows,
            vocab: bench.vocab,
            rounds,
            threads: rayon::current_num_threads(),
            reference_ms_per_step: t.reference_s * 1e3,
            candidates_ms_per_step: t.candidates_s * 1e3,
            speedup: t.reference_s / t.candidates_s,
            decided_by_candidates: t.decided,
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
            assert!(r["reference_ms_per_step"].as_f64().unwrap() > 0.0, "{r}");
            assert!(r["candidates_ms_per_step"].as_f64().unwrap() > 0.0, "{r}");
            let decided = r["decided_by_candidates"].as_f64().unwrap();
            assert!((0.0..=1.0).contains(&decided), "{r}");
        }
    }
}
