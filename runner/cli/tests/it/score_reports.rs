//! Aggregation and reports: intervals, contrasts, twins, and the files a run leaves.

use creg::baseline::System;
use creg::score::aggregate::{aggregate, Aggregate, Scored};

use creg::frozen;
use creg::record::{Regime, Scenario};
use creg::report;
use std::sync::OnceLock;

fn suite() -> &'static Vec<Scenario> {
    static SUITE: OnceLock<Vec<Scenario>> = OnceLock::new();
    SUITE.get_or_init(|| frozen::frozen_suite().unwrap())
}

fn samples(system: System, conditions: &[&str]) -> Vec<Scored> {
    let conditions: Vec<String> = conditions.iter().map(|c| c.to_string()).collect();
    creg::baseline_run::run_suite(system, suite(), &conditions, &[42, 43]).unwrap()
}

fn both() -> &'static (Vec<Scored>, Aggregate) {
    static BOTH: OnceLock<(Vec<Scored>, Aggregate)> = OnceLock::new();
    BOTH.get_or_init(|| {
        let mut all = samples(System::Oracle, &["full_graph", "graph_without_relations"]);
        all.extend(samples(System::Uniform, &["full_graph"]));
        let agg = aggregate(&all, suite());
        (all, agg)
    })
}

#[test]
fn pooled_means_equal_plain_means_and_intervals_bracket_them() {
    let (all, agg) = both();
    let oracle = agg
        .pooled("oracle", "full_graph", "belief", "top_state_accuracy")
        .unwrap();
    assert_eq!((oracle.mean, oracle.lo, oracle.hi), (1.0, 1.0, 1.0));
    assert_eq!(oracle.clusters, 350);
    assert_eq!(oracle.values, 1150 * 2, "two seeds nested in each scenario");

    // The uniform system's absolute error is |0.5 - reference| averaged over samples.
    let expected: f64 = all
        .iter()
        .filter(|s| s.model == "uniform")
        .filter_map(|s| match &s.score {
            creg::score::sample::SampleScore::Belief(b) => Some(b.abs_error),
            _ => None,
        })
        .sum::<f64>()
        / (1150.0 * 2.0);
    let uniform = agg
        .pooled("uniform", "full_graph", "belief", "abs_error")
        .unwrap();
    assert!((uniform.mean - expected).abs() < 1e-12);
    assert!(uniform.lo < uniform.mean && uniform.mean < uniform.hi);
    assert!(
        uniform.hi - uniform.lo < 0.1,
        "350 clusters give a tight interval"
    );
    let per_regime = agg
        .find(
            "uniform",
            "full_graph",
            "belief",
            "abs_error",
            Some(Regime::SourceReliability),
        )
        .unwrap();
    assert_eq!(per_regime.clusters, 50);
}

#[test]
fn intervals_do_not_depend_on_sample_order() {
    let (all, agg) = both();
    let mut reversed = all.clone();
    reversed.reverse();
    let again = aggregate(&reversed, suite());
    assert_eq!(agg.estimates.len(), again.estimates.len());
    // Sums taken in another order may differ in the last bit, nothing more.
    for (a, b) in agg.estimates.iter().zip(&again.estimates) {
        assert_eq!(a.cell, b.cell);
        let (x, y) = (&a.estimate, &b.estimate);
        assert_eq!(
            (x.clusters, x.values),
            (y.clusters, y.values),
            "{:?}",
            a.cell
        );
        for (u, v) in [(x.mean, y.mean), (x.lo, y.lo), (x.hi, y.hi)] {
            assert!((u - v).abs() < 1e-12, "{:?}: {u} vs {v}", a.cell);
        }
    }
}

#[test]
fn contrasts_of_identical_answers_are_exactly_zero() {
    let (_, agg) = both();
    let c = agg
        .contrasts
        .iter()
        .find(|c| {
            c.model == "oracle"
                && c.metric == "abs_error"
                && c.condition == "full_graph"
                && c.baseline_condition == "graph_without_relations"
        })
        .expect("the relation-content contrast is computed");
    assert_eq!(
        (c.difference.mean, c.difference.lo, c.difference.hi),
        (0.0, 0.0, 0.0)
    );
}

#[test]
fn the_oracle_follows_relations_in_every_twin_pair_and_uniform_in_none() {
    let (_, agg) = both();
    let oracle = agg
        .twins
        .iter()
        .find(|t| t.model == "oracle" && t.condition == "full_graph")
        .unwrap();
    assert_eq!(oracle.both_correct.mean, 1.0);
    assert_eq!(oracle.both_correct.clusters, 25);
    assert!((oracle.stated_gap.mean - oracle.reference_gap).abs() < 1e-12);
    let uniform = agg.twins.iter().find(|t| t.model == "uniform").unwrap();
    assert_eq!(uniform.both_correct.mean, 0.0);
    assert_eq!(uniform.stated_gap.mean, 0.0);
}

#[test]
fn reports_land_as_files_a_researcher_can_use() {
    let (_, agg) = both();
    let dir = std::env::temp_dir().join(format!("creg-report-test-{}", std::process::id()));
    let provenance = report::Provenance::new(Some("abc123".into()), None);
    let inputs = report::ReportInputs {
        title: "test run",
        provenance: &provenance,
        browser: None,
    };
    let written = report::write_reports(&dir, agg, &inputs).unwrap();
    let names: Vec<String> = written
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        [
            "scores.json",
            "summary.md",
            "tables.tex",
            "scores.csv",
            "reliability.svg",
            "regimes.svg",
            "contrasts.svg",
            "report.html"
        ]
    );
    let summary = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    // The oracle answers every sample: each figure rests on all of them.
    let row = summary
        .lines()
        .find(|l| l.starts_with("| oracle / full_graph | 1.000 [1.000, 1.000] ("))
        .unwrap_or_else(|| panic!("{summary}"));
    let cell = row.split(" | ").nth(1).unwrap();
    let counts: Vec<&str> = cell
        .trim_end_matches(" answered)")
        .rsplit(" (")
        .next()
        .unwrap()
        .split(" of ")
        .collect();
    assert!(counts.len() == 2 && counts[0] == counts[1], "{row}");
    // Every table row has as many cells as its header.
    for table in summary.split("\n\n").filter(|t| t.starts_with('|')) {
        let widths: Vec<usize> = table.lines().map(|l| l.matches('|').count()).collect();
        assert!(
            widths.iter().all(|w| *w == widths[0]),
            "ragged table:\n{table}"
        );
    }
    let csv = std::fs::read_to_string(dir.join("scores.csv")).unwrap();
    assert_eq!(csv.lines().count(), agg.estimates.len() + 1);
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("scores.json")).unwrap()).unwrap();
    assert_eq!(json["samples"], agg.samples);
    for svg in ["reliability.svg", "regimes.svg", "contrasts.svg"] {
        let text = std::fs::read_to_string(dir.join(svg)).unwrap();
        assert!(
            text.starts_with("<svg") && text.trim_end().ends_with("</svg>"),
            "{svg}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
