//! Baseline systems that answer without a network: the normative model itself and
//! heuristics blind to one of its rules. They answer in the same contract a model
//! does, so their text goes through the same parse-and-score path; they are the
//! scorer's own test (the oracle must score perfectly, each heuristic must fail the
//! regime it is blind to).

use crate::model::{self, Facts, ModelError, Variant};
use crate::record::*;
use crate::render::question::Question;
use crate::spec::NormativeSpec;
use runner_core::baseline::{Answers, BaselineBackend};
use serde_json::{json, Value};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum System {
    Oracle,
    ConfidenceOnly,
    NoRelations,
    NoEpochs,
    LatestWins,
    Uniform,
}

impl System {
    pub const ALL: [System; 6] = [
        System::Oracle,
        System::ConfidenceOnly,
        System::NoRelations,
        System::NoEpochs,
        System::LatestWins,
        System::Uniform,
    ];

    pub fn name(self) -> &'static str {
        match self {
            System::Oracle => "oracle",
            System::ConfidenceOnly => "confidence-only",
            System::NoRelations => "no-relations",
            System::NoEpochs => "no-epochs",
            System::LatestWins => "latest-wins",
            System::Uniform => "uniform",
        }
    }

    fn variant(self) -> Option<Variant> {
        match self {
            System::Oracle => Some(Variant::Normative),
            System::ConfidenceOnly => Some(Variant::ConfidenceOnly),
            System::NoRelations => Some(Variant::NoRelations),
            System::NoEpochs => Some(Variant::NoEpochs),
            System::LatestWins => Some(Variant::LatestWins),
            System::Uniform => None,
        }
    }
}

runner_core::system_names!(System);

/// The system's labels for the first `arrived` arrivals of `s` (all of them for the endpoint).
fn evaluate(
    system: System,
    s: &Scenario,
    arrived: usize,
) -> Result<Option<Evaluation>, ModelError> {
    let Some(variant) = system.variant() else {
        return Ok(None);
    };
    let order = s.arrival_order();
    let observations: Vec<Observation> = order.into_iter().take(arrived).cloned().collect();
    let facts = Facts {
        agents: &s.agents,
        relations: &s.relations,
        observations: &observations,
    };
    model::label_with(NormativeSpec::frozen(), &facts, variant).map(Some)
}

fn name<T: serde::Serialize>(v: T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// The belief answer at prefix `step` (1-based: the first `step` arrivals).
pub fn belief_answer(system: System, s: &Scenario, step: usize) -> Result<String, ModelError> {
    let spec = NormativeSpec::frozen();
    let Some(eval) = evaluate(system, s, step)? else {
        return Ok(json!({
            "target": format!("{}.{}", spec.target.entity_id, spec.target.attribute),
            "distribution": {"anomalous": 0.5, "normal": 0.5}, "top_state": "undetermined",
            "supporting_evidence_ids": [], "contradicting_evidence_ids": [], "active_contradictions": []
        })
        .to_string());
    };
    let last = eval
        .belief_trajectory
        .last()
        .expect("the prior step is always present");
    let b = &last.reference_beliefs[0];
    let contradictions: Vec<Value> = last
        .contradictions
        .iter()
        .filter(|c| c.contradiction_present)
        .map(|c| json!({"involved_evidence_ids": c.involved_evidence_ids, "type": c.contradiction_type}))
        .collect();
    Ok(json!({
        "target": format!("{}.{}", b.entity_id, b.attribute),
        "distribution": {"anomalous": b.reference_distribution.anomalous, "normal": b.reference_distribution.normal},
        "top_state": name(b.reference_state),
        "supporting_evidence_ids": b.supporting_evidence,
        "contradicting_evidence_ids": b.contradicting_evidence,
        "active_contradictions": contradictions,
    })
    .to_string())
}

/// The contradiction-detection answer at the endpoint.
pub fn contradiction_answer(system: System, s: &Scenario) -> Result<String, ModelError> {
    let Some(eval) = evaluate(system, s, s.observations.len())? else {
        return Ok(
            json!({"contradiction_present": false, "involved_evidence_ids": [],
            "contradiction_type": null, "resolution_status": "none"})
            .to_string(),
        );
    };
    let c = &eval.contradictions;
    Ok(json!({
        "contradiction_present": c.contradiction_present,
        "involved_evidence_ids": c.involved_evidence_ids,
        "contradiction_type": c.contradiction_type,
        "resolution_status": c.resolution_status.map_or(Value::Null, name),
    })
    .to_string())
}

/// The next-action answer at the endpoint.
pub fn action_answer(system: System, s: &Scenario) -> Result<String, ModelError> {
    let spec = NormativeSpec::frozen();
    let action = match evaluate(system, s, s.observations.len())? {
        Some(eval) => eval.action.reference_action.action_type,
        None => ActionType::RequestObservation,
    };
    Ok(
        json!({"action_type": action.name(), "target_entity_id": spec.target.entity_id})
            .to_string(),
    )
}

/// The explanation answer at the endpoint: cites the supporting evidence and says which
/// reports it set aside, and why.
pub fn explanation_answer(system: System, s: &Scenario) -> Result<String, ModelError> {
    let Some(eval) = evaluate(system, s, s.observations.len())? else {
        let all: Vec<&EvidenceId> = s.observations.iter().map(|o| &o.id).collect();
        return Ok(json!({"top_state": "undetermined",
            "explanation": "No report is weighed; both states stay equally likely.",
            "cited_evidence_ids": all})
        .to_string());
    };
    let b = &eval.beliefs;
    let state = name(b.reference_state);
    let state = state.as_str().unwrap_or("undetermined");
    let mut text = if b.supporting_evidence.is_empty() {
        format!(
            "{}.{} is {state}: no counted report supports a state.",
            b.entity_id, b.attribute
        )
    } else {
        let cited: Vec<&str> = b
            .supporting_evidence
            .iter()
            .map(EvidenceId::as_str)
            .collect();
        format!(
            "{}.{} is {state} on the evidence of {}.",
            b.entity_id,
            b.attribute,
            cited.join(", ")
        )
    };
    for e in &eval.evidence {
        match e.status {
            EvidenceStatus::Superseded => text.push_str(&format!(
                " {} does not count: it was superseded by a correction.",
                e.evidence_id
            )),
            EvidenceStatus::Stale => text.push_str(&format!(
                " {} does not count: it is stale, from an older epoch.",
                e.evidence_id
            )),
            _ => {}
        }
    }
    let cited = if b.supporting_evidence.is_empty() {
        eval.evidence
            .iter()
            .map(|e| e.evidence_id.clone())
            .take(1)
            .collect()
    } else {
        b.supporting_evidence.clone()
    };
    Ok(json!({"top_state": state, "explanation": text, "cited_evidence_ids": cited}).to_string())
}

/// The system's answer text to one question.
pub fn answer(system: System, s: &Scenario, q: Question) -> Result<String, ModelError> {
    match q {
        Question::Belief { step } => belief_answer(system, s, step),
        Question::Contradiction => contradiction_answer(system, s),
        Question::Action => action_answer(system, s),
        Question::Explanation => explanation_answer(system, s),
    }
}

/// A baseline system's answers, behind the [`Backend`](runner_engine::Backend) trait
/// through [`runner_core::baseline::BaselineBackend`], so that it takes the runner's
/// whole path (plan, journal, streaming scorer, reports) like a model. It reads the
/// scenario, not the prompt: each request asks a question of a scenario. Its answer
/// depends on neither condition nor seed.
pub struct CregAnswers {
    system: System,
    scenarios: std::collections::HashMap<ScenarioId, Scenario>,
}

/// The baseline `system` over `suite`, for requests asking `questions`.
pub fn backend(
    system: System,
    suite: &[Scenario],
    questions: impl IntoIterator<Item = (runner_engine::id::RequestId, ScenarioId, Question)>,
) -> BaselineBackend<CregAnswers> {
    let answers = CregAnswers {
        system,
        scenarios: suite.iter().map(|s| (s.id.clone(), s.clone())).collect(),
    };
    BaselineBackend::new(
        answers,
        questions.into_iter().map(|(id, s, q)| (id, (s, q))),
    )
}

impl Answers for CregAnswers {
    type Question = (ScenarioId, Question);

    fn describe(&self) -> String {
        format!("baseline {} (no network)", self.system)
    }

    fn answer(&self, (scenario, question): &(ScenarioId, Question)) -> Result<String, String> {
        let s = self
            .scenarios
            .get(scenario)
            .ok_or_else(|| format!("scenario {scenario} is not in the suite"))?;
        answer(self.system, s, *question).map_err(|e| format!("the normative model failed: {e}"))
    }
}
