//! The Probe report's tables as plain data, which `report.html` and `tables.tex` both
//! render: the headline (one row per system), accuracy by hop and arm, one table per
//! domain and design axis (one column per system), and the point-in-time queries. Each
//! cell is an estimate with its interval and n, and the samples behind it.

use crate::report::facets as f;
use crate::report::words::{cell, AXES, HEADLINE, PIT_MEASURES};
use crate::score::{PitReport, ProbeReport};
use runner_core::report::samples_href;
use runner_core::stats::bootstrap::Estimate;
use std::collections::BTreeMap;

/// One figure of a table: its estimate, and the sample-browser link behind it.
#[derive(Clone, Debug, PartialEq)]
pub struct Cell {
    /// `system|path`: the system's label and where the figure is in its entry of
    /// `scores.json` (`oracle|probe/by/hop_depth/2`).
    pub key: String,
    pub estimate: Option<Estimate>,
    pub href: Option<String>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    pub label: String,
    pub cells: Vec<Cell>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Table {
    /// HTML id and LaTeX label.
    pub id: String,
    pub caption: String,
    /// What the rows are (first column's heading).
    pub corner: String,
    pub columns: Vec<String>,
    pub rows: Vec<Row>,
}

/// Core reports by system label.
pub type Core<'a> = [(&'a str, &'a ProbeReport)];
/// Point-in-time reports by system label.
pub type Pit<'a> = [(&'a str, &'a PitReport)];

fn link(system: &str, question: &str, filters: &[(&str, &str)]) -> String {
    let mut all = vec![("model", system), (f::QUESTION, question)];
    all.extend_from_slice(filters);
    samples_href(&all)
}

/// The headline: one row per system, one column per measure of [`HEADLINE`].
pub fn headline(systems: &Core) -> Table {
    let question = |i: usize| match i {
        0 => f::PRE,
        6 | 7 => f::FOLLOWUP,
        _ => f::POST,
    };
    Table {
        id: "headline-table".into(),
        caption: "Headline: each system on every item (95% CI; n items)".into(),
        corner: "system".into(),
        columns: HEADLINE.iter().map(|m| m.name.to_string()).collect(),
        rows: systems
            .iter()
            .map(|(label, p)| Row {
                label: label.to_string(),
                cells: HEADLINE
                    .iter()
                    .enumerate()
                    .map(|(i, m)| Cell {
                        key: format!("{label}|{}", m.path),
                        estimate: (m.get)(p),
                        href: Some(link(label, question(i), &[])),
                    })
                    .collect(),
            })
            .collect(),
    }
}

/// Accuracy after the change by hop: all items, then asserted and derived, per system.
pub fn hops(systems: &Core) -> Table {
    let mut columns = Vec::new();
    for (label, _) in systems {
        for arm in ["all", "asserted", "derived"] {
            columns.push(if systems.len() > 1 {
                format!("{label}: {arm}")
            } else {
                arm.to_string()
            });
        }
    }
    let rows = ["1", "2", "3", "4"]
        .iter()
        .map(|hop| Row {
            label: format!("hop {hop}"),
            cells: systems
                .iter()
                .flat_map(|(label, p)| {
                    let by =
                        |name: &str, key: String| p.by.get(name).and_then(|t| t.get(&key)).copied();
                    [
                        Cell {
                            key: format!("{label}|probe/by/hop_depth/{hop}"),
                            estimate: by("hop_depth", hop.to_string()),
                            href: Some(link(label, f::POST, &[(f::HOP, hop)])),
                        },
                        Cell {
                            key: format!("{label}|probe/by/hop_x_contradicted/{hop} asserted"),
                            estimate: by("hop_x_contradicted", format!("{hop} asserted")),
                            href: Some(link(
                                label,
                                f::POST,
                                &[(f::HOP, hop), (f::CONTRADICTED, "asserted")],
                            )),
                        },
                        Cell {
                            key: format!("{label}|probe/by/hop_x_contradicted/{hop} derived"),
                            estimate: by("hop_x_contradicted", format!("{hop} derived")),
                            href: Some(link(
                                label,
                                f::POST,
                                &[(f::HOP, hop), (f::CONTRADICTED, "derived")],
                            )),
                        },
                    ]
                })
                .collect(),
        })
        .collect();
    Table {
        id: "by-hop".into(),
        caption:
            "Accuracy after the change by hop depth, asserted and derived facts (95% CI; n items)"
                .into(),
        corner: "hop depth".into(),
        columns,
        rows,
    }
}

/// Accuracy after the change in each cell of breakdown `name`, one column per system.
pub fn breakdown(systems: &Core, name: &str, heading: &str) -> Table {
    let mut cells: Vec<String> = systems
        .iter()
        .flat_map(|(_, p)| p.by.get(name).into_iter().flat_map(|t| t.keys().cloned()))
        .collect();
    cells.sort();
    cells.dedup();
    let facet = match name {
        "domain" => Some(f::DOMAIN),
        "axis" => Some(f::AXIS),
        "contradicted" => Some(f::CONTRADICTED),
        "density" => Some(f::DENSITY),
        "confidence" => Some(f::CONFIDENCE),
        _ => None,
    };
    Table {
        id: format!("by-{}", name.replace('_', "-")),
        caption: format!("{heading}: accuracy after the change (95% CI; n items)"),
        corner: heading.to_string(),
        columns: systems.iter().map(|(l, _)| l.to_string()).collect(),
        rows: cells
            .iter()
            .map(|c| Row {
                label: cell(c),
                cells: systems
                    .iter()
                    .map(|(label, p)| Cell {
                        key: format!("{label}|probe/by/{name}/{c}"),
                        estimate: p.by.get(name).and_then(|t| t.get(c)).copied(),
                        href: facet.map(|k| link(label, f::POST, &[(k, c)])),
                    })
                    .collect(),
            })
            .collect(),
    }
}

/// The per-domain table, then one per design axis.
pub fn breakdowns(systems: &Core) -> Vec<Table> {
    let mut out = vec![breakdown(systems, "domain", "Domain")];
    out.extend(
        AXES.iter()
            .map(|(name, heading, _)| breakdown(systems, name, heading)),
    );
    out
}

/// Declining and marking, with their intervals, one row per system.
pub fn abstention_invalidation(systems: &Core) -> Table {
    type Get = fn(&ProbeReport) -> Option<Estimate>;
    let measures: [(&str, &str, &str, Get); 5] = [
        (
            "Declines when it should",
            f::POST,
            "abstention_recall",
            |p| p.intervals.abstention_recall,
        ),
        (
            "Right to decline, when it declines",
            f::POST,
            "abstention_precision",
            |p| p.intervals.abstention_precision,
        ),
        ("Declines wrongly", f::POST, "over_abstention", |p| {
            p.intervals.over_abstention
        }),
        (
            "Marks what the change made untrue",
            f::FOLLOWUP,
            "invalidation_recall",
            |p| p.intervals.invalidation_recall,
        ),
        (
            "Marks a statement that stays true",
            f::FOLLOWUP,
            "over_invalidation",
            |p| p.intervals.over_invalidation,
        ),
    ];
    Table {
        id: "declining-marking".into(),
        caption: "Declining to answer and marking statements untrue (95% CI; n items)".into(),
        corner: "system".into(),
        columns: measures.iter().map(|m| m.0.to_string()).collect(),
        rows: systems
            .iter()
            .map(|(label, p)| Row {
                label: label.to_string(),
                cells: measures
                    .iter()
                    .map(|(_, q, path, get)| Cell {
                        key: format!("{label}|probe/intervals/{path}"),
                        estimate: get(p),
                        href: Some(link(label, q, &[])),
                    })
                    .collect(),
            })
            .collect(),
    }
}

/// Point-in-time accuracy by query and by history x query, one column per system.
pub fn pit(systems: &Pit) -> Table {
    let mut keys: Vec<(bool, String)> = Vec::new();
    for (_, p) in systems {
        keys.extend(p.by_label.keys().map(|k| (false, k.clone())));
        keys.extend(p.by_scenario_label.keys().map(|k| (true, k.clone())));
    }
    // Queries in time order within each history.
    let rank = |(both, k): &(bool, String)| {
        let (history, label) = match k.split_once(' ') {
            Some((h, l)) if *both => (h.to_string(), l.to_string()),
            _ => (String::new(), k.clone()),
        };
        let at = ["before_any_fact", "after_first_fact", "after_second_fact"]
            .iter()
            .position(|l| *l == label)
            .unwrap_or(3);
        (*both, history, at, label)
    };
    keys.sort_by_key(rank);
    keys.dedup();
    let rows = keys
        .iter()
        .map(|(both, k)| {
            let (history, label) = if *both {
                k.split_once(' ').map_or(("", k.as_str()), |(h, l)| (h, l))
            } else {
                ("", k.as_str())
            };
            Row {
                label: if history.is_empty() {
                    cell(label)
                } else {
                    format!("{}, {}", cell(history), cell(label))
                },
                cells: systems
                    .iter()
                    .map(|(system, p)| {
                        let table: &BTreeMap<String, Estimate> = if *both {
                            &p.by_scenario_label
                        } else {
                            &p.by_label
                        };
                        let mut filters = vec![("task", label)];
                        if !history.is_empty() {
                            filters.push((f::HISTORY, history));
                        }
                        Cell {
                            key: format!(
                                "{system}|pit/{}/{k}",
                                if *both {
                                    "by_scenario_label"
                                } else {
                                    "by_label"
                                }
                            ),
                            estimate: table.get(k).copied(),
                            href: Some(link(system, f::POINT_IN_TIME, &filters)),
                        }
                    })
                    .collect(),
            }
        })
        .collect();
    Table {
        id: "point-in-time".into(),
        caption: "Point in time (exploratory): accuracy as of a reference date (95% CI; n items)"
            .into(),
        corner: "asked as of".into(),
        columns: systems.iter().map(|(l, _)| l.to_string()).collect(),
        rows,
    }
}

/// A table whose figures are already text (the point-in-time leaks, the comparisons),
/// for `report.html` and `summary.md` alike: each row a label (names a user chose,
/// escaped where rendered) and its figures.
#[derive(Clone, Debug, PartialEq)]
pub struct TextTable {
    /// HTML id.
    pub id: &'static str,
    /// What the rows are (first column's heading).
    pub corner: &'static str,
    pub columns: Vec<String>,
    pub rows: Vec<(String, Vec<String>)>,
}

/// A figure to three places, or a dash where there is none.
fn figure(v: Option<f64>) -> String {
    v.map_or_else(|| "\u{2013}".to_string(), |v| format!("{v:.3}"))
}

/// How often each system's point-in-time answers leak a value they should not give.
pub fn pit_leaks(systems: &Pit) -> TextTable {
    TextTable {
        id: "pit-leaks",
        corner: "system",
        columns: PIT_MEASURES.iter().map(|(_, n)| n.to_string()).collect(),
        rows: systems
            .iter()
            .map(|(label, p)| {
                let cells = [p.retracted_leak, p.current_state_leak, p.item_all_correct];
                (label.to_string(), cells.into_iter().map(figure).collect())
            })
            .collect(),
    }
}

/// The headings of [`comparisons`]' columns, after the systems.
const COMPARISON_COLUMNS: [&str; 5] = [
    "items",
    "accuracy after the change, difference [95% CI]",
    "only the first right",
    "only the second right",
    "McNemar exact p",
];

/// What the comparison table says under it.
pub const COMPARISON_NOTE: &str = "Paired on the items both systems answered: bootstrap over items for the difference, exact McNemar on each item's majority answer. Per hop and arm: scores.json.";

/// The run's paired comparisons, one row per pair of systems: the items both answered,
/// the difference in post-change accuracy with its interval, the items only one got
/// right, and the exact McNemar p. None when the run compares nothing.
pub fn comparisons(report: &crate::score::RunReport) -> Option<TextTable> {
    if report.comparisons.is_empty() {
        return None;
    }
    let rows = report
        .comparisons
        .iter()
        .map(|c| {
            let difference = c.post_acc_difference.map_or_else(
                || "\u{2013}".to_string(),
                |d| format!("{:.3} [{:.3}, {:.3}]", d.mean, d.lo, d.hi),
            );
            let (a_only, b_only, p) = c
                .mcnemar
                .get("all")
                .map_or((0, 0, 1.0), |m| (m.a_only, m.b_only, m.p_value));
            let cells = vec![
                c.items.to_string(),
                difference,
                a_only.to_string(),
                b_only.to_string(),
                crate::score::compare::fmt_p(p),
            ];
            (format!("{} vs {}", c.a, c.b), cells)
        })
        .collect();
    Some(TextTable {
        id: "comparisons",
        corner: "systems",
        columns: COMPARISON_COLUMNS.iter().map(|c| c.to_string()).collect(),
        rows,
    })
}
