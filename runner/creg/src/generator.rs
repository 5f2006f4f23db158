//! The generator: 50 scenarios per regime, drawn deterministically from the suite seed,
//! every label derived by the normative model.
//!
//! Each regime follows the construction in the project's design notes (one layout per
//! regime and case parity). Draws that would break the regime's intended labels or leave
//! too thin a margin, and draws that repeat an earlier scenario's semantic fingerprint,
//! are rejected and redrawn with the next attempt number.

use crate::draw::Draws;
use crate::model::{self, Facts, ModelError};
use crate::record::*;
use crate::spec::NormativeSpec;
use parts::*;
use regimes::Case;
use runner_engine::digest::sha256_hex;
use std::collections::BTreeSet;
use thiserror::Error;

mod parts;
mod regimes;

pub const SUITE_SEED: u64 = 20260725;
pub const CASES_PER_REGIME: u32 = 50;
pub const GENERATOR_VERSION: &str = "creg-runner-generator.1";
/// How far from a tie every determined step must stay, in probability.
const MARGIN: f64 = 0.02;
const MAX_ATTEMPTS: u32 = 10_000;

#[derive(Debug, Error)]
pub enum GenerateError {
    #[error(
        "{scenario}: no draw satisfied the regime's construction after {MAX_ATTEMPTS} attempts"
    )]
    Exhausted { scenario: ScenarioId },
    #[error("{scenario}: {source}")]
    Model {
        scenario: ScenarioId,
        source: ModelError,
    },
}

/// One report to be placed on the timeline.
#[derive(Clone, Debug)]
struct Report {
    agent: AgentKind,
    subject: &'static str,
    predicate: ObservationPredicate,
    value: ObservationValue,
    confidence: f64,
    /// Seconds after 12:00:00 of the event and of its arrival.
    event_s: u32,
    arrival_s: u32,
    epoch: u32,
    /// Indices (into the plan's reports) of the reports this one corrects.
    supersedes: Vec<usize>,
}

/// What the recipe says the labels must come out as; a draw that disagrees is redrawn.
#[derive(Clone, Debug)]
struct Expected {
    events: Vec<Vec<EventType>>,
    state: State,
    direction: ProbabilityDirection,
    action: ActionType,
}

#[derive(Clone, Debug)]
struct Plan {
    reliabilities: [f64; 3],
    /// Non-distractor reports, in arrival order.
    reports: Vec<Report>,
    distractor: Report,
    relations: Vec<Relation>,
    distractor_object: String,
    pair_id: Option<String>,
    expected: Expected,
    /// Source reliability: confidence-only fusion must keep this state.
    confidence_only_state: Option<State>,
}

pub fn scenario_id(regime: Regime, case: u32) -> ScenarioId {
    ScenarioId(format!(
        "evaluation-v1-{}-{SUITE_SEED}-{case:03}",
        regime.name()
    ))
}

use EventType::{
    ContradictionOnset as Onset, ContradictionResolution as Resolution, DelayedEvidence as Delayed,
    Initial, Isolate, Preserve, RelationAssociation as Assoc, StaleEvidence as Stale, Update,
};

/// The draws for one case; relation-association twins share their pair's draws.
fn draws_for(regime: Regime, case: u32, attempt: u32) -> Draws {
    let scope = match regime {
        Regime::RelationAssociation => format!("{}/pair-{:02}", regime.name(), case / 2),
        _ => format!("{}/{case:03}", regime.name()),
    };
    Draws::new(SUITE_SEED, &scope, attempt)
}

/// The regime's layout for one case at one attempt.
fn plan(regime: Regime, case: u32, attempt: u32) -> Plan {
    let draws = draws_for(regime, case, attempt);
    let k = Case::new(&draws, case);
    let mut p = default_plan(&k);
    match regime {
        Regime::JustifiedRevision => regimes::justified_revision(&k, &mut p),
        Regime::BeliefPreservation => regimes::belief_preservation(&k, &mut p),
        Regime::SourceReliability => regimes::source_reliability(&k, &mut p),
        Regime::ContradictionOnset => regimes::contradiction_onset(&k, &mut p),
        Regime::ContradictionResolution => regimes::contradiction_resolution(&k, &mut p),
        Regime::StaleDelayedEvidence => regimes::stale_delayed_evidence(&k, &mut p),
        Regime::RelationAssociation => regimes::relation_association(&k, &mut p),
    }
    p
}

/// What every layout starts from: the usual reliabilities, the distractor report, the
/// adjacency relation, and labels of a reversal to be verified.
fn default_plan(k: &Case) -> Plan {
    let distractor_value = if k.even {
        ObservationValue::Nominal
    } else {
        ObservationValue::Unknown
    };
    Plan {
        reliabilities: [
            k.reliability("robot", 0.70, 0.80),
            k.reliability("iot", 0.86, 0.94),
            k.reliability("edge", 0.52, 0.60),
        ],
        reports: Vec::new(),
        distractor: Report {
            agent: AgentKind::EdgeAi,
            subject: "distractor",
            predicate: ObservationPredicate::Indicator,
            value: distractor_value,
            confidence: k.confidence("distractor", 0.55, 0.70),
            event_s: 12,
            arrival_s: 12,
            epoch: 1,
            supersedes: Vec::new(),
        },
        relations: adjacent(),
        distractor_object: format!("distractor-{:03}", k.case),
        pair_id: None,
        expected: Expected {
            events: Vec::new(),
            state: k.x,
            direction: ProbabilityDirection::Reversed,
            action: ActionType::Verify,
        },
        confidence_only_state: None,
    }
}

/// Lays the plan out as the scenario's agents, objects, relations and observations.
fn facts_of(plan: &Plan) -> (Vec<Agent>, Vec<Object>, Vec<Observation>) {
    let agents = AGENTS
        .iter()
        .zip(plan.reliabilities)
        .map(|((kind, id), reliability)| Agent {
            id: AgentId::new(*id),
            kind: *kind,
            metadata: AgentMetadata { reliability },
        })
        .collect();
    let object = |id: &str, label: String, category| Object {
        id: ObjectId::new(id),
        label,
        category,
    };
    let distractor_no = plan.distractor_object.trim_start_matches("distractor-");
    let objects = vec![
        object("gauge-1", "Pressure Gauge 1".into(), ObjectCategory::Gauge),
        object("gauge-2", "Pressure Gauge 2".into(), ObjectCategory::Gauge),
        object("sensor-a", "Remote Sensor A".into(), ObjectCategory::Sensor),
        object("sensor-b", "Remote Sensor B".into(), ObjectCategory::Sensor),
        object(
            &plan.distractor_object,
            format!("Distractor {distractor_no}"),
            ObjectCategory::Panel,
        ),
    ];
    let ids: Vec<EvidenceId> = (1..=plan.reports.len())
        .map(|i| EvidenceId(format!("obs-{i}")))
        .collect();
    let observation = |r: &Report, id: EvidenceId, subject: &str| Observation {
        id,
        agent_id: agent_id(r.agent),
        subject_id: ObjectId::new(subject),
        predicate: r.predicate,
        value: r.value,
        confidence: r.confidence,
        timestamp: time(r.event_s, true),
        metadata: ObservationMetadata {
            arrival_time: time(r.arrival_s, false),
            state_epoch: r.epoch,
            supersedes_evidence_ids: r.supersedes.iter().map(|&i| ids[i].clone()).collect(),
        },
    };
    let mut observations: Vec<Observation> = plan
        .reports
        .iter()
        .zip(&ids)
        .map(|(r, id)| observation(r, id.clone(), r.subject))
        .collect();
    observations.push(observation(
        &plan.distractor,
        EvidenceId::new("obs-distractor"),
        &plan.distractor_object,
    ));
    (agents, objects, observations)
}

/// The semantic content of a scenario, without its id, case number or object names.
pub fn fingerprint(
    regime: Regime,
    agents: &[Agent],
    relations: &[Relation],
    obs: &[Observation],
) -> String {
    let observations: Vec<serde_json::Value> = obs
        .iter()
        .map(|o| {
            let mut v = serde_json::to_value(o).expect("records serialize");
            if o.predicate == ObservationPredicate::Indicator {
                v["subject_id"] = serde_json::Value::from("distractor");
            }
            v
        })
        .collect();
    let content = serde_json::json!({
        "regime": regime,
        "agents": agents,
        "relations": relations,
        "observations": observations,
    });
    sha256_hex(content.to_string().as_bytes())
}

/// Whether the labels came out as the recipe intends, with margin.
fn acceptable(plan: &Plan, eval: &Evaluation, agents: &[Agent], obs: &[Observation]) -> bool {
    let steps = &eval.belief_trajectory;
    let events: Vec<Vec<EventType>> = steps.iter().map(|s| s.event_types.clone()).collect();
    if events != plan.expected.events {
        return false;
    }
    let fin = &eval.beliefs;
    if fin.reference_state != plan.expected.state.into()
        || fin.probability_direction != plan.expected.direction
        || eval.action.reference_action.action_type != plan.expected.action
    {
        return false;
    }
    let clear = steps.iter().all(|s| {
        let b = &s.reference_beliefs[0];
        b.reference_state == ReferenceState::Undetermined
            || (b.reference_distribution.anomalous - 0.5).abs() >= MARGIN
    });
    if !clear {
        return false;
    }
    match plan.confidence_only_state {
        None => true,
        Some(kept) => {
            // Fusion that ignores reliability (r = 1) must keep `kept`, with margin.
            let log_odds: f64 = obs
                .iter()
                .filter_map(|o| o.value.state().map(|s| (o, s)))
                .filter(|(o, _)| agents.iter().any(|a| a.id == o.agent_id))
                .map(|(o, s)| {
                    let w = (o.confidence / (1.0 - o.confidence)).ln();
                    if s == State::Anomalous {
                        w
                    } else {
                        -w
                    }
                })
                .sum();
            let p_anomalous = 1.0 / (1.0 + (-log_odds).exp());
            let p_kept = if kept == State::Anomalous {
                p_anomalous
            } else {
                1.0 - p_anomalous
            };
            p_kept >= 0.5 + MARGIN
        }
    }
}

/// Generates the whole suite, regime by regime, case by case.
pub fn generate(spec: &NormativeSpec, spec_sha256: &str) -> Result<Vec<Scenario>, GenerateError> {
    let mut scenarios = Vec::with_capacity(Regime::ALL.len() * CASES_PER_REGIME as usize);
    let mut fingerprints = BTreeSet::new();
    for regime in Regime::ALL {
        // Twins are drawn together: both are accepted at the same attempt or neither is.
        let unit = if regime == Regime::RelationAssociation {
            2
        } else {
            1
        };
        for first in (0..CASES_PER_REGIME).step_by(unit) {
            let cases: Vec<u32> = (first..first + unit as u32).collect();
            scenarios.extend(generate_unit(
                spec,
                spec_sha256,
                regime,
                &cases,
                &mut fingerprints,
            )?);
        }
    }
    Ok(scenarios)
}

fn generate_unit(
    spec: &NormativeSpec,
    spec_sha256: &str,
    regime: Regime,
    cases: &[u32],
    fingerprints: &mut BTreeSet<String>,
) -> Result<Vec<Scenario>, GenerateError> {
    'attempts: for attempt in 0..MAX_ATTEMPTS {
        let mut unit = Vec::with_capacity(cases.len());
        let mut unit_prints = Vec::with_capacity(cases.len());
        for &case in cases {
            let id = scenario_id(regime, case);
            let plan = plan(regime, case, attempt);
            let (agents, objects, observations) = facts_of(&plan);
            let facts = Facts {
                agents: &agents,
                relations: &plan.relations,
                observations: &observations,
            };
            let evaluation = model::label(spec, &facts).map_err(|source| GenerateError::Model {
                scenario: id.clone(),
                source,
            })?;
            if !acceptable(&plan, &evaluation, &agents, &observations) {
                continue 'attempts;
            }
            let fp = fingerprint(regime, &agents, &plan.relations, &observations);
            if fingerprints.contains(&fp) || unit_prints.contains(&fp) {
                continue 'attempts;
            }
            unit_prints.push(fp);
            unit.push(Scenario {
                id,
                agents,
                objects,
                relations: plan.relations,
                observations,
                evaluation,
                metadata: ScenarioMetadata {
                    trajectory_regime: regime,
                    case_index: Some(case),
                    suite_seed: SUITE_SEED,
                    counterfactual_pair_id: plan.pair_id,
                    reference_model: spec.reference_model.clone(),
                    normative_spec_sha256: Some(spec_sha256.to_string()),
                    generator_version: Some(GENERATOR_VERSION.to_string()),
                },
            });
        }
        fingerprints.extend(unit_prints);
        return Ok(unit);
    }
    Err(GenerateError::Exhausted {
        scenario: scenario_id(regime, cases[0]),
    })
}

/// The suite as JSONL: one compact record per line, in generation order.
pub fn to_jsonl(scenarios: &[Scenario]) -> String {
    let mut out = String::new();
    for s in scenarios {
        out.push_str(&serde_json::to_string(s).expect("records serialize"));
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats;

    #[test]
    fn generated_suite_reproduces_every_published_count() {
        let spec = NormativeSpec::frozen();
        let suite = generate(spec, NormativeSpec::frozen_sha256()).unwrap();
        let prints: BTreeSet<String> = suite
            .iter()
            .map(|s| {
                fingerprint(
                    s.metadata.trajectory_regime,
                    &s.agents,
                    &s.relations,
                    &s.observations,
                )
            })
            .collect();
        let figures = stats::compare(&suite, &prints);
        let bad: Vec<_> = figures.iter().filter(|f| !f.ok()).collect();
        assert!(bad.is_empty(), "{}", stats::table(&figures));
    }
}
