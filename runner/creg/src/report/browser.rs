//! CREG samples in the report kit's sample browser: each with its regime, its
//! category, its stated-probability bin, the answer parsed again against its contract,
//! and the scenario's reference for the question (stored once per question).

use crate::place::Place;
use crate::record::Scenario;
use crate::render::question::Question;
use crate::score::aggregate::{reliability_bin, reliability_bin_label};
use crate::score::contract;
use crate::score::sample::SampleScore;
use runner_core::journal::SampleRecord;
use runner_core::report::browser::{Browser, BrowserSample, Filters};
use runner_engine::FinishReason;
use serde::Serialize;
use serde_json::{json, Map, Value};

/// The facet of a scored belief sample: its stated p(anomalous)'s reliability bin.
pub const STATED_BIN: &str = "stated bin";

/// Adds a journaled CREG sample with its score: the parsed answer is read again
/// against the contract, and the reference is the scenario's labels for the question.
pub fn push_sample(
    browser: &mut Browser,
    model: &str,
    r: &SampleRecord,
    place: Place,
    s: &Scenario,
    q: Question,
    score: &SampleScore,
) {
    let (parsed, why) = parsed(q, &r.text, r.finish_reason);
    let key = format!("{}|{}|{}", place.scenario, q.task_name(), place.step);
    if !browser.references.contains_key(&key) {
        browser.references.insert(key.clone(), reference(s, q));
    }
    browser.samples.push(BrowserSample {
        group: s.metadata.trajectory_regime.to_string(),
        category: score.category().to_string(),
        scenario: place.scenario.to_string(),
        condition: place.condition.to_string(),
        task: place.task.to_string(),
        step: place.step,
        filters: stated_bin(score),
        why,
        metrics: score
            .metrics()
            .into_iter()
            .filter_map(|(k, v)| Some((k.to_string(), v?)))
            .collect(),
        parsed,
        reference: Some(key),
        ..BrowserSample::of(model, r)
    });
}

/// The reliability bin a belief sample counts in (none after a contract failure, as in
/// the reliability table).
fn stated_bin(score: &SampleScore) -> Filters {
    match score {
        SampleScore::Belief(b) if !b.contract_failure => Filters(vec![(
            STATED_BIN.to_string(),
            reliability_bin_label(reliability_bin(b.p_anomalous)),
        )]),
        _ => Filters::default(),
    }
}

/// The answer as the contract reads it (category and fields), and why it failed, if it did.
fn parsed(q: Question, text: &str, finish: FinishReason) -> (Value, Option<String>) {
    fn pack<T: Serialize>(p: contract::Parsed<T>) -> (Value, Option<String>) {
        let why = match &p.category {
            contract::Category::Invalid { why } => Some(format!("invalid: {why}")),
            contract::Category::Truncated { recovered: false } => {
                Some("truncated: nothing recoverable".to_string())
            }
            _ => None,
        };
        let mut o = Map::new();
        o.insert(
            "contract".into(),
            serde_json::to_value(&p.category).unwrap_or(Value::Null),
        );
        o.insert(
            "answer".into(),
            serde_json::to_value(&p.answer).unwrap_or(Value::Null),
        );
        (Value::Object(o), why)
    }
    match q {
        Question::Belief { .. } => pack(contract::parse_belief(text, finish)),
        Question::Contradiction => pack(contract::parse_contradiction(text, finish)),
        Question::Action => pack(contract::parse_action(text, finish)),
        Question::Explanation => pack(contract::parse_explanation(text, finish)),
    }
}

/// The scenario's labels for one question.
fn reference(s: &Scenario, q: Question) -> Value {
    let e = &s.evaluation;
    let v = match q {
        Question::Belief { step } => e
            .belief_trajectory
            .get(step)
            .map(serde_json::to_value)
            .transpose(),
        Question::Contradiction => serde_json::to_value(&e.contradictions).map(Some),
        Question::Action => serde_json::to_value(&e.action).map(Some),
        Question::Explanation => {
            serde_json::to_value(json!({"beliefs": e.beliefs, "evidence": e.evidence})).map(Some)
        }
    };
    v.ok().flatten().unwrap_or(Value::Null)
}
