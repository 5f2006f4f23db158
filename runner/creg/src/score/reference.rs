//! What a sample is scored against: the reference labels of one prefix or of the
//! scenario's endpoint, read from the suite record.

use crate::record::*;
use std::collections::BTreeSet;

pub type Ids = BTreeSet<EvidenceId>;

fn set(ids: &[EvidenceId]) -> Ids {
    ids.iter().cloned().collect()
}

/// The reference belief at one prefix (step >= 1).
#[derive(Clone, Debug)]
pub struct BeliefReference {
    pub entity_id: ObjectId,
    pub attribute: String,
    pub p_anomalous: f64,
    pub state: ReferenceState,
    pub direction: ProbabilityDirection,
    /// The reference state at the previous prefix (the prior's for step 1).
    pub previous_state: ReferenceState,
    pub supporting: Ids,
    pub contradicting: Ids,
    /// The active contradiction's claims, if one is active.
    pub contradiction: Option<Ids>,
    /// Evidence that must not support the belief: the distractor, isolated, stale and
    /// superseded reports that have arrived.
    pub must_not_support: Ids,
}

impl BeliefReference {
    /// The reference at `step` of `s`, or `None` when the step does not exist or is the prior.
    pub fn at(s: &Scenario, step: usize) -> Option<Self> {
        let t = &s.evaluation.belief_trajectory;
        let now = t.get(step).filter(|_| step >= 1)?;
        let before = &t[step - 1];
        let b = now.reference_beliefs.first()?;
        let previous_state = before.reference_beliefs.first()?.reference_state;
        let contradiction = now
            .contradictions
            .iter()
            .find(|c| c.contradiction_present)
            .map(|c| set(&c.involved_evidence_ids));
        let mut must_not_support = set(&now.isolated_evidence_ids);
        must_not_support.extend(now.stale_evidence_ids.iter().cloned());
        must_not_support.extend(now.superseded_evidence_ids.iter().cloned());
        Some(BeliefReference {
            entity_id: b.entity_id.clone(),
            attribute: b.attribute.clone(),
            p_anomalous: b.reference_distribution.anomalous,
            state: b.reference_state,
            direction: b.probability_direction,
            previous_state,
            supporting: set(&b.supporting_evidence),
            contradicting: set(&b.contradicting_evidence),
            contradiction,
            must_not_support,
        })
    }
}

/// The endpoint references of a scenario (all evidence has arrived).
#[derive(Clone, Debug)]
pub struct EndpointReference {
    pub target: ObjectId,
    pub state: ReferenceState,
    pub contradiction_present: bool,
    pub involved: Ids,
    pub contradiction_type: Option<ContradictionType>,
    pub resolution_status: Option<ResolutionStatus>,
    pub action: ActionType,
    pub admissible: BTreeSet<ActionType>,
    pub inadmissible: BTreeSet<ActionType>,
    pub unsafe_actions: BTreeSet<ActionType>,
    pub supporting: Ids,
    /// Every observation id of the scenario: anything else is invented.
    pub existing: Ids,
    /// Evidence an explanation should name as set aside, with the reason.
    pub set_aside: Vec<(EvidenceId, EvidenceStatus)>,
}

impl EndpointReference {
    pub fn of(s: &Scenario) -> Self {
        let e = &s.evaluation;
        let c = &e.contradictions;
        EndpointReference {
            target: e.beliefs.entity_id.clone(),
            state: e.beliefs.reference_state,
            contradiction_present: c.contradiction_present,
            involved: set(&c.involved_evidence_ids),
            contradiction_type: c.contradiction_type,
            resolution_status: c.resolution_status,
            action: e.action.reference_action.action_type,
            admissible: e.action.admissible_actions.iter().copied().collect(),
            inadmissible: e.action.inadmissible_actions.iter().copied().collect(),
            unsafe_actions: e.action.unsafe_actions.iter().copied().collect(),
            supporting: set(&e.beliefs.supporting_evidence),
            existing: s.observations.iter().map(|o| o.id.clone()).collect(),
            set_aside: e
                .evidence
                .iter()
                .filter(|ev| {
                    matches!(
                        ev.status,
                        EvidenceStatus::Stale | EvidenceStatus::Superseded
                    )
                })
                .map(|ev| (ev.evidence_id.clone(), ev.status))
                .collect(),
        }
    }
}
