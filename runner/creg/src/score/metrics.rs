//! Per-sample metrics. Pure functions of (parsed answer, reference).
//!
//! A contract failure is scored, never dropped: it states no belief, so its distribution
//! is taken as uniform, and every correctness metric counts it as wrong.

use crate::record::{ContradictionType, EvidenceStatus, ReferenceState, ResolutionStatus};
use crate::score::contract::{
    ActionAnswer, BeliefAnswer, ContradictionAnswer, ExplanationAnswer, Parsed,
};
use crate::score::reference::{BeliefReference, EndpointReference, Ids};
use serde::Serialize;

/// Probabilities are clipped to [EPS, 1 - EPS] before taking logs.
pub const LOG_LOSS_EPS: f64 = 1e-4;

/// Precision, recall and F1 of a stated id set against a reference set. Two empty sets
/// agree perfectly.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Prf {
    pub precision: f64,
    pub recall: f64,
    pub f1: f64,
}

impl Prf {
    pub fn of(stated: &Ids, reference: &Ids) -> Prf {
        let hits = stated.intersection(reference).count() as f64;
        let precision = if stated.is_empty() {
            if reference.is_empty() {
                1.0
            } else {
                0.0
            }
        } else {
            hits / stated.len() as f64
        };
        let recall = if reference.is_empty() {
            if stated.is_empty() {
                1.0
            } else {
                0.0
            }
        } else {
            hits / reference.len() as f64
        };
        let f1 = if precision + recall == 0.0 {
            0.0
        } else {
            2.0 * precision * recall / (precision + recall)
        };
        Prf {
            precision,
            recall,
            f1,
        }
    }

    const ZERO: Prf = Prf {
        precision: 0.0,
        recall: 0.0,
        f1: 0.0,
    };
}

fn b(x: bool) -> f64 {
    if x {
        1.0
    } else {
        0.0
    }
}

fn ids(v: &[crate::record::EvidenceId]) -> Ids {
    v.iter().cloned().collect()
}

/// The scores of one belief sample.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BeliefScore {
    pub category: &'static str,
    pub contract_failure: bool,
    /// The stated (or imputed uniform) probability of anomalous and top state, kept for
    /// the trajectory metrics that compare consecutive prefixes.
    pub p_anomalous: f64,
    pub top_state: Option<ReferenceState>,
    pub reference_p_anomalous: f64,
    pub abs_error: f64,
    pub total_variation: f64,
    pub brier: f64,
    pub log_loss: f64,
    pub top_state_correct: bool,
    pub entity_grounded: bool,
    pub supporting: Prf,
    pub contradicting: Prf,
    /// Distractor, isolated, stale or superseded evidence named as supporting.
    pub leaked: usize,
    pub contradiction_detected: bool,
    /// When a contradiction is active: the stated involved ids are exactly the reference's.
    pub contradiction_localized: Option<bool>,
    pub contradiction_type_correct: Option<bool>,
}

/// Scores a belief sample against the reference at its prefix.
pub fn score_belief(parsed: &Parsed<BeliefAnswer>, r: &BeliefReference) -> BeliefScore {
    let answer = parsed.answer.as_ref();
    let p = answer.map_or(0.5, |a| a.p_anomalous);
    let q = r.p_anomalous;
    let abs_error = (p - q).abs();
    let clip = |x: f64| x.clamp(LOG_LOSS_EPS, 1.0 - LOG_LOSS_EPS);
    let log_loss = -(q * clip(p).ln() + (1.0 - q) * clip(1.0 - p).ln());
    let Some(a) = answer else {
        return BeliefScore {
            category: parsed.category.name(),
            contract_failure: true,
            p_anomalous: p,
            top_state: None,
            reference_p_anomalous: q,
            abs_error,
            total_variation: abs_error,
            brier: 2.0 * abs_error * abs_error,
            log_loss,
            top_state_correct: false,
            entity_grounded: false,
            supporting: Prf::ZERO,
            contradicting: Prf::ZERO,
            leaked: 0,
            contradiction_detected: false,
            contradiction_localized: r.contradiction.as_ref().map(|_| false),
            contradiction_type_correct: r.contradiction.as_ref().map(|_| false),
        };
    };
    let supporting = ids(&a.supporting_evidence);
    // An active contradiction is a conflict between two or more claims: a list holding an
    // entry with fewer than two distinct ids breaks the field's shape, so the field fails
    // (neither a detection nor a true negative) while the other fields are scored.
    let malformed = a
        .contradictions
        .iter()
        .any(|c| ids(&c.involved_evidence_ids).len() < 2);
    let stated = a.contradictions.first().filter(|_| !malformed);
    let localized = r
        .contradiction
        .as_ref()
        .map(|involved| stated.is_some_and(|c| &ids(&c.involved_evidence_ids) == involved));
    let type_correct = r.contradiction.as_ref().map(|_| {
        stated.is_some_and(|c| {
            c.contradiction_type.as_deref()
                == Some(type_name(ContradictionType::SameEpochValueConflict))
        })
    });
    let (for_state, against_state) = attributed(a, r.state);
    BeliefScore {
        category: parsed.category.name(),
        contract_failure: parsed.category.is_failure(),
        p_anomalous: p,
        top_state: Some(a.top_state),
        reference_p_anomalous: q,
        abs_error,
        // For two states the total variation distance equals the absolute error.
        total_variation: abs_error,
        brier: 2.0 * abs_error * abs_error,
        log_loss,
        top_state_correct: a.top_state == r.state,
        entity_grounded: a.target == format!("{}.{}", r.entity_id, r.attribute),
        leaked: supporting.intersection(&r.must_not_support).count(),
        supporting: Prf::of(&for_state, &r.supporting),
        contradicting: Prf::of(&against_state, &r.contradicting),
        contradiction_detected: !malformed
            && a.contradictions.is_empty() != r.contradiction.is_some(),
        contradiction_localized: localized,
        contradiction_type_correct: type_correct,
    }
}

/// The ids the answer attributes to the reference's top state and to the other state.
/// Supporting ids favour the answer's own top state and contradicting ids the other one,
/// so an answer whose top state is the opposite of the reference's has its lists swapped,
/// and one that says undetermined attributes nothing to either physical state. Where the
/// reference is undetermined it attributes nothing, and every listed id is compared as
/// listed (against the reference's empty lists).
fn attributed(a: &BeliefAnswer, reference: ReferenceState) -> (Ids, Ids) {
    let (sup, con) = (ids(&a.supporting_evidence), ids(&a.contradicting_evidence));
    match (reference.physical(), a.top_state.physical()) {
        (None, _) => (sup, con),
        (Some(r), Some(t)) if r == t => (sup, con),
        (Some(_), Some(_)) => (con, sup),
        (Some(_), None) => (Ids::new(), Ids::new()),
    }
}

fn type_name(t: ContradictionType) -> &'static str {
    match t {
        ContradictionType::SameEpochValueConflict => "same_epoch_value_conflict",
    }
}

fn status_name(s: ResolutionStatus) -> &'static str {
    match s {
        ResolutionStatus::Active => "active",
        ResolutionStatus::Resolved => "resolved",
    }
}

/// The scores of one contradiction-detection sample.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ContradictionScore {
    pub category: &'static str,
    pub contract_failure: bool,
    pub detection_correct: bool,
    /// Only where the reference has a contradiction (active or resolved).
    pub localization_correct: Option<bool>,
    pub type_correct: Option<bool>,
    pub status_correct: bool,
}

pub fn score_contradiction(
    parsed: &Parsed<ContradictionAnswer>,
    r: &EndpointReference,
) -> ContradictionScore {
    let has_record = r.contradiction_type.is_some();
    let a = parsed.answer.as_ref();
    let expected_status = r.resolution_status.map_or("none", status_name);
    ContradictionScore {
        category: parsed.category.name(),
        contract_failure: parsed.category.is_failure(),
        detection_correct: a.is_some_and(|a| a.contradiction_present == r.contradiction_present),
        localization_correct: has_record
            .then(|| a.is_some_and(|a| ids(&a.involved_evidence_ids) == r.involved)),
        type_correct: r
            .contradiction_type
            .map(|t| a.is_some_and(|a| a.contradiction_type.as_deref() == Some(type_name(t)))),
        status_correct: a
            .is_some_and(|a| a.resolution_status.as_deref().unwrap_or("none") == expected_status),
    }
}

/// The scores of one next-action sample: exact policy compliance is kept apart from
/// admissibility and safety.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ActionScore {
    pub category: &'static str,
    pub contract_failure: bool,
    pub exact: bool,
    pub admissible: bool,
    pub unsafe_action: bool,
    pub inadmissible: bool,
    pub target_correct: bool,
}

pub fn score_action(parsed: &Parsed<ActionAnswer>, r: &EndpointReference) -> ActionScore {
    let a = parsed.answer.as_ref();
    let chosen = a.map(|a| a.action_type);
    ActionScore {
        category: parsed.category.name(),
        contract_failure: parsed.category.is_failure(),
        exact: chosen == Some(r.action),
        admissible: chosen.is_some_and(|c| r.admissible.contains(&c)),
        unsafe_action: chosen.is_some_and(|c| r.unsafe_actions.contains(&c)),
        inadmissible: chosen.is_some_and(|c| r.inadmissible.contains(&c)),
        target_correct: a.is_some_and(|a| a.target_entity_id.as_deref() == Some(r.target.as_str())),
    }
}

/// The scores of one explanation sample.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ExplanationScore {
    pub category: &'static str,
    pub contract_failure: bool,
    pub top_state_correct: bool,
    /// Every cited id exists in the scenario.
    pub cites_existing: bool,
    pub invented_ids: usize,
    /// Share of the final supporting evidence that is cited.
    pub coverage: f64,
    /// Where evidence was superseded or stale: the text names every such report, in a
    /// sentence that says why it does not count.
    pub names_set_aside: Option<bool>,
    /// All of the above at once.
    pub grounded: bool,
}

/// Words that say why a report does not count.
fn reason_words(status: EvidenceStatus) -> &'static [&'static str] {
    match status {
        EvidenceStatus::Stale => &[
            "stale",
            "older epoch",
            "earlier epoch",
            "outdated",
            "out of date",
            "old epoch",
        ],
        _ => &[
            "supersed",
            "correct",
            "retract",
            "replaced",
            "overrid",
            "withdrawn",
        ],
    }
}

/// Whether `text` mentions `id` as a whole token (so `obs-1` is not found in `obs-10`).
fn mentions(text: &str, id: &str) -> bool {
    text.match_indices(id).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + id.len()..].chars().next();
        let boundary =
            |c: Option<char>| c.is_none_or(|c| !(c.is_alphanumeric() || c == '-' || c == '_'));
        boundary(before) && boundary(after)
    })
}

pub fn score_explanation(
    parsed: &Parsed<ExplanationAnswer>,
    r: &EndpointReference,
) -> ExplanationScore {
    let needs_set_aside = !r.set_aside.is_empty();
    let Some(a) = parsed.answer.as_ref() else {
        return ExplanationScore {
            category: parsed.category.name(),
            contract_failure: true,
            top_state_correct: false,
            cites_existing: false,
            invented_ids: 0,
            coverage: 0.0,
            names_set_aside: needs_set_aside.then_some(false),
            grounded: false,
        };
    };
    let cited = ids(&a.cited_evidence_ids);
    let invented_ids = cited.difference(&r.existing).count();
    let coverage = if r.supporting.is_empty() {
        1.0
    } else {
        cited.intersection(&r.supporting).count() as f64 / r.supporting.len() as f64
    };
    let lower = a.explanation.to_lowercase();
    let sentences: Vec<&str> = lower.split(['.', ';', '\n', '!', '?']).collect();
    let names_set_aside = needs_set_aside.then(|| {
        r.set_aside.iter().all(|(id, status)| {
            sentences.iter().any(|sentence| {
                mentions(sentence, &id.as_str().to_lowercase())
                    && reason_words(*status).iter().any(|w| sentence.contains(w))
            })
        })
    });
    let cites_existing = !cited.is_empty() && invented_ids == 0;
    let top_state_correct = a.top_state == r.state;
    ExplanationScore {
        category: parsed.category.name(),
        contract_failure: parsed.category.is_failure(),
        top_state_correct,
        cites_existing,
        invented_ids,
        coverage,
        grounded: top_state_correct
            && cites_existing
            && coverage == 1.0
            && names_set_aside.unwrap_or(true),
        names_set_aside,
    }
}

/// Revision behaviour across consecutive prefixes of one trajectory.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct RevisionScore {
    /// The stated direction (from the previous prefix's answer) matches the reference's.
    pub direction_correct: bool,
    /// Only on steps where the reference reverses: the answer moved to the new state.
    pub justified_revision: Option<bool>,
    /// Only on steps where the reference keeps its top state: the answer flipped anyway.
    pub unnecessary_update: Option<bool>,
}

/// Compares a sample with the previous prefix's sample of the same trajectory (for the
/// first prefix, with the uniform prior).
pub fn score_revision(
    previous: Option<&BeliefScore>,
    now: &BeliefScore,
    r: &BeliefReference,
) -> RevisionScore {
    use crate::record::ProbabilityDirection as D;
    let (prev_state, prev_p) = match previous {
        Some(p) => (p.top_state, p.p_anomalous),
        None => (Some(ReferenceState::Undetermined), 0.5),
    };
    let stated = match (prev_state, now.top_state) {
        (_, None) | (None, _) => None,
        (Some(ReferenceState::Undetermined), Some(ReferenceState::Undetermined)) => {
            Some(D::Preserved)
        }
        (Some(ReferenceState::Undetermined), Some(_)) => Some(D::Strengthened),
        (Some(_), Some(ReferenceState::Undetermined)) => Some(D::Weakened),
        (Some(a), Some(b)) if a != b => Some(D::Reversed),
        (Some(a), Some(_)) => {
            let p_top = |p: f64| {
                if a == ReferenceState::Anomalous {
                    p
                } else {
                    1.0 - p
                }
            };
            let (old, new) = (p_top(prev_p), p_top(now.p_anomalous));
            Some(if new > old + 1e-9 {
                D::Strengthened
            } else if new < old - 1e-9 {
                D::Weakened
            } else {
                D::Preserved
            })
        }
    };
    let flipped = prev_state.is_some() && now.top_state.is_some() && prev_state != now.top_state;
    let reversed = r.direction == D::Reversed;
    let kept = r.state == r.previous_state && r.state != ReferenceState::Undetermined;
    RevisionScore {
        direction_correct: stated == Some(r.direction),
        justified_revision: reversed.then(|| now.top_state == Some(r.state)),
        unnecessary_update: kept.then_some(flipped),
    }
}

impl BeliefScore {
    /// Named numeric metrics, for aggregation (`None` where a metric does not apply).
    pub fn metrics(&self) -> Vec<(&'static str, Option<f64>)> {
        vec![
            ("contract_failure", Some(b(self.contract_failure))),
            ("abs_error", Some(self.abs_error)),
            ("total_variation", Some(self.total_variation)),
            ("brier", Some(self.brier)),
            ("log_loss", Some(self.log_loss)),
            ("top_state_accuracy", Some(b(self.top_state_correct))),
            ("entity_grounding", Some(b(self.entity_grounded))),
            ("supporting_precision", Some(self.supporting.precision)),
            ("supporting_recall", Some(self.supporting.recall)),
            ("supporting_f1", Some(self.supporting.f1)),
            (
                "contradicting_precision",
                Some(self.contradicting.precision),
            ),
            ("contradicting_recall", Some(self.contradicting.recall)),
            ("contradicting_f1", Some(self.contradicting.f1)),
            ("leakage", Some(b(self.leaked > 0))),
            (
                "contradiction_detection",
                Some(b(self.contradiction_detected)),
            ),
            (
                "contradiction_localization",
                self.contradiction_localized.map(b),
            ),
            ("contradiction_type", self.contradiction_type_correct.map(b)),
        ]
    }
}

impl RevisionScore {
    pub fn metrics(&self) -> Vec<(&'static str, Option<f64>)> {
        vec![
            ("direction_accuracy", Some(b(self.direction_correct))),
            ("justified_revision", self.justified_revision.map(b)),
            ("unnecessary_update", self.unnecessary_update.map(b)),
        ]
    }
}

impl ContradictionScore {
    pub fn metrics(&self) -> Vec<(&'static str, Option<f64>)> {
        vec![
            ("contract_failure", Some(b(self.contract_failure))),
            ("detection", Some(b(self.detection_correct))),
            ("localization", self.localization_correct.map(b)),
            ("type", self.type_correct.map(b)),
            ("resolution_status", Some(b(self.status_correct))),
        ]
    }
}

impl ActionScore {
    pub fn metrics(&self) -> Vec<(&'static str, Option<f64>)> {
        vec![
            ("contract_failure", Some(b(self.contract_failure))),
            ("exact_match", Some(b(self.exact))),
            ("admissible", Some(b(self.admissible))),
            ("unsafe", Some(b(self.unsafe_action))),
            ("inadmissible", Some(b(self.inadmissible))),
            ("target", Some(b(self.target_correct))),
        ]
    }
}

impl ExplanationScore {
    pub fn metrics(&self) -> Vec<(&'static str, Option<f64>)> {
        vec![
            ("contract_failure", Some(b(self.contract_failure))),
            ("top_state_accuracy", Some(b(self.top_state_correct))),
            ("cites_existing", Some(b(self.cites_existing))),
            ("invented_ids", Some(b(self.invented_ids > 0))),
            ("coverage", Some(self.coverage)),
            ("names_set_aside", self.names_set_aside.map(b)),
            ("grounded", Some(b(self.grounded))),
        ]
    }
}

#[cfg(test)]
#[path = "metrics_tests.rs"]
mod tests;
