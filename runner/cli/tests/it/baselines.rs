//! The baseline systems are the scorer's own test: the oracle scores perfectly on every
//! metric, and each heuristic fails exactly the regimes it is blind to.

use creg::baseline::{self as baseline, System};
use creg::frozen;
use creg::record::{Regime, Scenario};
use creg::render::question::{questions, Question};
use creg::score::metrics;
use creg::score::reference::BeliefReference;
use creg::score::sample::{score_text, SampleScore};
use runner_engine::FinishReason;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

fn suite() -> &'static Vec<Scenario> {
    static SUITE: OnceLock<Vec<Scenario>> = OnceLock::new();
    SUITE.get_or_init(|| frozen::frozen_suite().unwrap())
}

/// Every sample of `system` on every scenario, scored through the text path.
fn run(system: System) -> Vec<(&'static Scenario, Question, SampleScore)> {
    let mut out = Vec::new();
    for s in suite() {
        for q in questions(s) {
            let text = baseline::answer(system, s, q).unwrap();
            let score = score_text(s, q, &text, FinishReason::Stop).unwrap();
            out.push((s, q, score));
        }
    }
    out
}

#[test]
fn the_oracle_scores_perfectly_on_every_metric() {
    let samples = run(System::Oracle);
    assert_eq!(samples.len(), 1150 + 3 * 350);
    let mut worst: BTreeMap<&str, f64> = BTreeMap::new();
    let mut previous: Option<metrics::BeliefScore> = None;
    for (s, q, score) in &samples {
        assert_eq!(score.category(), "valid", "{} {q:?}", s.id);
        for (name, value) in score.metrics() {
            let Some(v) = value else { continue };
            // Error-like metrics must be 0, the rest 1.
            let bad = match name {
                "abs_error" | "total_variation" | "brier" | "contract_failure" | "leakage"
                | "unsafe" | "inadmissible" | "invented_ids" => v,
                "log_loss" => continue,
                _ => 1.0 - v,
            };
            let w = worst.entry(name).or_default();
            *w = w.max(bad);
        }
        if let (Question::Belief { step }, SampleScore::Belief(b)) = (q, score) {
            let r = BeliefReference::at(s, *step).unwrap();
            let prev = if *step == 1 { None } else { previous.as_ref() };
            let rev = metrics::score_revision(prev, b, &r);
            assert!(rev.direction_correct, "{} step {step}", s.id);
            assert_ne!(rev.justified_revision, Some(false));
            assert_ne!(rev.unnecessary_update, Some(true));
            // The oracle's log loss is the reference's own entropy: the minimum.
            let p = r.p_anomalous;
            let entropy = -(p * p.max(1e-4).ln() + (1.0 - p) * (1.0 - p).max(1e-4).ln());
            assert!((b.log_loss - entropy).abs() < 1e-9, "{} step {step}", s.id);
            previous = Some(b.clone());
        }
    }
    let imperfect: Vec<_> = worst.iter().filter(|(_, w)| **w > 0.0).collect();
    assert!(imperfect.is_empty(), "imperfect metrics: {imperfect:?}");
    assert!(worst.len() >= 25, "every metric was exercised: {worst:?}");
}

/// Per regime: the share of scenarios whose final belief state and endpoint action are
/// both right.
fn endpoint_profile(system: System) -> BTreeMap<Regime, f64> {
    let mut right: BTreeMap<Regime, (usize, usize)> = BTreeMap::new();
    let samples = run(system);
    let mut by_scenario: BTreeMap<&str, (bool, bool)> = BTreeMap::new();
    for (s, q, score) in &samples {
        let last = s.evaluation.belief_trajectory.len() - 1;
        let entry = by_scenario.entry(s.id.as_str()).or_insert((false, false));
        match (q, score) {
            (Question::Belief { step }, SampleScore::Belief(b)) if *step == last => {
                entry.0 = b.top_state_correct
            }
            (Question::Action, SampleScore::Action(a)) => entry.1 = a.exact,
            _ => {}
        }
    }
    for s in suite() {
        let (state, action) = by_scenario[s.id.as_str()];
        let e = right.entry(s.metadata.trajectory_regime).or_default();
        e.0 += usize::from(state && action);
        e.1 += 1;
    }
    right
        .into_iter()
        .map(|(r, (k, n))| (r, k as f64 / n as f64))
        .collect()
}

fn failing(system: System) -> BTreeSet<Regime> {
    endpoint_profile(system)
        .into_iter()
        .filter(|(_, share)| *share < 1.0)
        .map(|(r, _)| r)
        .collect()
}

#[test]
fn each_heuristic_fails_only_the_regime_it_is_blind_to() {
    use Regime::*;
    let expect = |v: &[Regime]| v.iter().copied().collect::<BTreeSet<_>>();
    assert_eq!(failing(System::Oracle), expect(&[]));
    assert_eq!(
        failing(System::ConfidenceOnly),
        expect(&[SourceReliability])
    );
    assert_eq!(failing(System::NoRelations), expect(&[RelationAssociation]));
    assert_eq!(failing(System::NoEpochs), expect(&[StaleDelayedEvidence]));
    // The newest report wins even when it is the weaker one.
    assert_eq!(
        failing(System::LatestWins),
        expect(&[BeliefPreservation, ContradictionOnset])
    );
    assert_eq!(failing(System::Uniform), Regime::ALL.into_iter().collect());
}

#[test]
fn blind_spots_fail_outright_not_by_a_hair() {
    let confidence_only = endpoint_profile(System::ConfidenceOnly);
    assert_eq!(confidence_only[&Regime::SourceReliability], 0.0);
    let no_relations = endpoint_profile(System::NoRelations);
    assert!(
        no_relations[&Regime::RelationAssociation] <= 0.5,
        "one twin of every pair is wrong"
    );
    let no_epochs = endpoint_profile(System::NoEpochs);
    assert_eq!(no_epochs[&Regime::StaleDelayedEvidence], 0.0);
}

#[test]
fn unknown_baseline_names_list_the_known_ones() {
    let err = "psychic".parse::<System>().unwrap_err().to_string();
    assert!(
        err.contains("oracle") && err.contains("latest-wins"),
        "{err}"
    );
    for s in System::ALL {
        assert_eq!(s.name().parse::<System>().unwrap(), s);
    }
}

/// The contract files in prompts/ that the models are shown.
fn schema(task: &str) -> serde_json::Value {
    let text = match task {
        "belief" => include_str!("../../../../prompts/contracts/belief.v1.schema.json"),
        "contradiction" => {
            include_str!("../../../../prompts/contracts/contradiction.v1.schema.json")
        }
        "action" => include_str!("../../../../prompts/contracts/action.v1.schema.json"),
        "explanation" => include_str!("../../../../prompts/contracts/explanation.v1.schema.json"),
        other => panic!("no contract for {other}"),
    };
    serde_json::from_str(text).unwrap()
}

#[test]
fn baseline_answers_have_exactly_the_contract_fields_and_parse_as_valid() {
    for system in System::ALL {
        for s in suite().iter().step_by(7) {
            for q in questions(s) {
                let text = baseline::answer(system, s, q).unwrap();
                let answer: serde_json::Value = serde_json::from_str(&text).unwrap();
                let contract = schema(q.task_name());
                let mut fields: Vec<&String> = answer.as_object().unwrap().keys().collect();
                let mut defined: Vec<&String> =
                    contract["properties"].as_object().unwrap().keys().collect();
                fields.sort();
                defined.sort();
                assert_eq!(fields, defined, "{system} {q:?}");
                for required in contract["required"].as_array().unwrap() {
                    assert!(
                        answer.get(required.as_str().unwrap()).is_some(),
                        "{system} {q:?} {required}"
                    );
                }
                let score = score_text(s, q, &text, FinishReason::Stop).unwrap();
                assert_eq!(score.category(), "valid", "{system} {q:?}: {text}");
            }
        }
    }
}

#[test]
fn dropping_any_required_field_makes_an_answer_invalid() {
    let s = &suite()[120];
    for q in questions(s) {
        let text = baseline::answer(System::Oracle, s, q).unwrap();
        for required in schema(q.task_name())["required"].as_array().unwrap() {
            let mut answer: serde_json::Value = serde_json::from_str(&text).unwrap();
            answer
                .as_object_mut()
                .unwrap()
                .remove(required.as_str().unwrap());
            let score = score_text(s, q, &answer.to_string(), FinishReason::Stop).unwrap();
            assert_eq!(score.category(), "invalid", "{q:?} without {required}");
        }
    }
}
