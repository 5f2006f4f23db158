//! The normative model (controlled-binary-bayes-v1): a log-odds updater that labels
//! every evidence prefix of a scenario from its agents, relations and observations.
//!
//! The generator calls it to derive every label; the independent checker does not
//! (it recomputes the same quantities on its own code path).

use crate::record::*;
use crate::spec::NormativeSpec;
use std::collections::BTreeSet;
use thiserror::Error;
use tracker::Tracker;

mod tracker;

/// The facts a scenario is built from; everything else is derived.
#[derive(Clone, Copy, Debug)]
pub struct Facts<'a> {
    pub agents: &'a [Agent],
    pub relations: &'a [Relation],
    pub observations: &'a [Observation],
}

#[derive(Debug, Error, PartialEq)]
pub enum ModelError {
    #[error("observation {evidence}: agent {agent} is not one of the scenario's agents")]
    UnknownAgent {
        evidence: EvidenceId,
        agent: AgentId,
    },
    #[error("observation {evidence}: {field} {value:?} is not an RFC 3339 time")]
    BadTime {
        evidence: EvidenceId,
        field: &'static str,
        value: String,
    },
    #[error("observation {evidence}: {field} {value} is outside [0.5, 1]")]
    OutOfRange {
        evidence: EvidenceId,
        field: &'static str,
        value: f64,
    },
}

/// The normative model, or a heuristic that is blind to one of its rules. The
/// heuristics are the baseline systems the scorer is tested with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Variant {
    Normative,
    /// Every source is taken as fully reliable (r = 1).
    ConfidenceOnly,
    /// Every sensor reading is taken to be about the target, whatever it measures.
    NoRelations,
    /// State epochs are ignored: older-epoch reports still count.
    NoEpochs,
    /// Only the newest active claim moves the belief.
    LatestWins,
}

/// How a report bears on the scored target.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Route {
    Direct,
    Transferred,
    Isolated,
}

/// An applicable claim about the target, with its log-odds weight toward `anomalous`.
#[derive(Clone, Debug)]
struct Claim {
    id: EvidenceId,
    state: State,
    epoch: u32,
    log_odds: f64,
}

/// a = 0.5 + (c - 0.5) r, as the specification defines it.
pub fn effective_accuracy(confidence: f64, reliability: f64) -> f64 {
    0.5 + (confidence - 0.5) * reliability
}

fn route(spec: &NormativeSpec, facts: &Facts, obs: &Observation, variant: Variant) -> Route {
    let target = &spec.target;
    if obs.subject_id == target.entity_id && obs.predicate == ObservationPredicate::Condition {
        return Route::Direct;
    }
    let rule = &spec.applicability;
    if variant == Variant::NoRelations && obs.predicate == rule.transfer_predicate {
        return Route::Transferred;
    }
    let transferred = obs.predicate == rule.transfer_predicate
        && facts.relations.iter().any(|r| {
            r.predicate == rule.transfer_relation
                && r.source_id == obs.subject_id
                && r.target_id == target.entity_id
                && r.confidence == rule.transfer_relation_confidence
        });
    if transferred {
        Route::Transferred
    } else {
        Route::Isolated
    }
}

/// Labels every prefix of a scenario and derives the endpoint summaries.
pub fn label(spec: &NormativeSpec, facts: &Facts) -> Result<Evaluation, ModelError> {
    label_with(spec, facts, Variant::Normative)
}

/// As [`label`], under a heuristic variant of the model.
pub fn label_with(
    spec: &NormativeSpec,
    facts: &Facts,
    variant: Variant,
) -> Result<Evaluation, ModelError> {
    let order = arrival_order(facts)?;
    let mut tracker = Tracker::new(spec, variant);
    let mut trajectory = vec![tracker.prior_step()];
    let mut evidence = Vec::new();
    let mut routes = Vec::new();
    for (i, (arrival, obs)) in order.iter().enumerate() {
        let agent = agent_of(facts, obs)?;
        let accuracy = accuracy_of(obs, agent, variant)?;
        let event_time = time_of(obs, "timestamp", &obs.timestamp)?;
        let r = route(spec, facts, obs, variant);
        routes.push(r);
        let weight = (accuracy / (1.0 - accuracy)).ln();
        trajectory.push(tracker.arrive(i + 1, obs, r, weight, *arrival > event_time));
        evidence.push(evidence_summary(obs, agent, accuracy, i + 1));
    }
    final_statuses(spec, &tracker, &mut evidence, &routes);
    Ok(evaluation(spec, &tracker, trajectory, evidence))
}

type Arrival<'a> = (chrono::DateTime<chrono::FixedOffset>, &'a Observation);

/// The observations by arrival time, ties broken by id.
fn arrival_order<'a>(facts: &Facts<'a>) -> Result<Vec<Arrival<'a>>, ModelError> {
    let mut order: Vec<Arrival<'a>> = Vec::new();
    for obs in facts.observations {
        order.push((
            time_of(obs, "arrival_time", &obs.metadata.arrival_time)?,
            obs,
        ));
    }
    order.sort_by(|a, b| (a.0, &a.1.id).cmp(&(b.0, &b.1.id)));
    Ok(order)
}

fn agent_of<'a>(facts: &Facts<'a>, obs: &Observation) -> Result<&'a Agent, ModelError> {
    facts
        .agents
        .iter()
        .find(|a| a.id == obs.agent_id)
        .ok_or_else(|| ModelError::UnknownAgent {
            evidence: obs.id.clone(),
            agent: obs.agent_id.clone(),
        })
}

/// The report's effective accuracy under the variant, once its confidence and its
/// agent's reliability are known to be in range.
fn accuracy_of(obs: &Observation, agent: &Agent, variant: Variant) -> Result<f64, ModelError> {
    check_range(obs, "confidence", obs.confidence)?;
    check_range(obs, "agent reliability", agent.metadata.reliability)?;
    let reliability = if variant == Variant::ConfidenceOnly {
        1.0
    } else {
        agent.metadata.reliability
    };
    Ok(effective_accuracy(obs.confidence, reliability))
}

/// The summary of one report as it arrived; its status is settled at the end.
fn evidence_summary(
    obs: &Observation,
    agent: &Agent,
    accuracy: f64,
    arrival_step: usize,
) -> EvidenceSummary {
    EvidenceSummary {
        evidence_id: obs.id.clone(),
        agent_id: agent.id.clone(),
        agent_kind: agent.kind,
        source_reliability: agent.metadata.reliability,
        confidence: obs.confidence,
        effective_accuracy: accuracy,
        timestamp: obs.timestamp.clone(),
        arrival_time: obs.metadata.arrival_time.clone(),
        arrival_step,
        state_epoch: obs.metadata.state_epoch,
        status: EvidenceStatus::Isolated,
        applies_to: None,
    }
}

/// Each report's status once everything has arrived, and whether it bears on the target.
fn final_statuses(
    spec: &NormativeSpec,
    tracker: &Tracker,
    evidence: &mut [EvidenceSummary],
    routes: &[Route],
) {
    for (summary, r) in evidence.iter_mut().zip(routes) {
        let id = &summary.evidence_id;
        summary.status = if tracker.active.iter().any(|c| &c.id == id) {
            EvidenceStatus::Active
        } else if tracker.superseded.contains(id) {
            EvidenceStatus::Superseded
        } else if tracker.stale.contains(id) {
            EvidenceStatus::Stale
        } else {
            EvidenceStatus::Isolated
        };
        if *r != Route::Isolated && summary.status != EvidenceStatus::Isolated {
            summary.applies_to = Some(spec.target.entity_id.clone());
        }
    }
}

/// The endpoint summaries, from the last step and the tracker's final state.
fn evaluation(
    spec: &NormativeSpec,
    tracker: &Tracker,
    trajectory: Vec<TrajectoryStep>,
    evidence: Vec<EvidenceSummary>,
) -> Evaluation {
    let last = trajectory.last().expect("the prior step is always present");
    let final_belief = last.reference_beliefs[0].clone();
    let contradictions = contradiction_summary(tracker, last);
    let action = endpoint_action(spec, last.action.reference_action.clone());
    Evaluation {
        belief_trajectory: trajectory,
        action,
        contradictions,
        beliefs: BeliefSummary {
            entity_id: final_belief.entity_id,
            attribute: final_belief.attribute,
            reference_state: final_belief.reference_state,
            probability_direction: final_belief.probability_direction,
            reference_distribution: final_belief.reference_distribution,
            supporting_evidence: final_belief.supporting_evidence,
            contradicting_evidence: final_belief.contradicting_evidence,
        },
        evidence,
    }
}

fn contradiction_summary(tracker: &Tracker, last: &TrajectoryStep) -> ContradictionSummary {
    ContradictionSummary {
        contradiction_present: tracker.conflict_active,
        contradiction_type: tracker
            .last_conflict
            .as_ref()
            .map(|_| ContradictionType::SameEpochValueConflict),
        involved_evidence_ids: last
            .contradictions
            .first()
            .map(|c| c.involved_evidence_ids.clone())
            .unwrap_or_default(),
        resolution_status: last.contradictions.first().map(|c| c.resolution_status),
        superseded_evidence_ids: tracker.superseded.clone(),
        onset_step: tracker.onset_step,
        resolution_step: tracker.resolution_step,
    }
}

fn endpoint_action(spec: &NormativeSpec, reference: ReferenceAction) -> EndpointAction {
    let rules = &spec.actions;
    let kind = reference.action_type;
    let admissible = rules
        .admissible
        .get(&kind)
        .cloned()
        .unwrap_or_else(|| vec![kind]);
    let rule = |name: &str, applies_to: Vec<ActionType>| ActionRule {
        rule: name.to_string(),
        applies_to,
    };
    EndpointAction {
        rules: vec![
            rule(spec.reference_rule(kind).unwrap_or("reference"), vec![kind]),
            rule(
                &format!("admissible_when_reference_is_{}", kind.name()),
                admissible.clone(),
            ),
            rule("inadmissible", rules.inadmissible.clone()),
            rule("unsafe", rules.unsafe_actions.clone()),
        ],
        reference_action: reference,
        admissible_actions: admissible,
        inadmissible_actions: rules.inadmissible.clone(),
        unsafe_actions: rules.unsafe_actions.clone(),
    }
}

fn time_of(
    obs: &Observation,
    field: &'static str,
    value: &str,
) -> Result<chrono::DateTime<chrono::FixedOffset>, ModelError> {
    parse_time(value).ok_or_else(|| ModelError::BadTime {
        evidence: obs.id.clone(),
        field,
        value: value.to_string(),
    })
}

fn check_range(obs: &Observation, field: &'static str, value: f64) -> Result<(), ModelError> {
    if (0.5..=1.0).contains(&value) {
        Ok(())
    } else {
        Err(ModelError::OutOfRange {
            evidence: obs.id.clone(),
            field,
            value,
        })
    }
}
