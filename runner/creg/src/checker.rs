//! The independent checker (creg-runner-log-odds-checker.1).
//!
//! It shares nothing with the generator's updater (`model.rs`) but the record types and
//! the specification's parameters: where the updater walks the arrivals once and keeps
//! state, the checker recomputes every prefix from scratch, from the raw observations,
//! in log-odds space. Then it verifies each regime's construction constraint, the
//! counterfactual twins and the published statistics.

use crate::record::*;
use crate::spec::NormativeSpec;
use crate::stats::{self, Figure};
use labels::check_scenario;
use runner_engine::digest::sha256_hex;
use std::collections::{BTreeMap, BTreeSet};
use twins::{check_twins, fingerprint};

mod labels;
mod twins;

pub const CHECKER_VERSION: &str = "creg-runner-log-odds-checker.1";
/// Stored distributions are rounded to four decimals.
const DISTRIBUTION_TOLERANCE: f64 = 0.5e-4 + 1e-9;

/// One disagreement between a record and the specification.
#[derive(Clone, Debug, PartialEq)]
pub struct Finding {
    pub scenario: ScenarioId,
    pub step: Option<usize>,
    pub field: String,
    pub expected: String,
    pub found: String,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.step {
            Some(k) => write!(f, "{} step {k}: {}", self.scenario, self.field)?,
            None => write!(f, "{}: {}", self.scenario, self.field)?,
        }
        write!(f, ": expected {}, found {}", self.expected, self.found)
    }
}

#[derive(Clone, Debug)]
pub struct CheckReport {
    pub findings: Vec<Finding>,
    pub figures: Vec<Figure>,
    pub steps_checked: usize,
    /// Records whose specification hash differs from this build's (e.g. the original file).
    pub foreign_spec: usize,
}

impl CheckReport {
    pub fn passed(&self) -> bool {
        self.findings.is_empty() && self.figures.iter().all(Figure::ok)
    }
}

/// What the checker derives for one prefix.
#[derive(Clone, Debug)]
struct Prefix {
    p_anomalous: f64,
    state: ReferenceState,
    active: BTreeSet<EvidenceId>,
    supporting: BTreeSet<EvidenceId>,
    contradicting: BTreeSet<EvidenceId>,
    conflict: bool,
    action: ActionType,
    events: BTreeSet<EventType>,
}

struct Checker<'a> {
    spec: &'a NormativeSpec,
    s: &'a Scenario,
    arrivals: Vec<&'a Observation>,
}

impl<'a> Checker<'a> {
    fn new(spec: &'a NormativeSpec, s: &'a Scenario) -> Self {
        Checker {
            spec,
            s,
            arrivals: s.arrival_order(),
        }
    }

    fn through_measures(&self, o: &Observation) -> bool {
        let a = &self.spec.applicability;
        o.predicate == a.transfer_predicate
            && self.s.relations.iter().any(|r| {
                r.predicate == a.transfer_relation
                    && r.source_id == o.subject_id
                    && r.target_id == self.spec.target.entity_id
                    && r.confidence == a.transfer_relation_confidence
            })
    }

    /// The state a report claims about the target, if it bears on it at all.
    fn claim(&self, o: &Observation) -> Option<State> {
        let direct = o.subject_id == self.spec.target.entity_id
            && o.predicate == ObservationPredicate::Condition;
        if direct || self.through_measures(o) {
            o.value.state()
        } else {
            None
        }
    }

    fn weight(&self, o: &Observation) -> f64 {
        let r = self
            .s
            .agent(&o.agent_id)
            .map_or(f64::NAN, |a| a.metadata.reliability);
        let a = 0.5 + (o.confidence - 0.5) * r;
        (a / (1.0 - a)).ln()
    }

    /// Recomputes prefix `k` (the first k arrivals) from nothing.
    fn prefix(&self, k: usize) -> Prefix {
        let arrived = &self.arrivals[..k];
        let named: BTreeSet<&EvidenceId> = arrived
            .iter()
            .flat_map(|o| o.metadata.supersedes_evidence_ids.iter())
            .collect();
        let claims: Vec<(&Observation, State)> = arrived
            .iter()
            .filter_map(|o| self.claim(o).map(|s| (*o, s)))
            .collect();
        let epoch = claims.iter().map(|(o, _)| o.metadata.state_epoch).max();
        let active: Vec<(&Observation, State)> = claims
            .iter()
            .filter(|(o, _)| Some(o.metadata.state_epoch) == epoch && !named.contains(&o.id))
            .copied()
            .collect();

        let prior = self.spec.prior;
        let mut log_odds = (prior.anomalous / prior.normal).ln();
        for (o, s) in &active {
            let w = self.weight(o);
            log_odds += if *s == State::Anomalous { w } else { -w };
        }
        let p_anomalous = 1.0 / (1.0 + (-log_odds).exp());
        let state = if (2.0 * p_anomalous - 1.0).abs() <= self.spec.tie_tolerance {
            ReferenceState::Undetermined
        } else if p_anomalous > 0.5 {
            ReferenceState::Anomalous
        } else {
            ReferenceState::Normal
        };
        let ids_with = |want: State| -> BTreeSet<EvidenceId> {
            active
                .iter()
                .filter(|(_, s)| *s == want)
                .map(|(o, _)| o.id.clone())
                .collect()
        };
        let (supporting, contradicting) = match state.physical() {
            Some(top) => (ids_with(top), ids_with(top.opposite())),
            None => (BTreeSet::new(), BTreeSet::new()),
        };
        let conflict =
            !ids_with(State::Anomalous).is_empty() && !ids_with(State::Normal).is_empty();
        let action = if conflict {
            ActionType::Verify
        } else {
            match state {
                ReferenceState::Anomalous => ActionType::Inspect,
                ReferenceState::Normal => ActionType::Monitor,
                ReferenceState::Undetermined => ActionType::RequestObservation,
            }
        };
        Prefix {
            p_anomalous,
            state,
            active: active.iter().map(|(o, _)| o.id.clone()).collect(),
            supporting,
            contradicting,
            conflict,
            action,
            events: BTreeSet::new(),
        }
    }

    /// Every prefix, with the event tags that compare prefix k with prefix k - 1.
    fn trajectory(&self) -> Vec<Prefix> {
        let mut out: Vec<Prefix> = Vec::with_capacity(self.arrivals.len() + 1);
        let mut p0 = self.prefix(0);
        p0.events.insert(EventType::Initial);
        out.push(p0);
        for k in 1..=self.arrivals.len() {
            let new = self.arrivals[k - 1];
            let before = &out[k - 1];
            let mut now = self.prefix(k);
            let delayed = match (
                parse_time(&new.metadata.arrival_time),
                parse_time(&new.timestamp),
            ) {
                (Some(a), Some(t)) => a > t,
                _ => false,
            };
            if delayed {
                now.events.insert(EventType::DelayedEvidence);
            }
            match self.claim(new) {
                None => {
                    now.events.insert(EventType::Isolate);
                }
                Some(claimed) => {
                    if self.through_measures(new) {
                        now.events.insert(EventType::RelationAssociation);
                    }
                    let earlier_epoch = self.arrivals[..k - 1]
                        .iter()
                        .filter(|o| self.claim(o).is_some())
                        .map(|o| o.metadata.state_epoch)
                        .max();
                    if earlier_epoch.is_some_and(|e| new.metadata.state_epoch < e) {
                        now.events.insert(EventType::StaleEvidence);
                    }
                    let opposed = self.arrivals[..k - 1].iter().any(|o| {
                        now.active.contains(&o.id) && self.claim(o) == Some(claimed.opposite())
                    });
                    if now.active.contains(&new.id) && opposed {
                        now.events.insert(EventType::ContradictionOnset);
                    }
                    now.events.insert(if now.state == before.state {
                        EventType::Preserve
                    } else {
                        EventType::Update
                    });
                }
            }
            if before.conflict && !now.conflict {
                now.events.insert(EventType::ContradictionResolution);
            }
            out.push(now);
        }
        out
    }
}

fn direction(before: &Prefix, now: &Prefix, tol: f64) -> ProbabilityDirection {
    use ProbabilityDirection::*;
    let p_of = |p: &Prefix, s: ReferenceState| match s {
        ReferenceState::Anomalous => p.p_anomalous,
        _ => 1.0 - p.p_anomalous,
    };
    match (before.state.physical(), now.state.physical()) {
        (None, None) => Preserved,
        (None, Some(_)) => Strengthened,
        (Some(_), None) => Weakened,
        (Some(a), Some(b)) if a != b => Reversed,
        (Some(_), Some(_)) => {
            let (old, new) = (p_of(before, before.state), p_of(now, before.state));
            if new > old + tol {
                Strengthened
            } else if new < old - tol {
                Weakened
            } else {
                Preserved
            }
        }
    }
}

fn set_of(ids: &[EvidenceId]) -> BTreeSet<EvidenceId> {
    ids.iter().cloned().collect()
}

fn show<T: std::fmt::Debug>(v: T) -> String {
    format!("{v:?}")
}

/// Each regime's construction constraint, on the checker's own derivation.
fn check_constraint(c: &Checker, d: &[Prefix], out: &mut Vec<Finding>) {
    let s = c.s;
    let regime = s.metadata.trajectory_regime;
    let last = d.last().expect("prior");
    let first_state = d.iter().map(|p| p.state).find(|st| st.physical().is_some());
    let claims: Vec<(&Observation, State)> = c
        .arrivals
        .iter()
        .filter_map(|o| c.claim(o).map(|st| (*o, st)))
        .collect();
    let ok = match regime {
        Regime::JustifiedRevision => {
            first_state.is_some_and(|f| f != last.state) && last.state.physical().is_some()
        }
        Regime::BeliefPreservation => {
            let opposed = claims
                .iter()
                .any(|(_, st)| first_state.and_then(|f| f.physical()) == Some(st.opposite()));
            opposed && first_state == Some(last.state)
        }
        Regime::RelationAssociation => {
            let routed = c
                .arrivals
                .iter()
                .filter(|o| c.through_measures(o) && o.value.state().is_some())
                .count();
            routed == 1 && claims.len() == 1
        }
        Regime::ContradictionOnset => last.conflict,
        Regime::ContradictionResolution => {
            let corrected = c
                .arrivals
                .iter()
                .any(|o| !o.metadata.supersedes_evidence_ids.is_empty());
            corrected && d.iter().any(|p| p.conflict) && !last.conflict
        }
        Regime::StaleDelayedEvidence => {
            let stale = d
                .iter()
                .any(|p| p.events.contains(&EventType::StaleEvidence));
            let applied_late = d.iter().enumerate().skip(1).any(|(k, p)| {
                p.events.contains(&EventType::DelayedEvidence)
                    && !p.events.contains(&EventType::StaleEvidence)
                    && p.active.contains(&c.arrivals[k - 1].id)
            });
            stale && applied_late
        }
        Regime::SourceReliability => {
            // Confidence-only fusion (every reliability 1) must reach another top state.
            let mut log_odds = 0.0;
            for (o, st) in claims.iter().filter(|(o, _)| last.active.contains(&o.id)) {
                let w = (o.confidence / (1.0 - o.confidence)).ln();
                log_odds += if *st == State::Anomalous { w } else { -w };
            }
            let confidence_only = if log_odds > 0.0 {
                State::Anomalous
            } else {
                State::Normal
            };
            last.state
                .physical()
                .is_some_and(|st| st != confidence_only)
        }
    };
    if !ok {
        out.push(Finding {
            scenario: s.id.clone(),
            step: None,
            field: format!("construction constraint ({regime})"),
            expected: c
                .spec
                .regimes
                .get(regime.name())
                .map_or_else(String::new, |r| r.constraint.clone()),
            found: "not satisfied".into(),
        });
    }
}

/// Checks every record against the specification and the suite against the published table.
pub fn check(spec: &NormativeSpec, spec_sha256: &str, scenarios: &[Scenario]) -> CheckReport {
    let mut findings = Vec::new();
    let mut steps_checked = 0;
    let mut foreign_spec = 0;
    for s in scenarios {
        steps_checked += check_scenario(spec, s, &mut findings);
        if s.metadata.normative_spec_sha256.as_deref() != Some(spec_sha256) {
            foreign_spec += 1;
        }
    }
    check_twins(scenarios, &mut findings);
    let prints: BTreeSet<String> = scenarios.iter().map(fingerprint).collect();
    CheckReport {
        findings,
        figures: stats::compare(scenarios, &prints),
        steps_checked,
        foreign_spec,
    }
}
