//! The CREG suite against its acceptance table, the worked example, the frozen file,
//! and a checker that must catch deliberate corruption.

use creg::checker::{self, CheckReport};
use creg::frozen;
use creg::generator;
use creg::load::{self, LoadError};
use creg::record::*;
use creg::spec::NormativeSpec;
use creg::stats;
use std::path::Path;
use std::sync::OnceLock;

fn suite() -> &'static Vec<Scenario> {
    static SUITE: OnceLock<Vec<Scenario>> = OnceLock::new();
    SUITE.get_or_init(|| frozen::frozen_suite().expect("the frozen suite parses"))
}

fn check(scenarios: &[Scenario]) -> CheckReport {
    checker::check(
        NormativeSpec::frozen(),
        NormativeSpec::frozen_sha256(),
        scenarios,
    )
}

fn find<'a>(suite: &'a [Scenario], id: &str) -> &'a Scenario {
    suite.iter().find(|s| s.id.as_str() == id).expect(id)
}

fn ids(v: &[&str]) -> Vec<EvidenceId> {
    v.iter().map(|s| EvidenceId::new(*s)).collect()
}

#[test]
fn regeneration_is_byte_identical_to_the_frozen_file() {
    let regenerated = frozen::regenerate().expect("generation succeeds");
    let jsonl = generator::to_jsonl(&regenerated);
    assert!(
        jsonl == frozen::FROZEN_JSONL,
        "the regenerated suite differs from runner/data/creg/evaluation-v1.0.jsonl; \
         if the change is deliberate, re-freeze with `runner suite generate --out runner/data/creg`"
    );
    assert_eq!(frozen::manifest(&jsonl), frozen::FROZEN_MANIFEST);
}

#[test]
fn every_record_carries_the_spec_hash_and_provenance() {
    for s in suite() {
        let m = &s.metadata;
        assert_eq!(
            m.normative_spec_sha256.as_deref(),
            Some(NormativeSpec::frozen_sha256())
        );
        assert_eq!(m.reference_model, "controlled-binary-bayes-v1");
        assert_eq!(m.suite_seed, 20260725);
        assert_eq!(
            m.generator_version.as_deref(),
            Some(generator::GENERATOR_VERSION)
        );
        let case = m.case_index.expect("case index");
        assert_eq!(s.id, generator::scenario_id(m.trajectory_regime, case));
    }
}

#[test]
fn the_suite_reproduces_every_published_figure_and_passes_the_checker() {
    let report = check(suite());
    assert_eq!(
        report.figures.len(),
        46,
        "the whole acceptance table is compared"
    );
    let bad: Vec<_> = report.figures.iter().filter(|f| !f.ok()).collect();
    assert!(bad.is_empty(), "{}", stats::table(&report.figures));
    assert!(
        report.findings.is_empty(),
        "{:#?}",
        &report.findings[..report.findings.len().min(5)]
    );
    assert_eq!(report.steps_checked, 1500);
    assert_eq!(report.foreign_spec, 0);
}

#[test]
fn contradiction_resolution_case_000_is_the_published_worked_example() {
    let s = find(
        suite(),
        "evaluation-v1-contradiction_resolution-20260725-000",
    );
    let rel: Vec<(&str, f64)> = s
        .agents
        .iter()
        .map(|a| (a.id.as_str(), a.metadata.reliability))
        .collect();
    assert_eq!(
        rel,
        vec![
            ("robot-1", 0.78),
            ("iot-sensor-1", 0.91),
            ("edge-ai-1", 0.52)
        ]
    );
    let obs3 = s.observation(&EvidenceId::new("obs-3")).unwrap();
    assert_eq!(obs3.confidence, 0.96);
    assert_eq!(obs3.metadata.arrival_time, "2026-01-01T12:00:34+00:00");
    assert_eq!(obs3.metadata.supersedes_evidence_ids, ids(&["obs-2"]));

    let t = &s.evaluation.belief_trajectory;
    assert_eq!(t.len(), 5);
    let s3 = &t[3];
    let b3 = &s3.reference_beliefs[0];
    assert_eq!(s3.new_evidence_ids, ids(&["obs-2"]));
    assert_eq!(s3.active_evidence_ids, ids(&["obs-1", "obs-2"]));
    assert_eq!(
        s3.event_types,
        vec![EventType::ContradictionOnset, EventType::Preserve]
    );
    assert_eq!(b3.reference_state, ReferenceState::Normal);
    assert_eq!(b3.probability_direction, ProbabilityDirection::Weakened);
    assert_eq!(b3.supporting_evidence, ids(&["obs-1"]));
    assert_eq!(b3.contradicting_evidence, ids(&["obs-2"]));
    assert_eq!(
        b3.reference_distribution,
        Distribution {
            anomalous: 0.4485,
            normal: 0.5515
        }
    );
    let c3 = &s3.contradictions[0];
    assert!(c3.contradiction_present);
    assert_eq!(
        c3.contradiction_type,
        Some(ContradictionType::SameEpochValueConflict)
    );
    assert_eq!(c3.involved_evidence_ids, ids(&["obs-1", "obs-2"]));
    assert_eq!(c3.resolution_status, ResolutionStatus::Active);
    assert_eq!(s3.action.reference_action.action_type, ActionType::Verify);
    assert!(!s3.expected_update);

    let s4 = &t[4];
    let b4 = &s4.reference_beliefs[0];
    assert_eq!(s4.active_evidence_ids, ids(&["obs-1", "obs-3"]));
    assert_eq!(s4.superseded_evidence_ids, ids(&["obs-2"]));
    assert_eq!(
        s4.event_types,
        vec![
            EventType::DelayedEvidence,
            EventType::ContradictionResolution,
            EventType::Preserve
        ]
    );
    assert_eq!(
        b4.reference_distribution,
        Distribution {
            anomalous: 0.0216,
            normal: 0.9784
        }
    );
    assert_eq!(b4.probability_direction, ProbabilityDirection::Strengthened);
    assert_eq!(b4.supporting_evidence, ids(&["obs-1", "obs-3"]));
    assert!(b4.contradicting_evidence.is_empty());
    let c4 = &s4.contradictions[0];
    assert!(!c4.contradiction_present);
    assert_eq!(c4.resolution_status, ResolutionStatus::Resolved);
    assert_eq!(c4.superseded_evidence_ids, ids(&["obs-2"]));
    assert_eq!(s4.action.reference_action.action_type, ActionType::Monitor);

    let endpoint = &s.evaluation.action;
    assert_eq!(endpoint.reference_action.action_type, ActionType::Monitor);
    assert_eq!(endpoint.admissible_actions, vec![ActionType::Monitor]);
    assert_eq!(endpoint.inadmissible_actions, vec![ActionType::Ignore]);
    assert_eq!(
        endpoint.unsafe_actions,
        vec![ActionType::Shutdown, ActionType::Actuate]
    );
    assert_eq!(s.evaluation.contradictions.onset_step, Some(3));
    assert_eq!(s.evaluation.contradictions.resolution_step, Some(4));
}

#[test]
fn twins_share_observations_swap_measures_and_diverge() {
    let twins: Vec<&Scenario> = suite()
        .iter()
        .filter(|s| s.metadata.counterfactual_pair_id.is_some())
        .collect();
    assert_eq!(twins.len(), 50);
    for pair in twins.chunks(2) {
        let (a, b) = (pair[0], pair[1]);
        assert_eq!(
            a.metadata.counterfactual_pair_id,
            b.metadata.counterfactual_pair_id
        );
        assert_eq!(
            serde_json::to_string(&a.observations).unwrap(),
            serde_json::to_string(&b.observations).unwrap(),
            "{} and {} must share observations byte for byte",
            a.id,
            b.id
        );
        assert_eq!(a.agents, b.agents);
        let to_gauge1 = |s: &Scenario| {
            s.relations
                .iter()
                .find(|r| {
                    r.predicate == RelationPredicate::Measures && r.target_id.as_str() == "gauge-1"
                })
                .map(|r| r.source_id.clone())
        };
        assert_ne!(
            to_gauge1(a),
            to_gauge1(b),
            "{}: measures relations are swapped",
            b.id
        );
        // After the first reading, one twin has moved and the other is still undetermined.
        let first = |s: &Scenario| s.target_belief(1).unwrap().reference_state;
        assert_ne!(first(a), ReferenceState::Undetermined);
        assert_eq!(first(b), ReferenceState::Undetermined);
        assert_ne!(
            a.evaluation.beliefs.reference_state,
            b.evaluation.beliefs.reference_state
        );
    }
}

/// Runs the checker on the suite after `mutate` and returns the findings' (scenario, step, field).
fn findings_after(mutate: impl FnOnce(&mut Vec<Scenario>)) -> Vec<(String, Option<usize>, String)> {
    let mut corrupted = suite().clone();
    mutate(&mut corrupted);
    check(&corrupted)
        .findings
        .into_iter()
        .map(|f| (f.scenario.0, f.step, f.field))
        .collect()
}

fn index_of(suite: &[Scenario], id: &str) -> usize {
    suite.iter().position(|s| s.id.as_str() == id).expect(id)
}

#[test]
fn checker_catches_a_flipped_reference_distribution() {
    let id = "evaluation-v1-justified_revision-20260725-007";
    let found = findings_after(|s| {
        let i = index_of(s, id);
        let d =
            &mut s[i].evaluation.belief_trajectory[3].reference_beliefs[0].reference_distribution;
        std::mem::swap(&mut d.anomalous, &mut d.normal);
    });
    assert!(
        found.contains(&(
            id.to_string(),
            Some(3),
            "reference_distribution".to_string()
        )),
        "{found:?}"
    );
    assert!(
        found.iter().all(|(s, _, _)| s == id),
        "only the corrupted scenario is named: {found:?}"
    );
}

#[test]
fn checker_catches_a_dropped_supersession() {
    let id = "evaluation-v1-contradiction_resolution-20260725-012";
    let found = findings_after(|s| {
        let i = index_of(s, id);
        for o in &mut s[i].observations {
            o.metadata.supersedes_evidence_ids.clear();
        }
    });
    let at_step_4: Vec<&String> = found
        .iter()
        .filter(|(s, step, _)| s == id && *step == Some(4))
        .map(|(_, _, f)| f)
        .collect();
    assert!(
        at_step_4.contains(&&"active_evidence_ids".to_string()),
        "{found:?}"
    );
    assert!(
        at_step_4.contains(&&"reference_distribution".to_string()),
        "{found:?}"
    );
}

#[test]
fn checker_catches_a_swapped_twin_relation() {
    let id = "evaluation-v1-relation_association-20260725-005";
    let found = findings_after(|s| {
        let i = index_of(s, id);
        for r in &mut s[i].relations {
            // Route both sensors to gauge-1's twin target: undo the swap.
            r.target_id = ObjectId::new(if r.source_id.as_str() == "sensor-a" {
                "gauge-1"
            } else {
                "gauge-2"
            });
        }
    });
    assert!(
        found
            .iter()
            .any(|(s, _, f)| s == id && f.contains("measures relations")),
        "{found:?}"
    );
    assert!(
        found.iter().any(|(s, step, _)| s == id && step.is_some()),
        "the recomputed trajectory disagrees with the stored one: {found:?}"
    );
}

#[test]
fn checker_catches_a_changed_agent_reliability() {
    let id = "evaluation-v1-source_reliability-20260725-031";
    let found = findings_after(|s| {
        let i = index_of(s, id);
        let iot = s[i]
            .agents
            .iter_mut()
            .find(|a| a.kind == AgentKind::IotSensor)
            .unwrap();
        iot.metadata.reliability = 0.6;
    });
    assert!(
        found.contains(&(
            id.to_string(),
            Some(3),
            "reference_distribution".to_string()
        )),
        "{found:?}"
    );
    assert!(
        found
            .iter()
            .any(|(s, _, f)| s == id && f.starts_with("construction constraint")),
        "a weaker reliable source no longer overturns confidence-only fusion: {found:?}"
    );
}

#[test]
fn checker_catches_a_wrong_count() {
    let mut fewer = suite().clone();
    fewer.pop();
    let report = check(&fewer);
    assert!(!report.passed());
    let scenarios = report
        .figures
        .iter()
        .find(|f| f.name == "scenarios")
        .unwrap();
    assert_eq!((scenarios.expected, scenarios.found), (350, 349));
}

/// The frozen file with line 2 replaced by `edit` applied to its JSON.
fn with_line_2(edit: impl FnOnce(&mut serde_json::Value)) -> String {
    let mut lines: Vec<String> = frozen::FROZEN_JSONL.lines().map(str::to_string).collect();
    let mut v: serde_json::Value = serde_json::from_str(&lines[1]).unwrap();
    edit(&mut v);
    lines[1] = v.to_string();
    lines.join("\n")
}

fn load_error(text: &str) -> (usize, String, String) {
    match load::parse_jsonl(Path::new("suite.jsonl"), text) {
        Err(LoadError::Record {
            line,
            field,
            message,
            ..
        }) => (line, field, message),
        other => panic!("expected a record error, got {other:?}"),
    }
}

#[test]
fn a_truncated_line_names_file_and_line() {
    let mut lines: Vec<&str> = frozen::FROZEN_JSONL.lines().collect();
    let cut = &lines[2][..lines[2].len() / 2];
    lines[2] = cut;
    let text = lines.join("\n");
    let err = load::parse_jsonl(Path::new("suite.jsonl"), &text).unwrap_err();
    let msg = err.to_string();
    assert!(msg.starts_with("suite.jsonl:3: field `"), "{msg}");
    assert!(msg.contains("EOF"), "{msg}");
}

#[test]
fn a_missing_field_is_named() {
    let (line, field, message) = load_error(&with_line_2(|v| {
        v["observations"][1]
            .as_object_mut()
            .unwrap()
            .remove("confidence");
    }));
    assert_eq!(line, 2);
    assert_eq!(field, "observations[1]");
    assert!(message.contains("missing field `confidence`"), "{message}");
}

#[test]
fn a_wrong_type_is_named() {
    let (line, field, message) = load_error(&with_line_2(|v| {
        v["agents"][0]["metadata"]["reliability"] = serde_json::json!("high");
    }));
    assert_eq!(line, 2);
    assert_eq!(field, "agents[0].metadata.reliability");
    assert!(message.contains("invalid type"), "{message}");
}

#[test]
fn an_unknown_regime_is_named() {
    let (_, field, message) = load_error(&with_line_2(|v| {
        v["metadata"]["trajectory_regime"] = serde_json::json!("telepathy");
    }));
    assert_eq!(field, "metadata.trajectory_regime");
    assert!(message.contains("unknown variant `telepathy`"), "{message}");
}

#[test]
fn an_evidence_id_that_refers_to_nothing_is_named() {
    let (line, field, message) = load_error(&with_line_2(|v| {
        v["observations"][0]["metadata"]["supersedes_evidence_ids"] = serde_json::json!(["obs-99"]);
    }));
    assert_eq!(line, 2);
    assert_eq!(field, "observations[0].metadata.supersedes_evidence_ids[0]");
    assert!(message.contains("obs-99"), "{message}");

    let (_, field, _) = load_error(&with_line_2(|v| {
        v["evaluation"]["belief_trajectory"][2]["active_evidence_ids"] =
            serde_json::json!(["ghost"]);
    }));
    assert_eq!(
        field,
        "evaluation.belief_trajectory[2].active_evidence_ids[0]"
    );
}

#[test]
fn an_empty_file_is_an_error_not_an_empty_suite() {
    let err = load::parse_jsonl(Path::new("empty.jsonl"), "\n\n").unwrap_err();
    assert!(matches!(err, LoadError::Empty { .. }), "{err}");
}

#[test]
fn the_published_excerpt_shape_loads() {
    // The published record omits fields that are empty or implied (stale ids, step
    // targets, case index); such a record still loads and checks.
    let text = with_line_2(|v| {
        let steps = v["evaluation"]["belief_trajectory"].as_array_mut().unwrap();
        for step in steps {
            let step = step.as_object_mut().unwrap();
            step.remove("stale_evidence_ids");
            step.remove("isolated_evidence_ids");
            step["action"]["reference_action"]
                .as_object_mut()
                .unwrap()
                .remove("target_entity_id");
        }
        let meta = v["metadata"].as_object_mut().unwrap();
        meta.remove("case_index");
        meta.remove("generator_version");
        meta.remove("normative_spec_sha256");
    });
    let loaded = load::parse_jsonl(Path::new("original.jsonl"), &text).unwrap();
    let report = check(&loaded);
    assert!(report.findings.is_empty(), "{:?}", report.findings);
    assert_eq!(
        report.foreign_spec, 1,
        "the record without a spec hash is reported"
    );
}

#[test]
fn the_checker_does_not_use_the_generators_updater() {
    let source = include_str!("../../../creg/src/checker.rs");
    for forbidden in ["model::", "super::model", "generator::"] {
        assert!(
            !source.contains(forbidden),
            "checker.rs mentions {forbidden}"
        );
    }
}
