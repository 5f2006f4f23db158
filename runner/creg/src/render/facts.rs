//! What a prompt may show of a scenario: its agents, objects, relations and
//! observations, with observations in arrival order. Renderers take a [`Facts`] and
//! never the [`Scenario`], so no field of `evaluation` can reach a prompt.

use crate::record::{
    AgentKind, EvidenceId, ObjectCategory, ObservationPredicate, ObservationValue, Relation,
    RelationPredicate, Scenario,
};

pub struct AgentFacts<'a> {
    pub id: &'a str,
    pub kind: &'static str,
    pub reliability: String,
}

pub struct EntityFacts<'a> {
    pub id: &'a str,
    pub label: &'a str,
    pub category: &'static str,
}

pub struct EvidenceFacts<'a> {
    pub id: &'a str,
    /// 1-based arrival step: the prefix from which this report is visible.
    pub step: usize,
    pub agent: &'a str,
    pub subject: &'a str,
    pub predicate: &'static str,
    pub value: &'static str,
    pub confidence: String,
    pub timestamp: &'a str,
    pub arrival_time: &'a str,
    pub state_epoch: u32,
    pub supersedes: &'a [EvidenceId],
}

pub struct RelationFacts<'a> {
    /// The first step at which every evidence id the relation cites has arrived
    /// (0: it cites none and is visible from the start; never, when it cites a report
    /// the scenario does not have, since showing it would name that report).
    pub step: usize,
    pub source: &'a str,
    pub predicate: &'static str,
    pub target: &'a str,
    pub confidence: String,
    pub evidence_ids: &'a [EvidenceId],
}

/// The evaluation-free content of one scenario.
pub struct Facts<'a> {
    pub agents: Vec<AgentFacts<'a>>,
    pub entities: Vec<EntityFacts<'a>>,
    /// In arrival order; `evidence[k - 1].step == k`.
    pub evidence: Vec<EvidenceFacts<'a>>,
    pub relations: Vec<RelationFacts<'a>>,
}

impl<'a> Facts<'a> {
    pub fn of(s: &'a Scenario) -> Facts<'a> {
        let evidence: Vec<EvidenceFacts<'a>> = s
            .arrival_order()
            .into_iter()
            .enumerate()
            .map(|(i, o)| EvidenceFacts {
                id: o.id.as_str(),
                step: i + 1,
                agent: o.agent_id.as_str(),
                subject: o.subject_id.as_str(),
                predicate: observation_predicate(o.predicate),
                value: observation_value(o.value),
                confidence: number(o.confidence),
                timestamp: &o.timestamp,
                arrival_time: &o.metadata.arrival_time,
                state_epoch: o.metadata.state_epoch,
                supersedes: &o.metadata.supersedes_evidence_ids,
            })
            .collect();
        let step_of = |id: &EvidenceId| {
            evidence
                .iter()
                .find(|e| e.id == id.as_str())
                .map_or(usize::MAX, |e| e.step)
        };
        let relations = s
            .relations
            .iter()
            .map(|r: &Relation| RelationFacts {
                step: r.evidence_ids.iter().map(step_of).max().unwrap_or(0),
                source: r.source_id.as_str(),
                predicate: relation_predicate(r.predicate),
                target: r.target_id.as_str(),
                confidence: number(r.confidence),
                evidence_ids: &r.evidence_ids,
            })
            .collect();
        Facts {
            agents: s
                .agents
                .iter()
                .map(|a| AgentFacts {
                    id: a.id.as_str(),
                    kind: agent_kind(a.kind),
                    reliability: number(a.metadata.reliability),
                })
                .collect(),
            entities: s
                .objects
                .iter()
                .map(|o| EntityFacts {
                    id: o.id.as_str(),
                    label: &o.label,
                    category: object_category(o.category),
                })
                .collect(),
            evidence,
            relations,
        }
    }

    /// The number of prefixes (arrival steps) after the prior.
    pub fn steps(&self) -> usize {
        self.evidence.len()
    }
}

/// Numbers as JSON writes them (`1.0`, `0.78`): the shortest text that reads back
/// to the same value, so no serialization rounds a fact differently.
pub fn number(x: f64) -> String {
    format!("{x:?}")
}

pub fn agent_kind(k: AgentKind) -> &'static str {
    match k {
        AgentKind::Robot => "robot",
        AgentKind::IotSensor => "iot_sensor",
        AgentKind::EdgeAi => "edge_ai",
    }
}

pub fn object_category(c: ObjectCategory) -> &'static str {
    match c {
        ObjectCategory::Gauge => "gauge",
        ObjectCategory::Sensor => "sensor",
        ObjectCategory::Panel => "panel",
    }
}

pub fn relation_predicate(p: RelationPredicate) -> &'static str {
    match p {
        RelationPredicate::AdjacentTo => "adjacent_to",
        RelationPredicate::Measures => "measures",
    }
}

pub fn observation_predicate(p: ObservationPredicate) -> &'static str {
    match p {
        ObservationPredicate::Condition => "condition",
        ObservationPredicate::Indicator => "indicator",
        ObservationPredicate::Reading => "reading",
    }
}

pub fn observation_value(v: ObservationValue) -> &'static str {
    match v {
        ObservationValue::Normal => "normal",
        ObservationValue::Anomalous => "anomalous",
        ObservationValue::Nominal => "nominal",
        ObservationValue::Unknown => "unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_back_exactly_and_keep_a_decimal_point() {
        assert_eq!(number(1.0), "1.0");
        assert_eq!(number(0.78), "0.78");
        assert_eq!(number(0.5), "0.5");
        for x in [0.51, 0.99, 0.8, 0.123456789] {
            assert_eq!(number(x).parse::<f64>().unwrap(), x);
        }
    }

    fn json<T: serde::Serialize>(v: T) -> String {
        serde_json::to_string(&v)
            .unwrap()
            .trim_matches('"')
            .to_string()
    }

    #[test]
    fn names_match_the_published_serde_names() {
        for k in [AgentKind::Robot, AgentKind::IotSensor, AgentKind::EdgeAi] {
            assert_eq!(json(k), agent_kind(k));
        }
        for c in [
            ObjectCategory::Gauge,
            ObjectCategory::Sensor,
            ObjectCategory::Panel,
        ] {
            assert_eq!(json(c), object_category(c));
        }
        for p in [RelationPredicate::AdjacentTo, RelationPredicate::Measures] {
            assert_eq!(json(p), relation_predicate(p));
        }
        for p in [
            ObservationPredicate::Condition,
            ObservationPredicate::Indicator,
            ObservationPredicate::Reading,
        ] {
            assert_eq!(json(p), observation_predicate(p));
        }
        for v in [
            ObservationValue::Normal,
            ObservationValue::Anomalous,
            ObservationValue::Nominal,
            ObservationValue::Unknown,
        ] {
            assert_eq!(json(v), observation_value(v));
        }
    }
}
