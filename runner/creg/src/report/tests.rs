//! The report page as a reader meets it: links that lead somewhere, a reliability diagram
//! that shows its series or says why it cannot, log loss explained, failed samples shown.

use crate::record::Regime;
use crate::report::{
    failed, html, plots, summary, write_reports, Browser, Provenance, ReportInputs, HEADLINE,
    LOG_LOSS_NOTE, REVISION,
};
use crate::score::aggregate::{Aggregate, Cell, CellEstimate, ReliabilityBin};
use runner_core::journal::failed::Failure;
use runner_core::stats::bootstrap::Estimate;
use std::collections::BTreeSet;

fn estimate(mean: f64) -> Estimate {
    Estimate {
        clusters: 3,
        values: 6,
        mean,
        lo: (mean - 0.1).max(0.0),
        hi: (mean + 0.1).min(1.0),
    }
}

/// Every headline and revision figure of each series (pooled and for one regime), each
/// series' belief answers failing the contract at `failure_rate`; with `bins`, the same
/// reliability points for every series (the oracle under several conditions).
fn aggregate(series: &[(&str, &str)], failure_rate: f64, bins: bool) -> Aggregate {
    let mut a = Aggregate {
        samples: 6 * series.len(),
        ..Aggregate::default()
    };
    let revision = REVISION.iter().map(|(m, _)| ("belief", *m));
    // The headline pools contract failures over every task; the belief task has its own.
    let metrics: Vec<(&'static str, &'static str)> = HEADLINE
        .iter()
        .map(|(t, m, _)| (*t, *m))
        .chain(revision)
        .chain([("belief", "contract_failure")])
        .collect();
    for (m, c) in series {
        for &(task, metric) in &metrics {
            for regime in [None, Some(Regime::ALL[0])] {
                let mean = if metric == "contract_failure" {
                    failure_rate
                } else {
                    0.5
                };
                a.estimates.push(CellEstimate {
                    cell: Cell {
                        model: m.to_string(),
                        condition: c.to_string(),
                        task,
                        metric,
                        regime,
                        seed: None,
                    },
                    estimate: estimate(mean),
                });
            }
        }
        if bins {
            for (lo, stated, reference) in [(0.1, 0.15, 0.15), (0.5, 0.55, 0.55)] {
                a.reliability.push(ReliabilityBin {
                    model: m.to_string(),
                    condition: c.to_string(),
                    lo,
                    hi: lo + 0.1,
                    count: 3,
                    mean_stated: stated,
                    mean_reference: reference,
                });
            }
        }
    }
    a
}

/// The in-page links of `page` that lead nowhere: `#id` needs an element of that id,
/// `#samples?filters` the sample browser, `#sample=N` the sample browser too.
fn dangling_links(page: &str) -> Vec<String> {
    let values = |attr: &str| -> Vec<String> {
        page.split(attr)
            .skip(1)
            .filter_map(|rest| rest.split('"').next())
            .map(str::to_string)
            .collect()
    };
    let ids: BTreeSet<String> = values(" id=\"").into_iter().collect();
    values(" href=\"#")
        .into_iter()
        .filter(|frag| {
            let target = if frag.starts_with("sample=") {
                "samples"
            } else {
                frag.split('?').next().unwrap_or("")
            };
            !ids.contains(target)
        })
        .collect()
}

fn page(a: &Aggregate, provenance: &Provenance, browser: Option<&Browser>) -> String {
    let inputs = ReportInputs {
        title: "t",
        provenance,
        browser,
    };
    html::creg_page(a, &inputs).unwrap()
}

#[test]
fn every_in_page_link_resolves_with_and_without_a_sample_browser() {
    let a = aggregate(
        &[("oracle", "full_graph"), ("oracle", "canonical_json")],
        0.0,
        true,
    );
    let p = Provenance::new(None, None);
    // A baseline's report has no sample browser: no figure may link into one.
    let baseline = page(&a, &p, None);
    assert!(baseline.contains("data-cell="), "the figures are there");
    assert_eq!(dangling_links(&baseline), Vec::<String>::new());
    assert!(!baseline.contains("href=\"#samples"));
    // A run's report has one, and its figures link into it.
    let run = page(&a, &p, Some(&Browser::default()));
    assert!(run.contains("href=\"#samples?model=oracle"));
    assert_eq!(dangling_links(&run), Vec::<String>::new());
    // The check itself sees a link to a missing section.
    assert_eq!(
        dangling_links("<p id=\"a\"><a href=\"#a\">x</a><a href=\"#samples?m=1\">y</a>"),
        ["samples?m=1"]
    );
}

#[test]
fn an_empty_reliability_diagram_says_why() {
    let a = aggregate(&[("fixture", "full_graph")], 1.0, false);
    let svg = plots::reliability(&a);
    assert!(!svg.contains("<polyline"), "no series to draw");
    assert!(
        svg.contains("No points: no belief answer kept the output"),
        "{svg}"
    );
    let gaps = plots::reliability_gaps(&a).join(" ");
    assert!(
        gaps.contains("fixture / full_graph: 6 of its 6 belief answers failed the output contract"),
        "{gaps}"
    );
    let page = page(&a, &Provenance::new(None, None), None);
    assert!(page.contains("id=\"reliability-empty\""));
    let md = summary(&a, "t", &Provenance::new(None, None));
    assert!(md.contains("The reliability diagram is empty"), "{md}");
    // A report without belief samples says that instead.
    let none = Aggregate::default();
    assert!(plots::reliability(&none).contains("no belief answer."));
    assert!(plots::reliability_gaps(&none)[0].contains("holds no belief sample"));
    // Every series with points: nothing to explain.
    let full = aggregate(&[("oracle", "full_graph")], 0.0, true);
    assert!(plots::reliability_gaps(&full).is_empty());
}

#[test]
fn coinciding_reliability_lines_are_told_apart_and_named() {
    let a = aggregate(
        &[
            ("oracle", "canonical_json"),
            ("oracle", "full_graph"),
            ("oracle", "graph_without_relations"),
        ],
        0.0,
        true,
    );
    let svg = plots::reliability(&a);
    let lines: Vec<&str> = svg
        .split("<polyline ")
        .skip(1)
        .map(|l| l.split("/>").next().unwrap())
        .collect();
    assert_eq!(lines.len(), 3);
    let points: BTreeSet<&str> = lines
        .iter()
        .map(|l| {
            l.split("points=\"")
                .nth(1)
                .unwrap()
                .split('"')
                .next()
                .unwrap()
        })
        .collect();
    assert_eq!(points.len(), 1, "the same points, drawn three times");
    let styles: BTreeSet<(String, String)> = lines
        .iter()
        .map(|l| {
            let attr = |name: &str| {
                l.split(&format!("{name}=\""))
                    .nth(1)
                    .map_or("", |r| r.split('"').next().unwrap())
                    .to_string()
            };
            (attr("stroke"), attr("stroke-dasharray"))
        })
        .collect();
    // A colour alone would not do: the last line drawn hides the others.
    let dashes: BTreeSet<&String> = styles.iter().map(|(_, d)| d).collect();
    assert_eq!(
        (styles.len(), dashes.len()),
        (3, 3),
        "each its own colour and dash: {styles:?}"
    );
    assert_eq!(
        svg.matches("lines overlap: same points as oracle / canonical_json")
            .count(),
        2,
        "{svg}"
    );
    let far = vec![
        vec![(0.0, 0.0), (50.0, 50.0)],
        vec![(0.0, 0.0), (50.0, 60.0)],
    ];
    assert_eq!(plots::coinciding(&far), [None, None]);
    let near = vec![far[0].clone(), vec![(0.4, 0.0), (50.0, 50.6)]];
    assert_eq!(plots::coinciding(&near), [None, Some(0)]);
}

#[test]
fn log_loss_is_explained_where_it_is_shown() {
    let a = aggregate(&[("oracle", "full_graph")], 0.0, true);
    let p = Provenance::new(None, None);
    let md = summary(&a, "t", &p);
    let table = md.find("| log loss |").unwrap();
    assert!(md[table..].contains(LOG_LOSS_NOTE));
    assert!(LOG_LOSS_NOTE.contains("reference's own entropy, not 0"));
    assert!(page(&a, &p, None).contains("id=\"log-loss-note\""));
}

#[test]
fn failed_samples_are_in_both_reports_only_when_there_are_any() {
    let dir = std::env::temp_dir().join(format!("creg-report-failed-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let a = aggregate(&[("served", "full_graph")], 0.0, true);
    let mut p = Provenance::new(None, None);
    let write = |p: &Provenance| {
        let inputs = ReportInputs {
            title: "t",
            provenance: p,
            browser: None,
        };
        write_reports(&dir, &a, &inputs).unwrap();
        (
            std::fs::read_to_string(dir.join("summary.md")).unwrap(),
            std::fs::read_to_string(dir.join("report.html")).unwrap(),
        )
    };
    let (md, page) = write(&p);
    assert!(!md.contains("Failed samples") && !page.contains("Failed samples"));
    for (id, reason) in [("r1", "body over 10 MB"), ("r2", "body over 10 MB")] {
        p.failed.push(Failure {
            request_id: id.into(),
            seed: 42,
            reason: reason.into(),
            identity_sha256: "x".into(),
        });
    }
    let (md, page) = write(&p);
    assert!(md.contains("## Failed samples"), "{md}");
    assert!(md.contains("| body over 10 MB | 2 | request r1 seed 42, request r2 seed 42 |"));
    assert!(page.contains("<section id=\"failed\">"));
    assert!(page.contains("<a href=\"#failed\">Failed samples</a>"));
    assert!(page.contains(&failed::html(&p).unwrap()));
    assert_eq!(dangling_links(&page), Vec::<String>::new());
    let _ = std::fs::remove_dir_all(&dir);
}
