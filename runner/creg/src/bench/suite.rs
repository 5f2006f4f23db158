//! `runner suite bench`: generation, serialization, parsing and checking of the whole
//! CREG suite.

use crate::bench::{row, BenchError};
use crate::spec::NormativeSpec;
use crate::{checker, frozen, generator};
use serde::Serialize;
use serde_json::Value;
use std::time::Instant;

#[derive(Debug, Clone, Serialize)]
pub struct PhaseResult {
    pub phase: &'static str,
    pub median_ms: f64,
    pub min_ms: f64,
    pub iterations: usize,
}

/// Median and minimum of `iters` timed runs of `f`, in milliseconds.
fn time_ms<T>(iters: usize, mut f: impl FnMut() -> T) -> (f64, f64) {
    let mut ms: Vec<f64> = (0..iters.max(1))
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(f());
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    ms.sort_by(f64::total_cmp);
    (ms[ms.len() / 2], ms[0])
}

pub fn run(iters: usize) -> Result<Vec<Value>, BenchError> {
    let iters = iters.max(1);
    let spec = NormativeSpec::frozen();
    let sha = NormativeSpec::frozen_sha256();
    let suite = frozen::frozen_suite()?;
    // A suite that fails to regenerate would time an error path: find out first.
    frozen::regenerate()?;
    let phases = [
        (
            "generate (350 scenarios, all labels)",
            time_ms(iters, || frozen::regenerate().map(|s| s.len())),
        ),
        (
            "serialize to JSONL",
            time_ms(iters, || generator::to_jsonl(&suite).len()),
        ),
        (
            "parse + validate the frozen JSONL",
            time_ms(iters, || frozen::frozen_suite().map(|s| s.len())),
        ),
        (
            "check (1,500 steps, constraints, twins, table)",
            time_ms(iters, || checker::check(spec, sha, &suite).passed()),
        ),
        (
            "generate + check",
            time_ms(iters, || {
                frozen::regenerate().map(|s| checker::check(spec, sha, &s).passed())
            }),
        ),
    ];
    Ok(phases
        .into_iter()
        .map(|(phase, (median_ms, min_ms))| {
            row(&PhaseResult {
                phase,
                median_ms,
                min_ms,
                iterations: iters,
            })
        })
        .collect())
}
