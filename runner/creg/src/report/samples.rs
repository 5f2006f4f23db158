//! `samples.jsonl`: one line per sample with what its scores were computed from, so a
//! reader can audit a verdict without decoding the report's data blocks: the request's
//! facets, the model and seed, the contract category (and why it failed), the answer as
//! the contract read it, the reference labels of the question, and the scores.

use runner_core::report::Browser;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;

/// The file's name in a run's (or a pooled report's) folder.
pub const SAMPLES_JSONL: &str = "samples.jsonl";

/// The request's facets, as the journal's request holds them.
#[derive(Serialize)]
struct Facets<'a> {
    scenario: &'a str,
    condition: &'a str,
    task: &'a str,
    step: usize,
}

#[derive(Serialize)]
struct Line<'a> {
    model: &'a str,
    request_id: &'a str,
    seed: u64,
    facets: Facets<'a>,
    regime: &'a str,
    category: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    why: Option<&'a str>,
    finish: &'a str,
    parsed: &'a Value,
    reference: &'a Value,
    scores: &'a BTreeMap<String, f64>,
}

/// The browser's samples as JSON Lines, in the order they were scored.
pub fn jsonl(b: &Browser) -> std::io::Result<String> {
    let mut out = String::new();
    for s in &b.samples {
        let line = Line {
            model: &s.model,
            request_id: &s.request_id,
            seed: s.seed,
            facets: Facets {
                scenario: &s.scenario,
                condition: &s.condition,
                task: &s.task,
                step: s.step,
            },
            regime: &s.group,
            category: &s.category,
            why: s.why.as_deref(),
            finish: &s.finish,
            parsed: &s.parsed,
            reference: s
                .reference
                .as_ref()
                .and_then(|k| b.references.get(k))
                .unwrap_or(&Value::Null),
            scores: &s.metrics,
        };
        out.push_str(&serde_json::to_string(&line).map_err(std::io::Error::other)?);
        out.push('\n');
    }
    Ok(out)
}
