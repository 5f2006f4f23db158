//! The labels of one scenario against the checker's own derivation: every step of the
//! stored trajectory, then the endpoint summaries.

use crate::checker::*;

/// Where one scenario's findings go.
struct Notes<'a> {
    scenario: &'a ScenarioId,
    out: &'a mut Vec<Finding>,
}

impl Notes<'_> {
    fn note(&mut self, step: Option<usize>, field: &str, expected: String, found: String) {
        self.out.push(Finding {
            scenario: self.scenario.clone(),
            step,
            field: field.to_string(),
            expected,
            found,
        })
    }
}

/// Checks one scenario's trajectory and endpoint labels; returns the steps checked.
pub(super) fn check_scenario(spec: &NormativeSpec, s: &Scenario, out: &mut Vec<Finding>) -> usize {
    let checker = Checker::new(spec, s);
    let derived = checker.trajectory();
    let stored = &s.evaluation.belief_trajectory;
    let mut notes = Notes {
        scenario: &s.id,
        out,
    };
    if stored.len() != derived.len() {
        notes.note(
            None,
            "belief_trajectory length",
            derived.len().to_string(),
            stored.len().to_string(),
        );
        return 0;
    }
    for (k, st) in stored.iter().enumerate() {
        check_step(&checker, &derived, k, st, &mut notes);
    }
    let last = derived.last().expect("the prior is always derived");
    check_endpoint(spec, s, last, &mut notes);
    check_constraint(&checker, &derived, out);
    derived.len()
}

/// One stored step against derived prefix `k`.
fn check_step(c: &Checker, derived: &[Prefix], k: usize, st: &TrajectoryStep, notes: &mut Notes) {
    let d = &derived[k];
    check_step_evidence(c, d, k, st, notes);
    let Some(belief) = st.reference_beliefs.first() else {
        notes.note(
            Some(k),
            "reference_beliefs",
            "one belief".into(),
            "none".into(),
        );
        return;
    };
    check_belief(c.spec, derived, k, belief, notes);
    check_step_outcome(d, k, st, notes);
}

/// The step's index and which evidence is new and active at it.
fn check_step_evidence(c: &Checker, d: &Prefix, k: usize, st: &TrajectoryStep, notes: &mut Notes) {
    let at = Some(k);
    if st.step_index != k {
        notes.note(at, "step_index", k.to_string(), st.step_index.to_string());
    }
    let new: Vec<EvidenceId> = if k == 0 {
        Vec::new()
    } else {
        vec![c.arrivals[k - 1].id.clone()]
    };
    if st.new_evidence_ids != new {
        notes.note(
            at,
            "new_evidence_ids",
            show(&new),
            show(&st.new_evidence_ids),
        );
    }
    if set_of(&st.active_evidence_ids) != d.active {
        notes.note(
            at,
            "active_evidence_ids",
            show(&d.active),
            show(&st.active_evidence_ids),
        );
    }
}

/// The step's belief about the target: distribution, state, evidence for and against,
/// and the direction it moved from the step before.
fn check_belief(
    spec: &NormativeSpec,
    derived: &[Prefix],
    k: usize,
    belief: &ReferenceBelief,
    notes: &mut Notes,
) {
    let at = Some(k);
    let d = &derived[k];
    if belief.entity_id != spec.target.entity_id || belief.attribute != spec.target.attribute {
        notes.note(
            at,
            "reference_beliefs[0] target",
            format!("{}.{}", spec.target.entity_id, spec.target.attribute),
            format!("{}.{}", belief.entity_id, belief.attribute),
        );
    }
    let dist = belief.reference_distribution;
    if (dist.anomalous - d.p_anomalous).abs() > DISTRIBUTION_TOLERANCE
        || (dist.normal - (1.0 - d.p_anomalous)).abs() > DISTRIBUTION_TOLERANCE
    {
        notes.note(
            at,
            "reference_distribution",
            format!(
                "anomalous {:.4} / normal {:.4}",
                d.p_anomalous,
                1.0 - d.p_anomalous
            ),
            format!("anomalous {} / normal {}", dist.anomalous, dist.normal),
        );
    }
    if belief.reference_state != d.state {
        notes.note(
            at,
            "reference_state",
            show(d.state),
            show(belief.reference_state),
        );
    }
    if set_of(&belief.supporting_evidence) != d.supporting {
        notes.note(
            at,
            "supporting_evidence",
            show(&d.supporting),
            show(&belief.supporting_evidence),
        );
    }
    if set_of(&belief.contradicting_evidence) != d.contradicting {
        notes.note(
            at,
            "contradicting_evidence",
            show(&d.contradicting),
            show(&belief.contradicting_evidence),
        );
    }
    if k > 0 {
        let dir = direction(&derived[k - 1], d, spec.tie_tolerance);
        if belief.probability_direction != dir {
            notes.note(
                at,
                "probability_direction",
                show(dir),
                show(belief.probability_direction),
            );
        }
    }
}

/// What the step concludes: contradiction, action, event tags and whether it updates.
fn check_step_outcome(d: &Prefix, k: usize, st: &TrajectoryStep, notes: &mut Notes) {
    let at = Some(k);
    let present = st.contradictions.iter().any(|c| c.contradiction_present);
    if present != d.conflict {
        notes.note(
            at,
            "contradiction_present",
            d.conflict.to_string(),
            present.to_string(),
        );
    }
    if st.action.reference_action.action_type != d.action {
        notes.note(
            at,
            "reference_action",
            d.action.name().into(),
            st.action.reference_action.action_type.name().into(),
        );
    }
    let events: BTreeSet<EventType> = st.event_types.iter().copied().collect();
    if events != d.events {
        notes.note(at, "event_types", show(&d.events), show(&st.event_types));
    }
    let update = d.events.contains(&EventType::Update);
    if st.expected_update != update {
        notes.note(
            at,
            "expected_update",
            update.to_string(),
            st.expected_update.to_string(),
        );
    }
}

/// The endpoint summaries against the last derived prefix: the action with its rules,
/// the final state and whether a contradiction is still open.
fn check_endpoint(spec: &NormativeSpec, s: &Scenario, last: &Prefix, notes: &mut Notes) {
    let endpoint = &s.evaluation.action;
    if endpoint.reference_action.action_type != last.action {
        notes.note(
            None,
            "evaluation.action.reference_action",
            last.action.name().into(),
            endpoint.reference_action.action_type.name().into(),
        );
    }
    let rules = &spec.actions;
    let admissible: BTreeSet<ActionType> = rules
        .admissible
        .get(&last.action)
        .map(|v| v.iter().copied().collect())
        .unwrap_or_default();
    let found: BTreeSet<ActionType> = endpoint.admissible_actions.iter().copied().collect();
    if found != admissible {
        notes.note(
            None,
            "evaluation.action.admissible_actions",
            show(&admissible),
            show(&found),
        );
    }
    if endpoint.unsafe_actions != rules.unsafe_actions {
        notes.note(
            None,
            "evaluation.action.unsafe_actions",
            show(&rules.unsafe_actions),
            show(&endpoint.unsafe_actions),
        );
    }
    if endpoint.inadmissible_actions != rules.inadmissible {
        notes.note(
            None,
            "evaluation.action.inadmissible_actions",
            show(&rules.inadmissible),
            show(&endpoint.inadmissible_actions),
        );
    }
    if s.evaluation.beliefs.reference_state != last.state {
        notes.note(
            None,
            "evaluation.beliefs.reference_state",
            show(last.state),
            show(s.evaluation.beliefs.reference_state),
        );
    }
    if s.evaluation.contradictions.contradiction_present != last.conflict {
        notes.note(
            None,
            "evaluation.contradictions.contradiction_present",
            last.conflict.to_string(),
            s.evaluation
                .contradictions
                .contradiction_present
                .to_string(),
        );
    }
}
