//! The belief metrics on answers a model that keeps the contract gives: a one-id
//! contradiction entry, and evidence attributed to the wrong state.

use super::*;
use crate::record::{EvidenceId, ObjectId, ProbabilityDirection};
use crate::score::contract::{Category, StatedContradiction};

fn set(v: &[&str]) -> Ids {
    v.iter().map(|s| EvidenceId::new(*s)).collect()
}

fn list(v: &[&str]) -> Vec<EvidenceId> {
    v.iter().map(|s| EvidenceId::new(*s)).collect()
}

/// Step 3 of the dataset's worked example: normal, obs-1 supporting, obs-2 against, and
/// the obs-1/obs-2 conflict active.
fn reference(contradiction: bool) -> BeliefReference {
    BeliefReference {
        entity_id: ObjectId::new("gauge-1"),
        attribute: "condition".into(),
        p_anomalous: 0.4485,
        state: ReferenceState::Normal,
        direction: ProbabilityDirection::Weakened,
        previous_state: ReferenceState::Normal,
        supporting: set(&["obs-1"]),
        contradicting: set(&["obs-2"]),
        contradiction: contradiction.then(|| set(&["obs-1", "obs-2"])),
        must_not_support: set(&["obs-distractor"]),
    }
}

fn answer(
    top: ReferenceState,
    sup: &[&str],
    con: &[&str],
    contradictions: &[&[&str]],
) -> Parsed<BeliefAnswer> {
    Parsed {
        category: Category::Valid,
        answer: Some(BeliefAnswer {
            target: "gauge-1.condition".into(),
            p_anomalous: 0.45,
            top_state: top,
            supporting_evidence: list(sup),
            contradicting_evidence: list(con),
            contradictions: contradictions
                .iter()
                .map(|ids| StatedContradiction {
                    involved_evidence_ids: list(ids),
                    contradiction_type: Some("same_epoch_value_conflict".into()),
                })
                .collect(),
        }),
    }
}

#[test]
fn a_one_id_contradiction_is_not_a_detection() {
    use ReferenceState::Normal;
    let r = reference(true);
    let one = score_belief(
        &answer(Normal, &["obs-1"], &["obs-2"], &[&["obs-distractor"]]),
        &r,
    );
    assert!(!one.contradiction_detected);
    assert_eq!(one.contradiction_localized, Some(false));
    assert_eq!(one.contradiction_type_correct, Some(false));
    // The field fails, not the belief: the other fields are scored as stated.
    assert!(!one.contract_failure);
    assert!(one.top_state_correct);
    assert_eq!(one.supporting.f1, 1.0);
    // A repeated id is one claim, not a conflict.
    let twice = score_belief(&answer(Normal, &[], &[], &[&["obs-1", "obs-1"]]), &r);
    assert!(!twice.contradiction_detected);
    // Where no contradiction is active, a one-id entry is not a true negative either.
    let none = score_belief(&answer(Normal, &[], &[], &[&["obs-1"]]), &reference(false));
    assert!(!none.contradiction_detected);
    // Two ids still detect and localize.
    let two = score_belief(&answer(Normal, &[], &[], &[&["obs-2", "obs-1"]]), &r);
    assert!(two.contradiction_detected);
    assert_eq!(two.contradiction_localized, Some(true));
}

#[test]
fn support_is_scored_against_the_state_the_reference_attributes_it_to() {
    use ReferenceState::{Anomalous, Normal, Undetermined};
    let r = reference(true);
    // obs-1 said to support anomalous, where the reference has it supporting normal.
    let wrong = score_belief(&answer(Anomalous, &["obs-1"], &[], &[]), &r);
    assert_eq!(wrong.supporting.f1, 0.0);
    assert_eq!(wrong.contradicting.f1, 0.0);
    // Right attributions under the wrong top state: obs-2 favours anomalous and obs-1
    // opposes it, which is what the reference says of both.
    let swapped = score_belief(&answer(Anomalous, &["obs-2"], &["obs-1"], &[]), &r);
    assert_eq!(swapped.supporting.f1, 1.0);
    assert_eq!(swapped.contradicting.f1, 1.0);
    assert!(!swapped.top_state_correct);
    // The same state: the lists as listed.
    let right = score_belief(&answer(Normal, &["obs-1"], &["obs-2"], &[]), &r);
    assert_eq!((right.supporting.f1, right.contradicting.f1), (1.0, 1.0));
    // Undetermined attributes nothing to either state.
    let tie = score_belief(&answer(Undetermined, &["obs-1"], &["obs-2"], &[]), &r);
    assert_eq!((tie.supporting.f1, tie.contradicting.f1), (0.0, 0.0));
    // Leakage still reads the supporting list as listed.
    let leak = score_belief(&answer(Anomalous, &["obs-distractor"], &[], &[]), &r);
    assert_eq!(leak.leaked, 1);
}
