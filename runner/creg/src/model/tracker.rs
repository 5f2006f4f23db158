//! The updater's running state between arrivals, and the labels of each step.

use crate::model::*;

/// The running state of the updater between arrivals.
pub(super) struct Tracker<'s> {
    spec: &'s NormativeSpec,
    variant: Variant,
    pub(super) active: Vec<Claim>,
    pub(super) stale: Vec<EvidenceId>,
    pub(super) superseded: Vec<EvidenceId>,
    /// Ids named by a correction, whether or not they have arrived yet.
    superseded_names: BTreeSet<EvidenceId>,
    isolated: Vec<EvidenceId>,
    current_epoch: Option<u32>,
    /// The claims of the last active contradiction, kept after it resolves.
    pub(super) last_conflict: Option<Vec<EvidenceId>>,
    pub(super) conflict_active: bool,
    pub(super) onset_step: Option<usize>,
    pub(super) resolution_step: Option<usize>,
    state: ReferenceState,
    p_top: f64,
}

struct Posterior {
    p_anomalous: f64,
    state: ReferenceState,
}

impl Posterior {
    /// The probability of the top state (one half when undetermined).
    fn p_top(&self) -> f64 {
        match self.state {
            ReferenceState::Anomalous => self.p_anomalous,
            ReferenceState::Normal => 1.0 - self.p_anomalous,
            ReferenceState::Undetermined => 0.5,
        }
    }
}

impl<'s> Tracker<'s> {
    pub(super) fn new(spec: &'s NormativeSpec, variant: Variant) -> Self {
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

    /// Step 0: the prior, before anything has arrived.
    pub(super) fn prior_step(&self) -> TrajectoryStep {
        let prior = Self::posterior_of(self.spec, &[]);
        self.step(
            0,
            Vec::new(),
            vec![EventType::Initial],
            &prior,
            ProbabilityDirection::Preserved,
            false,
        )
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
    pub(super) fn arrive(
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
        let onset = self.take(obs, route, log_odds_weight, &mut events);
        let posterior = self.posterior();
        let conflict = self.conflict();
        self.tag_contradiction(step_index, onset, conflict.is_some(), &mut events);
        if !events.contains(&EventType::Isolate) {
            events.insert(if posterior.state != self.state {
                EventType::Update
            } else {
                EventType::Preserve
            });
        }
        let p_top_new = posterior.p_top();
        let direction = self.direction(posterior.state, p_top_new, &posterior);
        self.settle(&posterior, p_top_new, conflict);
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

    /// Files the report as isolated, stale or a claim, tagging the step; returns whether
    /// it opposes an active claim of its own epoch.
    fn take(
        &mut self,
        obs: &Observation,
        route: Route,
        log_odds_weight: f64,
        events: &mut BTreeSet<EventType>,
    ) -> bool {
        let state = match (route, obs.value.state()) {
            (Route::Isolated, _) | (_, None) => {
                events.insert(EventType::Isolate);
                self.isolated.push(obs.id.clone());
                return false;
            }
            (_, Some(state)) => state,
        };
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
                false
            }
            _ => self.admit(obs, state, epoch, log_odds_weight),
        }
    }

    /// Admits a claim of the current epoch or a newer one (which sets the older claims
    /// aside as stale), unless a correction has already named it; returns whether it
    /// opposes an active claim of its epoch.
    fn admit(&mut self, obs: &Observation, state: State, epoch: u32, log_odds_weight: f64) -> bool {
        if self.current_epoch.is_some_and(|c| epoch > c) {
            let (older, kept): (Vec<Claim>, Vec<Claim>) =
                self.active.drain(..).partition(|c| c.epoch < epoch);
            self.active = kept;
            self.stale.extend(older.into_iter().map(|c| c.id));
        }
        self.current_epoch = Some(epoch);
        if self.superseded_names.contains(&obs.id) {
            self.superseded.push(obs.id.clone());
            return false;
        }
        let onset = self
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
        onset
    }

    /// The posterior over the active claims (only the newest one under `LatestWins`).
    fn posterior(&self) -> Posterior {
        if self.variant == Variant::LatestWins {
            Self::posterior_of(
                self.spec,
                &self.active[self.active.len().saturating_sub(1)..],
            )
        } else {
            Self::posterior_of(self.spec, &self.active)
        }
    }

    /// Tags the step where a contradiction opens or resolves, and remembers the step.
    fn tag_contradiction(
        &mut self,
        step_index: usize,
        onset: bool,
        conflict: bool,
        events: &mut BTreeSet<EventType>,
    ) {
        if onset && conflict {
            events.insert(EventType::ContradictionOnset);
            self.onset_step.get_or_insert(step_index);
        }
        if self.conflict_active && !conflict {
            events.insert(EventType::ContradictionResolution);
            self.resolution_step = Some(step_index);
        }
    }

    /// Carries the step's state, top probability and contradiction to the next arrival.
    fn settle(&mut self, posterior: &Posterior, p_top: f64, conflict: Option<Vec<EvidenceId>>) {
        self.conflict_active = conflict.is_some();
        if let Some(ids) = conflict {
            self.last_conflict = Some(ids);
        }
        self.state = posterior.state;
        self.p_top = p_top;
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
