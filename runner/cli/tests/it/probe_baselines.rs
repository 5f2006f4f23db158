//! Baseline profiles: the oracle scores perfectly; no-propagation is right only on the
//! hop-1 replacement cells and stale everywhere else. Checked on the generated files
//! and on the published v0 file (the shared reference folder always holds it).

use probe::baseline::System;
use probe::generator::{generate_pit, generate_probe};
use probe::load::load_probe;
use probe::record::{Contradicted, PitItem, ProbeItem};
use probe::score::{score_pit, score_probe, score_probe_item, Outcome, RunReport, SystemReport};

fn v0() -> Vec<ProbeItem> {
    let p = crate::common::repo_root().join("../shared/reference/probe_v0.json");
    assert!(
        p.exists(),
        "{} is missing: the published v0 file must sit in the shared reference folder",
        p.display()
    );
    load_probe(&p).unwrap()
}

fn assert_oracle_perfect(items: &[ProbeItem]) {
    let responses: Vec<_> = items
        .iter()
        .map(|i| System::Oracle.answer_probe(i))
        .collect();
    let pairs: Vec<_> = items.iter().zip(&responses).collect();
    let r = score_probe("oracle", &pairs);
    assert_eq!(r.post_acc.unwrap().mean, 1.0);
    assert_eq!(r.pre_acc.unwrap().mean, 1.0);
    assert_eq!(r.post_em.unwrap().mean, 1.0);
    assert_eq!(r.stale_rate.unwrap().mean, 0.0);
    assert_eq!(r.abstention.recall, Some(1.0));
    assert_eq!(r.abstention.precision, Some(1.0));
    let inv = r.invalidation.unwrap();
    assert_eq!(
        (inv.micro_recall, inv.macro_recall, inv.over_invalidation),
        (1.0, 1.0, 0.0)
    );
    assert!(inv.by_chain_position.values().all(|v| *v == 1.0));
    assert_eq!(r.axis_acc, Some(1.0));
    for table in r.by.values() {
        for (cell, e) in table {
            assert_eq!((e.mean, e.lo, e.hi), (1.0, 1.0, 1.0), "{cell}");
        }
    }
}

fn is_withdrawal(i: &ProbeItem) -> bool {
    i.oracle_retractions.last().is_some_and(|r| !r.is_empty())
}

fn assert_no_propagation_profile(items: &[ProbeItem]) {
    for item in items {
        let s = score_probe_item(item, &System::NoPropagation.answer_probe(item));
        assert_eq!(
            s.pre,
            Outcome::Correct,
            "{}: the stated chain is remembered",
            item.probe_id
        );
        let replacement = item.hop_depth.get() == 1
            && item.contradicted == Contradicted::Asserted
            && !is_withdrawal(item);
        let want = if replacement {
            Outcome::Correct
        } else {
            Outcome::Stale
        };
        assert_eq!(s.post, want, "{}", item.probe_id);
    }
    let responses: Vec<_> = items
        .iter()
        .map(|i| System::NoPropagation.answer_probe(i))
        .collect();
    let pairs: Vec<_> = items.iter().zip(&responses).collect();
    let r = score_probe("no-propagation", &pairs);
    let cells = &r.by["hop_x_contradicted"];
    for (cell, e) in cells {
        if cell.starts_with('1') {
            assert!(e.mean > 0.5, "{cell}");
        } else {
            assert_eq!(e.mean, 0.0, "{cell}: derived and multi-hop cells fail");
        }
    }
    assert_eq!(r.by["asserted_hop1"]["replacement"].mean, 1.0);
    assert_eq!(r.by["asserted_hop1"]["withdrawal"].mean, 0.0);
    assert_eq!(r.abstention.recall, Some(0.0));
    assert_eq!(r.axis_acc, Some(0.5));
    let inv = r.invalidation.unwrap();
    for p in ["2", "3", "4"] {
        assert_eq!(
            inv.by_chain_position[p], 0.0,
            "position {p} is never propagated to"
        );
    }
}

#[test]
fn oracle_is_perfect_on_the_generated_file() {
    assert_oracle_perfect(&generate_probe());
}

#[test]
fn no_propagation_fails_derived_and_multi_hop_cells_on_the_generated_file() {
    assert_no_propagation_profile(&generate_probe());
}

#[test]
fn baselines_on_the_published_v0_file() {
    let items = v0();
    assert_oracle_perfect(&items);
    assert_no_propagation_profile(&items);
}

fn pit(system: System, items: &[PitItem]) -> probe::score::PitReport {
    let responses: Vec<_> = items.iter().map(|i| system.answer_pit(i)).collect();
    let pairs: Vec<_> = items.iter().zip(&responses).collect();
    score_pit(system.name(), &pairs)
}

#[test]
fn pit_baselines() {
    let items = generate_pit();
    let o = pit(System::Oracle, &items);
    assert_eq!(o.n_queries, 24);
    assert_eq!(o.item_all_correct, Some(1.0));
    assert!(o
        .by_label
        .values()
        .all(|e| e.mean == 1.0 && e.clusters == 8));
    assert_eq!(
        (o.retracted_leak, o.current_state_leak),
        (Some(0.0), Some(0.0))
    );
    // Answering the current value everywhere: every historical query is wrong.
    let n = pit(System::NoPropagation, &items);
    assert_eq!(n.current_state_leak, Some(1.0));
    assert!(n.by_label.values().all(|e| e.mean == 0.0));
    assert_eq!(n.item_all_correct, Some(0.0));
}

#[test]
fn several_samples_per_item_are_clustered_and_voted() {
    let items = generate_probe();
    let oracle: Vec<_> = items
        .iter()
        .map(|i| System::Oracle.answer_probe(i))
        .collect();
    let naive: Vec<_> = items
        .iter()
        .map(|i| System::NoPropagation.answer_probe(i))
        .collect();
    // Three samples per item: two oracle answers and one no-propagation answer.
    let mut pairs = Vec::new();
    for (i, item) in items.iter().enumerate() {
        pairs.push((item, &oracle[i]));
        pairs.push((item, &oracle[i]));
        pairs.push((item, &naive[i]));
    }
    let r = score_probe("mixed", &pairs);
    assert_eq!((r.items, r.samples), (168, 504));
    assert_eq!(r.post_acc_majority, Some(1.0));
    let acc = r.post_acc.unwrap();
    assert_eq!(acc.clusters, 168);
    let want = (2.0 * 168.0 + 20.0) / 504.0;
    assert!((acc.mean - want).abs() < 1e-12, "{}", acc.mean);
}

/// A system whose post answers get worse with depth: right on items whose position in
/// their hop group is below a hop-dependent share, stale otherwise.
fn falling_responses(items: &[ProbeItem]) -> Vec<probe::score::ProbeResponse> {
    let mut seen = std::collections::BTreeMap::new();
    items
        .iter()
        .map(|i| {
            let k = i.hop_depth.get();
            let n = seen.entry((k, i.contradicted)).or_insert(0usize);
            *n += 1;
            let mut r = System::Oracle.answer_probe(i);
            if *n % 5 >= usize::from(5 - k) {
                r.post = probe::score::Answer::text(i.gold_pre.as_str());
            }
            r
        })
        .collect()
}

#[test]
fn three_identical_seeds_give_the_statistics_of_one() {
    use probe::score::compare::cochran_armitage;
    let items = generate_probe();
    let responses = falling_responses(&items);
    let once: Vec<_> = items.iter().zip(&responses).collect();
    let thrice: Vec<_> = once.iter().flat_map(|p| [*p, *p, *p]).collect();
    let a = score_probe("one seed", &once);
    let b = score_probe("three seeds", &thrice);
    assert_eq!(b.samples, 3 * a.samples);
    let trend = a.depth_trend["asserted"].expect("a falling arm has a trend");
    assert!(trend.z < -2.0, "{trend:?}");
    assert_eq!(a.depth_trend, b.depth_trend);
    assert_eq!(
        a.post_acc,
        b.post_acc.map(|e| runner_core::stats::bootstrap::Estimate {
            values: e.values / 3,
            ..e
        })
    );
    for (name, table) in &a.by {
        for (cell, e) in table {
            let f = &b.by[name][cell];
            assert_eq!((e.mean, e.lo, e.hi), (f.mean, f.lo, f.hi), "{name} {cell}");
        }
    }
    for (name, table) in &a.propagation {
        for (cell, e) in table {
            let f = &b.propagation[name][cell];
            assert_eq!((e.mean, e.lo, e.hi), (f.mean, f.lo, f.hi), "{name} {cell}");
        }
    }
    // Counting seeds as trials would inflate z by sqrt(3): the test can tell.
    let mut groups = std::collections::BTreeMap::new();
    for (i, r) in &thrice {
        if i.contradicted == Contradicted::Asserted {
            let g = groups.entry(i.hop_depth.get()).or_insert((0usize, 0usize));
            g.0 += usize::from(score_probe_item(i, r).post.is_correct());
            g.1 += 1;
        }
    }
    let groups: Vec<(f64, usize, usize)> = groups
        .into_iter()
        .map(|(k, (x, n))| (f64::from(k), x, n))
        .collect();
    let naive = cochran_armitage(&groups).unwrap();
    assert!(
        (naive.z / trend.z - 3f64.sqrt()).abs() < 1e-9,
        "{naive:?} {trend:?}"
    );
}

#[test]
fn propagation_is_reported_by_hop_and_by_hop_x_contradicted() {
    let items = generate_probe();
    let responses = falling_responses(&items);
    let pairs: Vec<_> = items.iter().zip(&responses).collect();
    let r = score_probe("falling", &pairs);
    let by_hop = &r.propagation["hop_depth"];
    assert_eq!(by_hop.len(), 4);
    let cells = &r.propagation["hop_x_contradicted"];
    assert_eq!(cells.len(), 7);
    // Pre answers are all right, so propagation equals post accuracy in every cell,
    // and it falls with depth.
    for (cell, e) in cells {
        assert_eq!(e.mean, r.by["hop_x_contradicted"][cell].mean, "{cell}");
        assert!(e.lo <= e.mean && e.mean <= e.hi);
    }
    assert!(by_hop["1"].mean > by_hop["4"].mean);
}

// The report files take their answers from the oracle: a test of the score stage that
// needs an answering system lives here, outside the library's import table.
#[test]
fn files_hold_every_breakdown_cell_and_quote_awkward_names() {
    let items = generate_probe();
    let responses: Vec<_> = items
        .iter()
        .map(|i| System::Oracle.answer_probe(i))
        .collect();
    let pairs: Vec<_> = items.iter().zip(&responses).collect();
    let pit = generate_pit();
    let pit_responses: Vec<_> = pit.iter().map(|i| System::Oracle.answer_pit(i)).collect();
    let pit_pairs: Vec<_> = pit.iter().zip(&pit_responses).collect();
    let report = RunReport::new(
        "t",
        vec![SystemReport {
            system: "a,\"b\"".into(),
            probe: Some(score_probe("a", &pairs)),
            pit: Some(score_pit("a", &pit_pairs)),
            unanswered: 2,
        }],
        vec![],
    );
    let csv = report.csv();
    let cells: usize = report.systems[0]
        .probe
        .as_ref()
        .unwrap()
        .by
        .values()
        .map(|t| t.len())
        .sum();
    assert!(csv.lines().count() > cells + 3);
    assert!(csv
        .lines()
        .all(|l| l.starts_with("system,") || l.starts_with("\"a,\"\"b\"\"\",")));
    assert!(
        csv.contains(",probe,hop_depth,4,48,1,1,1,Hop depth: 4\n"),
        "{csv}"
    );
    let summary = report.summary();
    assert!(summary.starts_with("# t\n"));
    assert!(summary.contains("2 questions of started items"));
    assert!(summary.contains("## Point in time"));
}
