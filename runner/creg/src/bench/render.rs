//! `runner render --bench`: rendering every prompt of some conditions and tasks.

use crate::bench::{row, BenchError};
use crate::frozen;
use crate::render::{Condition, Renderer, Task};
use serde::Serialize;
use serde_json::Value;
use std::time::Instant;

/// Timed passes; the best one is reported (the others measure the machine's noise).
const ROUNDS: usize = 5;

#[derive(Debug, Clone, Serialize)]
pub struct RenderResult {
    pub conditions: usize,
    pub tasks: usize,
    pub prompts: usize,
    pub text_mb: f64,
    pub rounds: usize,
    pub best_ms: f64,
    pub prompts_per_s: f64,
}

pub fn run(conditions: &[Condition], tasks: &[Task]) -> Result<Vec<Value>, BenchError> {
    let suite = frozen::frozen_suite()?;
    let renderer = Renderer::frozen()?;
    let mut best = f64::INFINITY;
    let (mut prompts, mut chars) = (0usize, 0usize);
    for _ in 0..ROUNDS {
        let started = Instant::now();
        (prompts, chars) = (0, 0);
        for s in &suite {
            for &c in conditions {
                for &t in tasks {
                    renderer.prompts(s, c, t, &mut |p| {
                        prompts += 1;
                        chars += p.text.len();
                    });
                }
            }
        }
        best = best.min(started.elapsed().as_secs_f64());
    }
    Ok(vec![row(&RenderResult {
        conditions: conditions.len(),
        tasks: tasks.len(),
        prompts,
        text_mb: chars as f64 / 1e6,
        rounds: ROUNDS,
        best_ms: best * 1e3,
        prompts_per_s: prompts as f64 / best,
    })])
}
