//! `runner score --bench`: parsing, scoring and aggregation of 55,200 belief samples
//! (4 conditions x 1,150 prefixes x 3 seeds x 4 systems), then outputs a degenerate
//! model writes, each of which must cost time linear in its length.

use crate::baseline::{self as baseline, System};
use crate::bench::{row, BenchError};
use crate::frozen;
use crate::render::question::{questions, Question};
use crate::render::Condition;
use crate::score::aggregate::{self, Scored};
use crate::score::sample::score_text;
use runner_engine::FinishReason;
use serde::Serialize;
use serde_json::Value;
use std::time::Instant;

/// The two tables of the scorer's bench.
#[derive(Debug, Clone)]
pub struct ScoreBenchResults {
    pub phases: Vec<Value>,
    pub degenerate: Vec<Value>,
}

#[derive(Debug, Clone, Serialize)]
pub struct PhaseResult {
    pub phase: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub samples: Option<usize>,
    pub time_s: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub samples_per_s: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct DegenerateResult {
    pub output: &'static str,
    pub bytes: usize,
    /// Mean over a stopped and a length-cut answer.
    pub parse_and_score_ms: f64,
}

/// Times the scorer; `degenerate_bytes` are the sizes of the degenerate outputs.
pub fn run(degenerate_bytes: &[usize]) -> Result<ScoreBenchResults, BenchError> {
    let suite = frozen::frozen_suite()?;
    let systems = [
        System::Oracle,
        System::ConfidenceOnly,
        System::LatestWins,
        System::Uniform,
    ];
    // The texts a model would have written, prepared before the clock starts.
    let mut texts = Vec::new();
    for system in systems {
        for s in &suite {
            for q in questions(s)
                .into_iter()
                .filter(|q| matches!(q, Question::Belief { .. }))
            {
                texts.push((system, s, q, baseline::answer(system, s, q)?));
            }
        }
    }
    let conditions: Vec<&str> = Condition::ALL
        .iter()
        .filter(|c| c.is_principal())
        .map(|c| c.name())
        .collect();
    let started = Instant::now();
    let mut samples: Vec<Scored> = Vec::with_capacity(texts.len() * 12);
    for (system, s, q, text) in &texts {
        for condition in &conditions {
            for seed in runner_core::protocol::SEEDS {
                let score = score_text(s, *q, text, FinishReason::Stop).ok_or_else(|| {
                    BenchError::MissingQuestion {
                        scenario: s.id.to_string(),
                        question: format!("{q:?}"),
                    }
                })?;
                samples.push(Scored::new(system.name(), condition, seed, s, *q, score));
            }
        }
    }
    let scored = started.elapsed().as_secs_f64();
    let agg = aggregate::aggregate(&samples, &suite);
    let total = started.elapsed().as_secs_f64();
    let n = samples.len();
    let phases = [
        PhaseResult {
            phase: "parse + score belief samples".to_string(),
            samples: Some(n),
            time_s: scored,
            samples_per_s: Some(n as f64 / scored),
        },
        PhaseResult {
            phase: format!(
                "aggregate ({} estimates, {} contrasts, {} resamples each)",
                agg.estimates.len(),
                agg.contrasts.len(),
                aggregate::RESAMPLES
            ),
            samples: None,
            time_s: total - scored,
            samples_per_s: None,
        },
        PhaseResult {
            phase: "total".to_string(),
            samples: Some(n),
            time_s: total,
            samples_per_s: Some(n as f64 / total),
        },
    ];
    let degenerate = degenerate(&suite[0], degenerate_bytes);
    Ok(ScoreBenchResults {
        phases: phases.iter().map(row).collect(),
        degenerate: degenerate.iter().map(row).collect(),
    })
}

/// Runs of `{`, nested arrays, an object cut off deep inside nesting.
fn degenerate(s: &crate::record::Scenario, sizes: &[usize]) -> Vec<DegenerateResult> {
    let q = Question::Belief { step: 1 };
    let mut out = Vec::new();
    for &n in sizes {
        let half = n / 2;
        let cases = [
            ("`{` repeated", "{".repeat(n)),
            (
                "nested arrays in an object",
                format!("{{\"a\": {}{}}}", "[".repeat(half), "]".repeat(half)),
            ),
            (
                "unclosed nested arrays",
                format!("{{\"a\": {}", "[".repeat(n)),
            ),
            ("`{\"a\":` repeated", "{\"a\":".repeat(n / 5)),
        ];
        for (output, text) in cases {
            let started = Instant::now();
            for finish in [FinishReason::Stop, FinishReason::Length] {
                std::hint::black_box(score_text(s, q, &text, finish));
            }
            out.push(DegenerateResult {
                output,
                bytes: text.len(),
                parse_and_score_ms: started.elapsed().as_secs_f64() * 1e3 / 2.0,
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn degenerate_outputs_of_each_kind_are_timed_at_their_size() {
        let suite = frozen::frozen_suite().unwrap();
        let rows = degenerate(&suite[0], &[1000]);
        assert_eq!(rows.len(), 4);
        assert_eq!(rows[0].bytes, 1000);
        assert_eq!(rows[3].bytes, 1000, "200 repeats of 5 bytes");
        assert!(rows.iter().all(|r| r.parse_and_score_ms > 0.0));
    }
}
