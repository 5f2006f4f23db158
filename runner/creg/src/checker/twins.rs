//! The checks across scenarios: counterfactual twins, and the semantic fingerprint the
//! published duplicate count is computed from.

use crate::checker::*;

/// The counterfactual twins: same observations and agents byte for byte, measures
/// relations swapped, indistinguishable once relations are deleted.
pub(super) fn check_twins(scenarios: &[Scenario], out: &mut Vec<Finding>) {
    for (pair, twins) in pairs(scenarios) {
        check_pair(pair, &twins, out);
    }
}

/// The scenarios of each counterfactual pair, by pair id.
fn pairs(scenarios: &[Scenario]) -> BTreeMap<&str, Vec<&Scenario>> {
    let mut pairs: BTreeMap<&str, Vec<&Scenario>> = BTreeMap::new();
    for s in scenarios {
        if let Some(p) = &s.metadata.counterfactual_pair_id {
            pairs.entry(p.as_str()).or_default().push(s);
        }
    }
    pairs
}

fn check_pair(pair: &str, twins: &[&Scenario], out: &mut Vec<Finding>) {
    let mut note = |s: &Scenario, field: &str, expected: &str, found: String| {
        out.push(Finding {
            scenario: s.id.clone(),
            step: None,
            field: format!("counterfactual pair {pair}: {field}"),
            expected: expected.into(),
            found,
        })
    };
    let [a, b] = twins else {
        note(
            twins[0],
            "size",
            "2 twins",
            format!("{} twins", twins.len()),
        );
        return;
    };
    if without_relations(a) != without_relations(b) {
        note(
            b,
            "without relations",
            "identical to its twin",
            "different".into(),
        );
    }
    if measures(b) != swapped(measures(a)) || measures(a).is_empty() {
        note(
            b,
            "measures relations",
            "its twin's, with gauge-1 and gauge-2 swapped",
            show(measures(b)),
        );
    }
    if same_reference_beliefs(a, b) {
        note(
            b,
            "reference beliefs",
            "to differ from its twin's",
            "identical".into(),
        );
    }
}

/// The scenario as a model sees it once its relations are deleted.
fn without_relations(s: &Scenario) -> String {
    serde_json::json!({"agents": s.agents, "objects": s.objects, "observations": s.observations})
        .to_string()
}

/// The (sensor, gauge) pairs of the scenario's measures relations.
fn measures(s: &Scenario) -> BTreeSet<(String, String)> {
    s.relations
        .iter()
        .filter(|r| r.predicate == RelationPredicate::Measures)
        .map(|r| (r.source_id.0.clone(), r.target_id.0.clone()))
        .collect()
}

/// The measures pairs with gauge-1 and gauge-2 exchanged as targets.
fn swapped(measures: BTreeSet<(String, String)>) -> BTreeSet<(String, String)> {
    measures
        .into_iter()
        .map(|(src, tgt)| {
            let other = if tgt == "gauge-1" {
                "gauge-2"
            } else {
                "gauge-1"
            };
            (
                src,
                if tgt == "gauge-1" || tgt == "gauge-2" {
                    other.to_string()
                } else {
                    tgt
                },
            )
        })
        .collect()
}

/// Whether the twins' final state and every step's beliefs are the same.
fn same_reference_beliefs(a: &Scenario, b: &Scenario) -> bool {
    a.evaluation.beliefs.reference_state == b.evaluation.beliefs.reference_state
        && a.evaluation.belief_trajectory.len() == b.evaluation.belief_trajectory.len()
        && a.evaluation
            .belief_trajectory
            .iter()
            .zip(&b.evaluation.belief_trajectory)
            .all(|(x, y)| x.reference_beliefs == y.reference_beliefs)
}

/// The semantic fingerprint the checker counts: content without ids and names.
pub(super) fn fingerprint(s: &Scenario) -> String {
    let observations: Vec<serde_json::Value> = s
        .observations
        .iter()
        .map(|o| {
            serde_json::json!([
                o.agent_id,
                o.subject_id.0.starts_with("distractor"),
                o.predicate,
                o.value,
                o.confidence,
                o.timestamp,
                o.metadata
            ])
        })
        .collect();
    let content = serde_json::json!([
        s.metadata.trajectory_regime,
        s.agents,
        s.relations,
        observations
    ]);
    sha256_hex(content.to_string().as_bytes())
}
