//! The normative model (controlled-binary-bayes-v1): a log-odds updater that labels
//! every evidence prefix of a scenario from its agents, relations and observations.
//!
//! The generator calls it to derive every label; the independent checker does not
//! (it recomputes the same quantities on its own code path).

use crate::record::*;
use crate::spec::NormativeSpec;
use std::collections::BTreeSet;
use thiserror::Error;

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

/// The running state of the updater between arrivals.
struct Tracker<'s> {
    spec: &'s NormativeSpec,
    variant: Variant,
    active: Vec<Claim>,
    stale: Vec<EvidenceId>,
    superseded: Vec<EvidenceId>,
    /// Ids named by a correction, whether or not they have arrived yet.
    superseded_names: BTreeSet<EvidenceId>,
    isolated: Vec<EvidenceId>,
    current_epoch: Option<u32>,
    /// The claims of the last active contradiction, kept after it resolves.
    last_conflict: Option<Vec<EvidenceId>>,
    conflict_active: bool,
    onset_step: Option<usize>,
    resolution_step: Option<usize>,
    state: ReferenceState,
    p_top: f64,
}

struct Posterior {
    p_anomalous: f64,
    state: ReferenceState,
}

impl<'s> Tracker<'s> {
    fn new(spec: &'s NormativeSpec, variant: Variant) -> Self {
        let prior = Self::posterior_of(spec, &[]);
        Tracker {
            spec,
            variant,
            active: Vec::new(),
            stale: Vec::new(),
            superseded: Vec::new(),
            superseded_names: BTreeSet::new(),
            isolated: Vec::new(),
            current_epoch: None,
            last_conflict: None,
            conflict_active: false,
            onset_step: None,
            resolution_step: None,
            state: prior.state,
            p_top: 0.5,
        }
    }

    fn posterior_of(spec: &NormativeSpec, active: &[Claim]) -> Posterior {
        let prior = (spec.prior.anomalous / spec.prior.normal).ln();
        let log_odds: f64 = prior + active.iter().map(|c| c.log_odds).sum::<f64>();
        let p_anomalous = 1.0 / (1.0 + (-log_odds).exp());
        let p_normal = 1.0 - p_anomalous;
        let state = if (p_anomalous - p_normal).abs() <= spec.tie_tolerance {
            ReferenceState::Undetermined
        } else if p_anomalous > p_normal {
            ReferenceState::Anomalous
        } else {
            ReferenceState::Normal
        };
        Posterior { p_anomalous, state }
    }

    /// Opposing active claims of the current epoch, in arrival order.
    fn conflict(&self) -> Option<Vec<EvidenceId>> {
        let epoch = self.current_epoch?;
        let current: Vec<&Claim> = self.active.iter().filter(|c| c.epoch == epoch).collect();
        let has = |s: State| current.iter().any(|c| c.state == s);
        (has(State::Anomalous) && has(State::Normal))
            .then(|| current.iter().map(|c| c.id.clone()).collect())
    }

    fn supersede(&mut self, ids: &[EvidenceId]) {
        for id in ids {
            self.superseded_names.insert(id.clone());
            if let Some(pos) = self.active.iter().position(|c| &c.id == id) {
                let claim = self.active.remove(pos);
                self.superseded.push(claim.id);
            }
        }
    }

    /// Applies one arrival and returns the labels of the new step.
    fn arrive(
        &mut self,
        step_index: usize,
        obs: &Observation,
        route: Route,
        log_odds_weight: f64,
        delayed: bool,
    ) -> TrajectoryStep {
        let mut events = BTreeSet::new();
        if delayed {
            events.insert(EventType::DelayedEvidence);
        }
        self.supersede(&obs.metadata.supersedes_evidence_ids);

        let claim_state = obs.value.state();
        let mut onset = false;
        match (route, claim_state) {
            (Route::Isolated, _) | (_, None) => {
                events.insert(EventType::Isolate);
                self.isolated.push(obs.id.clone());
            }
            (route, Some(state)) => {
                if route == Route::Transferred {
                    events.insert(EventType::RelationAssociation);
                }
                let epoch = if self.variant == Variant::NoEpochs {
                    1
                } else {
                    obs.metadata.state_epoch
                };
                match self.current_epoch {
                    Some(current) if epoch < current => {
                        events.insert(EventType::StaleEvidence);
                        self.stale.push(obs.id.clone());
                    }
                    _ => {
                        if self.current_epoch.is_some_and(|c| epoch > c) {
                            let (older, kept): (Vec<Claim>, Vec<Claim>) =
                                self.active.drain(..).partition(|c| c.epoch < epoch);
                            self.active = kept;
                            self.stale.extend(older.into_iter().map(|c| c.id));
                        }
                        self.current_epoch = Some(epoch);
                        if self.superseded_names.contains(&obs.id) {
                            self.superseded.push(obs.id.clone());
                        } else {
                            onset = self
                                .active
                                .iter()
                                .any(|c| c.epoch == epoch && c.state != state);
                            let sign = if state == State::Anomalous { 1.0 } else { -1.0 };
                            self.active.push(Claim {
                                id: obs.id.clone(),
                                state,
                                epoch,
                                log_odds: sign * log_odds_weight,
                            });
                        }
                    }
                }
            }
        }

        let posterior = if self.variant == Variant::LatestWins {
            Self::posterior_of(
                self.spec,
                &self.active[self.active.len().saturating_sub(1)..],
            )
        } else {
            Self::posterior_of(self.spec, &self.active)
        };
        let conflict = self.conflict();
        if onset && conflict.is_some() {
            events.insert(EventType::ContradictionOnset);
            self.onset_step.get_or_insert(step_index);
        }
        if self.conflict_active && conflict.is_none() {
            events.insert(EventType::ContradictionResolution);
            self.resolution_step = Some(step_index);
        }
        if !events.contains(&EventType::Isolate) {
            events.insert(if posterior.state != self.state {
                EventType::Update
            } else {
                EventType::Preserve
            });
        }

        let p_top_new = match posterior.state {
            ReferenceState::Anomalous => posterior.p_anomalous,
            ReferenceState::Normal => 1.0 - posterior.p_anomalous,
            ReferenceState::Undetermined => 0.5,
        };
        let direction = self.direction(posterior.state, p_top_new, &posterior);
        self.conflict_active = conflict.is_some();
        if let Some(ids) = &conflict {
            self.last_conflict = Some(ids.clone());
        }
        self.state = posterior.state;
        self.p_top = p_top_new;

        let expected_update = events.contains(&EventType::Update);
        self.step(
            step_index,
            vec![obs.id.clone()],
            events.into_iter().collect(),
            &posterior,
            direction,
            expected_update,
        )
    }

    fn direction(
        &self,
        new_state: ReferenceState,
        p_top_new: f64,
        posterior: &Posterior,
    ) -> ProbabilityDirection {
        use ProbabilityDirection::*;
        use ReferenceState::Undetermined;
        let tol = self.spec.tie_tolerance;
        match (self.state, new_state) {
            (Undetermined, Undetermined) => Preserved,
            (Undetermined, _) => Strengthened,
            (_, Undetermined) => Weakened,
            (old, new) if old != new => Reversed,
            (old, _) => {
                let p_old = self.p_top;
                let p_new = match old {
                    ReferenceState::Anomalous => posterior.p_anomalous,
                    _ => 1.0 - posterior.p_anomalous,
                };
                debug_assert!((p_new - p_top_new).abs() < 1e-15);
                if p_new > p_old + tol {
                    Strengthened
                } else if p_new < p_old - tol {
                    Weakened
                } else {
                    Preserved
                }
            }
        }
    }

    fn step(
        &self,
        step_index: usize,
        new_evidence_ids: Vec<EvidenceId>,
        event_types: Vec<EventType>,
        posterior: &Posterior,
        direction: ProbabilityDirection,
        expected_update: bool,
    ) -> TrajectoryStep {
        let spec = self.spec;
        let anomalous = spec.round_probability(posterior.p_anomalous);
        let distribution = Distribution {
            anomalous,
            normal: spec.round_probability(1.0 - anomalous),
        };
        let (supporting, contradicting) = match posterior.state.physical() {
            Some(top) => (self.claims_for(top), self.claims_for(top.opposite())),
            None => (Vec::new(), Vec::new()),
        };
        let contradictions = self.contradiction_records();
        let action = self.reference_action(posterior.state);
        TrajectoryStep {
            step_index,
            new_evidence_ids,
            active_evidence_ids: self.active.iter().map(|c| c.id.clone()).collect(),
            stale_evidence_ids: self.stale.clone(),
            superseded_evidence_ids: self.superseded.clone(),
            isolated_evidence_ids: self.isolated.clone(),
            event_types,
            reference_beliefs: vec![ReferenceBelief {
                entity_id: spec.target.entity_id.clone(),
                attribute: spec.target.attribute.clone(),
                reference_state: posterior.state,
                probability_direction: direction,
                supporting_evidence: supporting,
                contradicting_evidence: contradicting,
                reference_distribution: distribution,
            }],
            contradictions,
            action: StepAction {
                reference_action: ReferenceAction {
                    action_type: action,
                    target_entity_id: Some(spec.target.entity_id.clone()),
                },
            },
            expected_update,
        }
    }

    fn claims_for(&self, state: State) -> Vec<EvidenceId> {
        self.active
            .iter()
            .filter(|c| c.state == state)
            .map(|c| c.id.clone())
            .collect()
    }

    fn contradiction_records(&self) -> Vec<ContradictionRecord> {
        let Some(involved) = &self.last_conflict else {
            return Vec::new();
        };
        let resolved = self.conflict().is_none();
        let superseded = if resolved {
            involved
                .iter()
                .filter(|id| self.superseded.contains(id))
                .cloned()
                .collect()
        } else {
            Vec::new()
        };
        let involved = self.conflict().unwrap_or_else(|| involved.clone());
        vec![ContradictionRecord {
            contradiction_present: !resolved,
            contradiction_type: Some(ContradictionType::SameEpochValueConflict),
            involved_evidence_ids: involved,
            resolution_status: if resolved {
                ResolutionStatus::Resolved
            } else {
                ResolutionStatus::Active
            },
            superseded_evidence_ids: superseded,
        }]
    }

    fn reference_action(&self, state: ReferenceState) -> ActionType {
        if self.conflict().is_some() {
            ActionType::Verify
        } else {
            match state {
                ReferenceState::Anomalous => ActionType::Inspect,
                ReferenceState::Normal => ActionType::Monitor,
                ReferenceState::Undetermined => ActionType::RequestObservation,
            }
        }
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
    let mut order: Vec<(chrono::DateTime<chrono::FixedOffset>, &Observation)> = Vec::new();
    for obs in facts.observations {
        order.push((
            time_of(obs, "arrival_time", &obs.metadata.arrival_time)?,
            obs,
        ));
    }
    order.sort_by(|a, b| (a.0, &a.1.id).cmp(&(b.0, &b.1.id)));

    let mut tracker = Tracker::new(spec, variant);
    let prior = Tracker::posterior_of(spec, &[]);
    let mut trajectory = vec![tracker.step(
        0,
        Vec::new(),
        vec![EventType::Initial],
        &prior,
        ProbabilityDirection::Preserved,
        false,
    )];
    let mut evidence = Vec::new();
    let mut routes = Vec::new();
    for (i, (arrival, obs)) in order.iter().enumerate() {
        let agent = facts
            .agents
            .iter()
            .find(|a| a.id == obs.agent_id)
            .ok_or_else(|| ModelError::UnknownAgent {
                evidence: obs.id.clone(),
                agent: obs.agent_id.clone(),
            })?;
        check_range(obs, "confidence", obs.confidence)?;
        check_range(obs, "agent reliability", agent.metadata.reliability)?;
        let reliability = if variant == Variant::ConfidenceOnly {
            1.0
        } else {
            agent.metadata.reliability
        };
        let accuracy = effective_accuracy(obs.confidence, reliability);
        let event_time = time_of(obs, "timestamp", &obs.timestamp)?;
        let r = route(spec, facts, obs, variant);
        routes.push(r);
        let weight = (accuracy / (1.0 - accuracy)).ln();
        trajectory.push(tracker.arrive(i + 1, obs, r, weight, *arrival > event_time));
        evidence.push(EvidenceSummary {
            evidence_id: obs.id.clone(),
            agent_id: agent.id.clone(),
            agent_kind: agent.kind,
            source_reliability: agent.metadata.reliability,
            confidence: obs.confidence,
            effective_accuracy: accuracy,
            timestamp: obs.timestamp.clone(),
            arrival_time: obs.metadata.arrival_time.clone(),
            arrival_step: i + 1,
            state_epoch: obs.metadata.state_epoch,
            status: EvidenceStatus::Isolated,
            applies_to: None,
        });
    }
    for (summary, r) in evidence.iter_mut().zip(&routes) {
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

    let last = trajectory.last().expect("the prior step is always present");
    let final_belief = last.reference_beliefs[0].clone();
    let reference = last.action.reference_action.clone();
    let contradictions = ContradictionSummary {
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
    };
    let action = endpoint_action(spec, reference);
    Ok(Evaluation {
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
    })
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
