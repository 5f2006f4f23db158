//! Small record builders the regime layouts are made of: agents, times, condition
//! reports and relations.

use crate::generator::*;

pub(super) const AGENTS: [(AgentKind, &str); 3] = [
    (AgentKind::Robot, "robot-1"),
    (AgentKind::IotSensor, "iot-sensor-1"),
    (AgentKind::EdgeAi, "edge-ai-1"),
];

pub(super) fn agent_id(kind: AgentKind) -> AgentId {
    let (_, id) = AGENTS
        .iter()
        .find(|(k, _)| *k == kind)
        .expect("three kinds");
    AgentId::new(*id)
}

pub(super) fn time(seconds: u32, zulu: bool) -> String {
    let (m, s) = (seconds / 60, seconds % 60);
    if zulu {
        format!("2026-01-01T12:{m:02}:{s:02}Z")
    } else {
        format!("2026-01-01T12:{m:02}:{s:02}+00:00")
    }
}

pub(super) fn state_of_parity(n: u32) -> State {
    if n.is_multiple_of(2) {
        State::Normal
    } else {
        State::Anomalous
    }
}

pub(super) fn condition(
    agent: AgentKind,
    value: State,
    confidence: f64,
    event_s: u32,
    delay: u32,
) -> Report {
    Report {
        agent,
        subject: "gauge-1",
        predicate: ObservationPredicate::Condition,
        value: value.into(),
        confidence,
        event_s,
        arrival_s: event_s + delay,
        epoch: 1,
        supersedes: Vec::new(),
    }
}

pub(super) fn adjacent() -> Vec<Relation> {
    vec![Relation {
        source_id: ObjectId::new("gauge-1"),
        target_id: ObjectId::new("gauge-2"),
        predicate: RelationPredicate::AdjacentTo,
        confidence: 0.8,
        evidence_ids: Vec::new(),
    }]
}

pub(super) fn measures(sensor: &str, gauge: &str) -> Relation {
    Relation {
        source_id: ObjectId::new(sensor),
        target_id: ObjectId::new(gauge),
        predicate: RelationPredicate::Measures,
        confidence: 1.0,
        evidence_ids: Vec::new(),
    }
}
