//! How a Probe run's journaled samples score (one at a time, as the run streams them)
//! and aggregate into the report files: answers and follow-ups per (item, seed), then
//! the Probe scorer's reports.

use crate::render::{Phase, Question};
use crate::score::{
    compare_probe, score_pit, score_pit_query, score_probe, score_probe_item, Answer, PitResponse,
    ProbeResponse, RunReport, SystemReport,
};
use crate::workload::followup::{parse_followup, Followup};
use crate::workload::{ProbeWorkload, Scoring};
use runner_core::journal::SampleRecord;
use serde_json::json;
use std::collections::BTreeMap;

impl ProbeWorkload {
    /// Scores one journaled sample (pure).
    pub(super) fn judge(&self, q: Question, r: &SampleRecord) -> Scoring {
        let answer = Answer::text(&r.text);
        match q {
            Question::Core {
                item,
                phase: Phase::Followup,
            } => {
                let item = &self.set.core_items()[item];
                let (category, followup) = parse_followup(&r.text, r.finish_reason);
                let response = followup_response(&followup);
                let s = score_probe_item(item, &response);
                let inv = s.invalidation.as_ref();
                // Right: the axis, and exactly the gold statements invalidated.
                let exact = inv.is_some_and(|v| v.hits == v.total && v.predicted == v.total);
                let correct = s.axis_correct.map(|a| a && exact);
                Scoring {
                    scores: json!({
                        "correct": correct,
                        "category": category.name(),
                        "contract": category,
                        "invalidated": followup.as_ref().map(|f| &f.invalidated),
                        "axis": followup.as_ref().map(|f| f.axis),
                        "axis_correct": s.axis_correct,
                        "invalidation_hits": inv.map(|v| v.hits),
                        "invalidation_gold": inv.map(|v| v.total),
                        "invalidation_predicted": inv.map(|v| v.predicted),
                    }),
                    correct,
                    contract_failure: category.is_failure(),
                }
            }
            Question::Core { item, phase } => {
                let item = &self.set.core_items()[item];
                let mut response = ProbeResponse::default();
                if phase == Phase::Pre {
                    response.pre = answer;
                } else {
                    response.post = answer;
                }
                let s = score_probe_item(item, &response);
                let (outcome, em) = match phase {
                    Phase::Pre => (s.pre, s.pre_em),
                    _ => (s.post, s.post_em),
                };
                Scoring {
                    scores: json!({
                        "outcome": outcome.as_str(),
                        "correct": outcome.is_correct(),
                        "exact_match": em,
                    }),
                    correct: Some(outcome.is_correct()),
                    contract_failure: outcome.is_unusable(),
                }
            }
            Question::Pit { item, query } => {
                let item = &self.set.pit_items()[item];
                let s = score_pit_query(item, &item.queries[query], &answer);
                Scoring {
                    scores: json!({
                        "outcome": s.outcome.as_str(),
                        "correct": s.outcome.is_correct(),
                        "retracted_leak": s.retracted_leak,
                        "current_leak": s.current_leak,
                    }),
                    correct: Some(s.outcome.is_correct()),
                    contract_failure: s.outcome.is_unusable(),
                }
            }
        }
    }

    /// One system's journaled samples as responses per (item, seed): core responses,
    /// PIT responses, and the count of questions left unanswered in started items.
    fn responses(&self, records: &[SampleRecord]) -> Result<Responses, String> {
        let mut core: BTreeMap<(usize, u64), Slots> = BTreeMap::new();
        let mut pit: BTreeMap<(usize, u64), Vec<Option<Answer>>> = BTreeMap::new();
        for r in records {
            let q = self
                .locate(r)
                .map_err(|e| format!("request {} seed {}: {e}", r.request_id, r.seed))?;
            let answer = Some(Answer::text(&r.text));
            match q {
                Question::Core { item, phase } => {
                    let slot = core.entry((item, r.seed)).or_default();
                    match phase {
                        Phase::Pre => slot.pre = answer,
                        Phase::Post => slot.post = answer,
                        Phase::Followup => {
                            slot.followup = Some(parse_followup(&r.text, r.finish_reason).1)
                        }
                    }
                }
                Question::Pit { item, query } => {
                    let n = self.set.pit_items()[item].queries.len();
                    pit.entry((item, r.seed)).or_insert_with(|| vec![None; n])[query] = answer;
                }
            }
        }
        let mut unanswered = 0;
        let core = core
            .into_iter()
            .map(|((item, _), slot)| {
                unanswered += usize::from(slot.pre.is_none())
                    + usize::from(slot.post.is_none())
                    + usize::from(slot.followup.is_none());
                // An unasked follow-up (an unfinished run) scores like a failed one.
                let mut response = followup_response(&slot.followup.flatten());
                response.pre = slot.pre.unwrap_or_default();
                response.post = slot.post.unwrap_or_default();
                (item, response)
            })
            .collect();
        let pit = pit
            .into_iter()
            .map(|((item, _), answers)| {
                unanswered += answers.iter().filter(|a| a.is_none()).count();
                let answers = answers.into_iter().map(Option::unwrap_or_default).collect();
                (item, PitResponse { answers })
            })
            .collect();
        Ok(Responses {
            core,
            pit,
            unanswered,
        })
    }

    /// The report of `runs` (label, records), as the report files hold it.
    pub fn run_report(
        &self,
        runs: &[(String, Vec<SampleRecord>)],
        title: &str,
    ) -> Result<RunReport, String> {
        let core_items = self.set.core_items();
        let pit_items = self.set.pit_items();
        let mut all = Vec::new();
        for (label, records) in runs {
            all.push((label.as_str(), self.responses(records)?));
        }
        let mut systems = Vec::new();
        for (label, r) in &all {
            let core = pairs(core_items, &r.core);
            let pit = pairs(pit_items, &r.pit);
            systems.push(SystemReport {
                system: label.to_string(),
                probe: (!core.is_empty()).then(|| score_probe(label, &core)),
                pit: (!pit.is_empty()).then(|| score_pit(label, &pit)),
                unanswered: r.unanswered,
            });
        }
        let mut comparisons = Vec::new();
        if let Some(((first, r0), rest)) = all.split_first() {
            let a = pairs(core_items, &r0.core);
            for (label, r) in rest {
                let b = pairs(core_items, &r.core);
                if !a.is_empty() && !b.is_empty() {
                    comparisons.push(compare_probe((first, &a), (label, &b)));
                }
            }
        }
        Ok(RunReport::new(title, systems, comparisons).with_set(self.set.provenance()))
    }
}

/// Responses with the items they answer (`items[i]` for index `i`).
fn pairs<'a, T, R>(items: &'a [T], responses: &'a [(usize, R)]) -> Vec<(&'a T, &'a R)> {
    responses.iter().map(|(i, r)| (&items[*i], r)).collect()
}

/// The journaled answers of one (item, seed); the follow-up as parsed (`None` inside:
/// a contract failure).
#[derive(Default)]
struct Slots {
    pre: Option<Answer>,
    post: Option<Answer>,
    followup: Option<Option<Followup>>,
}

/// A response carrying what a follow-up said; a failed follow-up invalidates nothing
/// and has its axis counted wrong.
fn followup_response(followup: &Option<Followup>) -> ProbeResponse {
    match followup {
        Some(f) => ProbeResponse {
            invalidated: Some(f.invalidated.clone()),
            axis_pred: Some(f.axis),
            ..ProbeResponse::default()
        },
        None => ProbeResponse {
            invalidated: Some(Vec::new()),
            followup_failed: true,
            ..ProbeResponse::default()
        },
    }
}

/// One system's samples paired per (item, seed); the index is the item's position.
struct Responses {
    core: Vec<(usize, ProbeResponse)>,
    pit: Vec<(usize, PitResponse)>,
    unanswered: usize,
}
