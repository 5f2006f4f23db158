//! Journal lines that do not belong to the plan their manifest describes.
//!
//! A journal line carries its request's facets (CREG: scenario, condition, task, step)
//! so that it can be scored without re-planning, and the reports group samples by
//! them. A line edited by hand (moved to a condition outside the plan, given another
//! step, a request or seed the plan never asked for) would otherwise be scored and
//! gain the report a row. The plan rebuilt from the manifest is the authority: each
//! line must name a planned request and seed and carry exactly that request's facets
//! and prompt hash.

use crate::journal::SampleRecord;
use crate::run::Job;
use std::collections::HashMap;

/// One line that does not belong to the plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stray {
    /// The journal line (from 1).
    pub line: usize,
    pub request: String,
    pub seed: u64,
    /// What differs, naming the field.
    pub why: String,
}

impl std::fmt::Display for Stray {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(
            f,
            "line {}: request {} seed {}: {}",
            self.line, self.request, self.seed, self.why
        )
    }
}

/// A plan's jobs by request id, to check many lines against.
pub struct Plan<'a> {
    by_id: HashMap<&'a str, &'a Job>,
}

impl<'a> Plan<'a> {
    pub fn new(jobs: &'a [Job]) -> Plan<'a> {
        Plan {
            by_id: jobs.iter().map(|j| (j.request.id.as_str(), j)).collect(),
        }
    }

    /// Why `rec` does not belong to the plan, naming the field; None when it does.
    pub fn why_not(&self, rec: &SampleRecord) -> Option<String> {
        let Some(job) = self.by_id.get(rec.request_id.as_str()) else {
            return Some("field `request_id`: the plan has no such request".into());
        };
        if !job.request.seeds.contains(&rec.seed) {
            let seeds: Vec<String> = job.request.seeds.iter().map(u64::to_string).collect();
            return Some(format!(
                "field `seed`: the plan asks this request for seeds {} only",
                seeds.join(", ")
            ));
        }
        if rec.prompt_sha256 != job.prompt_sha256 {
            return Some(format!(
                "field `prompt_sha256` is {}, but the plan's prompt hashes to {}",
                shown(&rec.prompt_sha256.as_str().into()),
                job.prompt_sha256
            ));
        }
        for (key, planned) in job.facets.iter() {
            match rec.facets.get(key) {
                None => return Some(format!("field `{key}` is missing (the plan has {planned})")),
                Some(v) if v != planned => {
                    return Some(format!(
                        "field `{key}` is {}, but the plan has {planned}",
                        shown(v)
                    ))
                }
                Some(_) => {}
            }
        }
        if rec.facets.len() != job.facets.len() {
            let extra = rec
                .facets
                .iter()
                .find(|(k, _)| job.facets.get(k).is_none())
                .map_or("?", |(k, _)| k);
            return Some(format!(
                "field `{extra}` is not one the plan gives its samples"
            ));
        }
        None
    }

    /// The lines of `records` (read from journal lines `lines`) that do not belong.
    pub fn strays(&self, records: &[SampleRecord], lines: &[usize]) -> Vec<Stray> {
        records
            .iter()
            .enumerate()
            .filter_map(|(k, rec)| {
                self.why_not(rec).map(|why| Stray {
                    line: lines.get(k).copied().unwrap_or(k + 1),
                    request: rec.request_id.clone(),
                    seed: rec.seed,
                    why,
                })
            })
            .collect()
    }
}

/// A value as a message shows it: at most 60 characters of its JSON.
fn shown(v: &serde_json::Value) -> String {
    let text = v.to_string();
    if text.chars().count() <= 60 {
        return text;
    }
    format!("{}…", text.chars().take(60).collect::<String>())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facets::Facets;
    use runner_engine::{Prompt, Request, RequestId, Sampling};

    fn job() -> Job {
        Job {
            request: Request {
                id: RequestId::new("r1"),
                prompt: Prompt::Raw("p".into()),
                seeds: vec![42, 43],
                max_new_tokens: 4,
                sampling: Sampling::Greedy,
            },
            facets: Facets::new()
                .with("scenario", "s")
                .with("condition", "full_graph")
                .with("step", 2),
            prompt_sha256: "h".into(),
        }
    }

    fn record(job: &Job, seed: u64) -> SampleRecord {
        SampleRecord {
            request_id: job.request.id.to_string(),
            seed,
            facets: job.facets.clone(),
            prompt_sha256: job.prompt_sha256.clone(),
            text: String::new(),
            tokens: 0,
            finish_reason: runner_engine::finish::FinishReason::Stop,
            prefill_ms: 0.0,
            decode_ms: 0.0,
            scores: serde_json::Value::Null,
        }
    }

    #[test]
    fn a_planned_line_belongs_and_each_edit_is_named_by_its_field() {
        let jobs = [job()];
        let plan = Plan::new(&jobs);
        let good = record(&jobs[0], 43);
        assert_eq!(plan.why_not(&good), None);
        let mut moved = good.clone();
        moved.facets.insert("condition".into(), "invented".into());
        let why = plan.why_not(&moved).unwrap();
        assert!(why.contains("`condition` is \"invented\"") && why.contains("full_graph"));
        let mut seed = good.clone();
        seed.seed = 7;
        assert!(plan.why_not(&seed).unwrap().contains("`seed`"));
        let mut request = good.clone();
        request.request_id = "elsewhere".into();
        assert!(plan.why_not(&request).unwrap().contains("`request_id`"));
        let mut prompt = good.clone();
        prompt.prompt_sha256 = "other".into();
        assert!(plan.why_not(&prompt).unwrap().contains("`prompt_sha256`"));
        let mut extra = good.clone();
        extra.facets.insert("regime".into(), "x".into());
        assert!(plan.why_not(&extra).unwrap().contains("`regime`"));
        let strays = plan.strays(&[good, moved], &[3, 9]);
        assert_eq!(strays.len(), 1);
        assert_eq!(strays[0].line, 9);
        assert!(strays[0]
            .to_string()
            .starts_with("line 9: request r1 seed 43: field"));
    }
}
