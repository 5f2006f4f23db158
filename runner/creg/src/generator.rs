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
use runner_engine::digest::sha256_hex;
use std::collections::BTreeSet;
use thiserror::Error;

mod parts;

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

fn plan(regime: Regime, case: u32, attempt: u32) -> Plan {
    use AgentKind::{EdgeAi as Edge, IotSensor as Iot, Robot};
    let d = &draws_for(regime, case, attempt);
    use ProbabilityDirection::*;
    let x = state_of_parity(case);
    let even = case.is_multiple_of(2);
    let delay = d.integer("delay", 3, 4);
    let rel = |name: &str, lo: f64, hi: f64| d.hundredths(&format!("reliability/{name}"), lo, hi);
    let conf = |name: &str, lo: f64, hi: f64| d.hundredths(&format!("confidence/{name}"), lo, hi);
    let mut reliabilities = [
        rel("robot", 0.70, 0.80),
        rel("iot", 0.86, 0.94),
        rel("edge", 0.52, 0.60),
    ];
    let distractor_value = if even {
        ObservationValue::Nominal
    } else {
        ObservationValue::Unknown
    };
    let mut distractor = Report {
        agent: Edge,
        subject: "distractor",
        predicate: ObservationPredicate::Indicator,
        value: distractor_value,
        confidence: conf("distractor", 0.55, 0.70),
        event_s: 12,
        arrival_s: 12,
        epoch: 1,
        supersedes: Vec::new(),
    };
    let mut p = Plan {
        reliabilities,
        reports: Vec::new(),
        distractor: distractor.clone(),
        relations: adjacent(),
        distractor_object: format!("distractor-{case:03}"),
        pair_id: None,
        expected: Expected {
            events: Vec::new(),
            state: x,
            direction: Reversed,
            action: ActionType::Verify,
        },
        confidence_only_state: None,
    };
    let ev = |steps: &[&[EventType]]| -> Vec<Vec<EventType>> {
        let mut all = vec![vec![Initial]];
        all.extend(steps.iter().map(|s| s.to_vec()));
        all
    };
    let settle_action = |s: State| match s {
        State::Anomalous => ActionType::Inspect,
        State::Normal => ActionType::Monitor,
    };
    match regime {
        Regime::JustifiedRevision => {
            reliabilities[0] = rel("robot", 0.70, 0.75);
            reliabilities[1] = rel("iot", 0.88, 0.92);
            p.reports = vec![
                condition(Robot, x, conf("a", 0.70, 0.80), 10, 0),
                condition(Iot, x.opposite(), conf("b", 0.88, 0.95), 20, delay),
            ];
            p.expected.events = ev(&[&[Update], &[Isolate], &[Delayed, Onset, Update]]);
            p.expected.state = x.opposite();
        }
        Regime::BeliefPreservation => {
            p.reports = vec![
                condition(Iot, x, conf("a", 0.86, 0.95), 10, 0),
                condition(Robot, x.opposite(), conf("b", 0.62, 0.72), 20, delay),
            ];
            p.expected.events = ev(&[&[Update], &[Isolate], &[Delayed, Onset, Preserve]]);
            p.expected.direction = Weakened;
        }
        Regime::SourceReliability => {
            reliabilities[1] = rel("iot", 0.90, 0.95);
            reliabilities[2] = rel("edge", 0.52, 0.56);
            p.reports = vec![
                condition(Edge, x, conf("a", 0.92, 0.97), 10, 0),
                condition(Iot, x.opposite(), conf("b", 0.80, 0.86), 20, delay),
            ];
            p.expected.events = ev(&[&[Update], &[Isolate], &[Delayed, Onset, Update]]);
            p.expected.state = x.opposite();
            p.confidence_only_state = Some(x);
        }
        Regime::ContradictionOnset if even => {
            p.reports = vec![
                condition(Iot, State::Normal, conf("a", 0.85, 0.95), 10, 0),
                condition(Robot, State::Anomalous, conf("b", 0.72, 0.82), 20, 0),
            ];
            p.expected.events = ev(&[&[Update], &[Isolate], &[Onset, Preserve]]);
            p.expected.state = State::Normal;
            p.expected.direction = Weakened;
        }
        Regime::ContradictionOnset => {
            p.reports = vec![
                condition(Robot, State::Anomalous, conf("a", 0.70, 0.78), 10, 0),
                condition(Iot, State::Normal, conf("b", 0.85, 0.95), 20, delay),
            ];
            p.expected.events = ev(&[&[Update], &[Isolate], &[Delayed, Onset, Update]]);
            p.expected.state = State::Normal;
        }
        Regime::ContradictionResolution => {
            reliabilities[0] = rel("robot", 0.72, 0.80);
            reliabilities[1] = rel("iot", 0.88, 0.94);
            let (a, b, c) = if even {
                (
                    condition(Iot, State::Normal, conf("a", 0.80, 0.86), 10, 0),
                    condition(Robot, State::Anomalous, conf("b", 0.78, 0.84), 20, 0),
                    condition(Iot, State::Normal, conf("c", 0.93, 0.98), 30, delay),
                )
            } else {
                (
                    condition(Robot, State::Anomalous, conf("a", 0.70, 0.78), 10, 0),
                    condition(Iot, State::Normal, conf("b", 0.85, 0.95), 20, 0),
                    condition(Iot, State::Anomalous, conf("c", 0.90, 0.97), 30, delay),
                )
            };
            p.reports = vec![a, b, c];
            p.reports[2].supersedes = vec![1];
            if case == 0 {
                // The published worked example, value for value.
                reliabilities = [0.78, 0.91, 0.52];
                p.reports[0].confidence = 0.83;
                p.reports[1].confidence = 0.84;
                p.reports[2].confidence = 0.96;
                p.reports[2].arrival_s = 34;
                distractor.confidence = 0.6;
            }
            if even {
                p.expected.events = ev(&[
                    &[Update],
                    &[Isolate],
                    &[Onset, Preserve],
                    &[Delayed, Resolution, Preserve],
                ]);
                p.expected.state = State::Normal;
                p.expected.direction = Strengthened;
                p.expected.action = ActionType::Monitor;
            } else {
                p.expected.events = ev(&[
                    &[Update],
                    &[Isolate],
                    &[Onset, Update],
                    &[Delayed, Resolution, Update],
                ]);
                p.expected.state = State::Anomalous;
                p.expected.action = ActionType::Inspect;
            }
        }
        Regime::StaleDelayedEvidence => {
            let mut a = condition(Iot, x, conf("a", 0.80, 0.90), 10, 0);
            let (d_event, s_arrival) = if even { (20, 30) } else { (26, 20) };
            let mut late = condition(Robot, x, conf("d", 0.70, 0.85), d_event, delay);
            let mut stale = condition(Edge, x.opposite(), conf("s", 0.80, 0.95), 5, 0);
            stale.arrival_s = s_arrival;
            a.epoch = 2;
            late.epoch = 2;
            distractor.epoch = 2;
            if even {
                p.reports = vec![a, late, stale];
                p.expected.events = ev(&[
                    &[Update],
                    &[Isolate],
                    &[Delayed, Preserve],
                    &[Delayed, Stale, Preserve],
                ]);
                p.expected.direction = Preserved;
            } else {
                p.reports = vec![a, stale, late];
                p.expected.events = ev(&[
                    &[Update],
                    &[Isolate],
                    &[Delayed, Stale, Preserve],
                    &[Delayed, Preserve],
                ]);
                p.expected.direction = Strengthened;
            }
            p.expected.action = settle_action(x);
        }
        Regime::RelationAssociation => {
            let pair = case / 2;
            let twin_b = case % 2 == 1;
            let v = state_of_parity(pair);
            let reading = |agent, sensor, value: State, name: &str, event_s| Report {
                agent,
                subject: sensor,
                predicate: ObservationPredicate::Reading,
                value: value.into(),
                confidence: d.hundredths(&format!("confidence/{name}"), 0.75, 0.95),
                event_s,
                arrival_s: event_s,
                epoch: 1,
                supersedes: Vec::new(),
            };
            reliabilities = [
                d.hundredths("reliability/robot", 0.70, 0.80),
                d.hundredths("reliability/iot", 0.86, 0.94),
                d.hundredths("reliability/edge", 0.52, 0.60),
            ];
            p.reports = vec![
                reading(Iot, "sensor-a", v, "r1", 10),
                reading(Robot, "sensor-b", v.opposite(), "r2", 20),
            ];
            distractor.value = if pair <= 12 {
                ObservationValue::Nominal
            } else {
                ObservationValue::Unknown
            };
            distractor.confidence = d.hundredths("confidence/distractor", 0.55, 0.70);
            distractor.event_s = 30;
            distractor.arrival_s = 30;
            p.distractor_object = format!("distractor-{:03}", pair * 2);
            p.pair_id = Some(format!("relation_association-pair-{pair:02}"));
            let (to_g1, to_g2) = if twin_b {
                ("sensor-b", "sensor-a")
            } else {
                ("sensor-a", "sensor-b")
            };
            p.relations = vec![measures(to_g1, "gauge-1"), measures(to_g2, "gauge-2")];
            p.expected.events = if twin_b {
                ev(&[&[Isolate], &[Assoc, Update], &[Isolate]])
            } else {
                ev(&[&[Assoc, Update], &[Isolate], &[Isolate]])
            };
            p.expected.state = if twin_b { v.opposite() } else { v };
            p.expected.direction = Preserved;
            p.expected.action = settle_action(p.expected.state);
        }
    }
    p.reliabilities = reliabilities;
    p.distractor = distractor;
    p
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
