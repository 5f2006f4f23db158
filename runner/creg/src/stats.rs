//! The suite's statistics and the published acceptance table they must reproduce.

use crate::record::*;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

/// One figure of the acceptance table: its name, the published value and what was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Figure {
    pub name: String,
    pub expected: u64,
    pub found: u64,
}

impl Figure {
    pub fn ok(&self) -> bool {
        self.expected == self.found
    }
}

/// The published figures of evaluation-v1.0 (`creg-targets.md`), as (name, value).
pub fn published() -> Vec<(String, u64)> {
    let mut t: Vec<(String, u64)> = vec![
        ("scenarios".into(), 350),
        ("scenarios with 4 steps".into(), 250),
        ("scenarios with 5 steps".into(), 100),
        ("observations".into(), 1150),
        ("scored prefixes".into(), 1150),
        ("reference steps incl. priors".into(), 1500),
        ("agents".into(), 1050),
        ("objects".into(), 1750),
        ("relations".into(), 400),
        ("relations adjacent_to".into(), 300),
        ("relations measures".into(), 100),
        ("counterfactual pairs".into(), 25),
        ("distractor observations".into(), 350),
        ("unique scenario ids".into(), 350),
        ("unique semantic fingerprints".into(), 350),
    ];
    for regime in Regime::ALL {
        t.push((format!("regime {regime}"), 50));
    }
    for (v, n) in [
        ("normal", 400),
        ("anomalous", 400),
        ("nominal", 176),
        ("unknown", 174),
    ] {
        t.push((format!("observation value {v}"), n));
    }
    for (e, n) in [
        ("update", 525),
        ("isolate", 400),
        ("initial", 350),
        ("delayed_evidence", 325),
        ("contradiction_onset", 250),
        ("preserve", 225),
        ("relation_association", 50),
        ("contradiction_resolution", 50),
        ("stale_evidence", 50),
    ] {
        t.push((format!("event {e}"), n));
    }
    for (a, n) in [
        ("verify", 200),
        ("inspect", 75),
        ("monitor", 75),
        ("request_observation", 0),
    ] {
        t.push((format!("final action {a}"), n));
    }
    for (d, n) in [
        ("reversed", 150),
        ("weakened", 75),
        ("preserved", 75),
        ("strengthened", 50),
    ] {
        t.push((format!("final direction {d}"), n));
    }
    for (s, n) in [("normal", 200), ("anomalous", 150), ("undetermined", 0)] {
        t.push((format!("final state {s}"), n));
    }
    t
}

fn snake<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// Counts every figure of the published table over `scenarios`.
pub fn count(scenarios: &[Scenario], fingerprints: &BTreeSet<String>) -> BTreeMap<String, u64> {
    let mut c: BTreeMap<String, u64> = BTreeMap::new();
    let mut add = |k: String, n: u64| *c.entry(k).or_default() += n;
    let ids: BTreeSet<&str> = scenarios.iter().map(|s| s.id.as_str()).collect();
    let pairs: BTreeSet<&str> = scenarios
        .iter()
        .filter_map(|s| s.metadata.counterfactual_pair_id.as_deref())
        .collect();
    add("scenarios".into(), scenarios.len() as u64);
    add("unique scenario ids".into(), ids.len() as u64);
    add(
        "unique semantic fingerprints".into(),
        fingerprints.len() as u64,
    );
    add("counterfactual pairs".into(), pairs.len() as u64);
    for s in scenarios {
        let steps = s.evaluation.belief_trajectory.len() as u64;
        add(format!("scenarios with {steps} steps"), 1);
        add("reference steps incl. priors".into(), steps);
        add("scored prefixes".into(), steps.saturating_sub(1));
        add("observations".into(), s.observations.len() as u64);
        add("agents".into(), s.agents.len() as u64);
        add("objects".into(), s.objects.len() as u64);
        add("relations".into(), s.relations.len() as u64);
        add(format!("regime {}", s.metadata.trajectory_regime), 1);
        for r in &s.relations {
            add(format!("relations {}", snake(&r.predicate)), 1);
        }
        for o in &s.observations {
            add(format!("observation value {}", snake(&o.value)), 1);
            if o.predicate == ObservationPredicate::Indicator {
                add("distractor observations".into(), 1);
            }
        }
        for step in &s.evaluation.belief_trajectory {
            for e in &step.event_types {
                add(format!("event {}", snake(e)), 1);
            }
        }
        if let Some(last) = s.evaluation.belief_trajectory.last() {
            let action = last.action.reference_action.action_type;
            add(format!("final action {}", action.name()), 1);
            if let Some(b) = last.reference_beliefs.first() {
                add(
                    format!("final direction {}", snake(&b.probability_direction)),
                    1,
                );
                add(format!("final state {}", snake(&b.reference_state)), 1);
            }
        }
    }
    c
}

/// The published table next to what `scenarios` gives.
pub fn compare(scenarios: &[Scenario], fingerprints: &BTreeSet<String>) -> Vec<Figure> {
    let found = count(scenarios, fingerprints);
    published()
        .into_iter()
        .map(|(name, expected)| Figure {
            found: found.get(&name).copied().unwrap_or(0),
            name,
            expected,
        })
        .collect()
}

/// A markdown table of figures: expected, found, and a mark for each mismatch.
pub fn table(figures: &[Figure]) -> String {
    let mut out = String::from("| figure | published | found | |\n|---|---:|---:|---|\n");
    for f in figures {
        let mark = if f.ok() { "ok" } else { "MISMATCH" };
        let _ = writeln!(
            out,
            "| {} | {} | {} | {mark} |",
            f.name, f.expected, f.found
        );
    }
    out
}
