//! The Probe report's figures, inline SVG in the frames of the report kit: a point per
//! category with its 95% interval as a whisker with caps, points of one series joined,
//! one colour per system and one line style per arm (solid and dashed), and a legend.
//! Each point carries its figure as data attributes (`data-x`, `data-mean`, ...) and a
//! tooltip, so a reader can hover and a check can read it.

use crate::score::ProbeReport;
use runner_core::report::escape;
use runner_core::report::plot::{color, nice_ticks, open, Frame};
use runner_core::stats::bootstrap::Estimate;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// One line of a figure: its points by category index.
pub struct Series {
    pub label: String,
    pub color: &'static str,
    pub dashed: bool,
    pub points: Vec<(usize, Estimate)>,
}

/// A figure of proportions (0 to 1) over ordered categories.
pub fn plot(
    title: &str,
    xlabel: &str,
    ylabel: &str,
    categories: &[String],
    series: &[Series],
) -> String {
    let n = categories.len().max(1);
    let f = Frame {
        left: 64.0,
        top: 34.0,
        width: (80.0 * n as f64).max(300.0),
        height: 240.0,
        x: (-0.5, n as f64 - 0.5),
        y: (0.0, 1.0),
    };
    let longest = series
        .iter()
        .map(|x| x.label.chars().count())
        .max()
        .unwrap_or(0);
    let legend_w = 40.0 + 6.2 * longest as f64;
    let rows = series.len().max(1) as f64;
    let h = (f.bottom() + 50.0).max(f.top + 16.0 * rows + 20.0);
    let mut s = open(f.left + f.width + legend_w + 20.0, h, title);
    let _ = writeln!(s, "<desc>{}</desc>", escape(title));
    let ticks = nice_ticks(0.0, 1.0, 5);
    f.axes(&mut s, None, Some(&ticks), xlabel, ylabel);
    for (i, c) in categories.iter().enumerate() {
        let x = f.px(i as f64);
        let _ = writeln!(
            s,
            "<line x1=\"{x:.1}\" y1=\"{b:.1}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"#333\"/><text x=\"{x:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>",
            f.bottom() + 5.0,
            f.bottom() + 17.0,
            escape(c),
            b = f.bottom()
        );
    }
    if series.iter().all(|x| x.points.is_empty()) {
        let _ = writeln!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" fill=\"#777\">no questions of this kind were asked</text>",
            f.left + f.width / 2.0,
            f.top + f.height / 2.0
        );
    }
    // Series side by side within a category, so their whiskers do not hide each other.
    let spread = (40.0 / rows).min(8.0);
    for (k, ser) in series.iter().enumerate() {
        let dx = (k as f64 - (rows - 1.0) / 2.0) * spread;
        let dash = if ser.dashed {
            " stroke-dasharray=\"5 3\""
        } else {
            ""
        };
        let _ = writeln!(
            s,
            "<g class=\"series\" data-series=\"{}\">",
            escape(&ser.label)
        );
        let pts: Vec<String> = ser
            .points
            .iter()
            .map(|(x, e)| {
                format!(
                    "{:.1},{:.1}",
                    f.px(*x as f64) + dx,
                    f.py(e.mean.clamp(0.0, 1.0))
                )
            })
            .collect();
        if pts.len() > 1 {
            let _ = writeln!(
                s,
                "<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\"{dash}/>",
                pts.join(" "),
                ser.color
            );
        }
        for (x, e) in &ser.points {
            let cx = f.px(*x as f64) + dx;
            let (lo, hi) = (f.py(e.lo.clamp(0.0, 1.0)), f.py(e.hi.clamp(0.0, 1.0)));
            let _ = writeln!(
                s,
                "<line x1=\"{cx:.1}\" y1=\"{lo:.1}\" x2=\"{cx:.1}\" y2=\"{hi:.1}\" stroke=\"{c}\"/><line x1=\"{:.1}\" y1=\"{lo:.1}\" x2=\"{:.1}\" y2=\"{lo:.1}\" stroke=\"{c}\"/><line x1=\"{:.1}\" y1=\"{hi:.1}\" x2=\"{:.1}\" y2=\"{hi:.1}\" stroke=\"{c}\"/>\n\
                 <circle class=\"point\" cx=\"{cx:.1}\" cy=\"{:.1}\" r=\"3.5\" fill=\"{c}\" data-x=\"{}\" data-mean=\"{:.3}\" data-lo=\"{:.3}\" data-hi=\"{:.3}\" data-n=\"{}\"><title>{}, {}: {:.3} [{:.3}, {:.3}], n = {}</title></circle>",
                cx - 3.0,
                cx + 3.0,
                cx - 3.0,
                cx + 3.0,
                f.py(e.mean.clamp(0.0, 1.0)),
                escape(categories.get(*x).map_or("", String::as_str)),
                e.mean,
                e.lo,
                e.hi,
                e.clusters,
                escape(&ser.label),
                escape(categories.get(*x).map_or("", String::as_str)),
                e.mean,
                e.lo,
                e.hi,
                e.clusters,
                c = ser.color
            );
        }
        s.push_str("</g>\n");
    }
    let (lx, ly) = (f.left + f.width + 20.0, f.top + 10.0);
    for (k, ser) in series.iter().enumerate() {
        let y = ly + 16.0 * k as f64;
        let dash = if ser.dashed {
            " stroke-dasharray=\"5 3\""
        } else {
            ""
        };
        let _ = writeln!(
            s,
            "<line x1=\"{lx:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"{c}\" stroke-width=\"2\"{dash}/><circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{c}\"/><text x=\"{:.1}\" y=\"{y:.1}\">{}</text>",
            y - 4.0,
            lx + 22.0,
            y - 4.0,
            lx + 11.0,
            y - 4.0,
            lx + 28.0,
            escape(&ser.label),
            c = ser.color
        );
    }
    s.push_str("</svg>\n");
    s
}

/// The systems of a report, as (label, core report).
pub type Systems<'a> = [(&'a str, &'a ProbeReport)];

const HOPS: [&str; 4] = ["1", "2", "3", "4"];

fn hop_categories() -> Vec<String> {
    HOPS.iter().map(|h| format!("hop {h}")).collect()
}

/// Points of `table` at hop keys `"{hop}{suffix}"`, hops 1 to 4.
fn by_hop(table: &BTreeMap<String, Estimate>, suffix: &str) -> Vec<(usize, Estimate)> {
    HOPS.iter()
        .enumerate()
        .filter_map(|(i, h)| table.get(&format!("{h}{suffix}")).map(|e| (i, *e)))
        .collect()
}

/// Two series per system (solid, dashed), labelled with the system where there are several.
fn pair(
    systems: &Systems,
    names: [&str; 2],
    points: impl Fn(&ProbeReport, usize) -> Vec<(usize, Estimate)>,
) -> Vec<Series> {
    let mut out = Vec::new();
    for (i, (label, p)) in systems.iter().enumerate() {
        for (arm, name) in names.iter().enumerate() {
            out.push(Series {
                label: if systems.len() > 1 {
                    format!("{label}: {name}")
                } else {
                    name.to_string()
                },
                color: color(if systems.len() > 1 { i } else { arm }),
                dashed: arm == 1,
                points: points(p, arm),
            });
        }
    }
    out
}

/// Accuracy after the change by hop depth, asserted and derived facts as two series.
pub fn hop_figure(systems: &Systems) -> String {
    let series = pair(
        systems,
        ["asserted fact changed", "derived fact changed"],
        |p, arm| {
            let t = p.by.get("hop_x_contradicted").cloned().unwrap_or_default();
            by_hop(&t, if arm == 0 { " asserted" } else { " derived" })
        },
    );
    plot(
        "Accuracy after the change, by hop depth (95% CI)",
        "hop depth: inference steps from the stated fact to the asked one",
        "accuracy after the change (proportion)",
        &hop_categories(),
        &series,
    )
}

/// Invalidation recall by hop depth, asserted and derived, from the follow-up question.
pub fn invalidation_figure(systems: &Systems) -> String {
    let series = pair(
        systems,
        ["asserted fact changed", "derived fact changed"],
        |p, arm| {
            by_hop(
                &p.intervals.invalidation_by_hop_x_contradicted,
                if arm == 0 { " asserted" } else { " derived" },
            )
        },
    );
    plot(
        "Statements marked no longer current, by hop depth (95% CI)",
        "hop depth of the item",
        "share marked (proportion)",
        &hop_categories(),
        &series,
    )
}

/// Invalidation by chain position on asserted items: how far down the chain the change is
/// carried (the propagation frontier).
pub fn chain_figure(systems: &Systems) -> String {
    let series: Vec<Series> = systems
        .iter()
        .enumerate()
        .map(|(i, (label, p))| Series {
            label: label.to_string(),
            color: color(i),
            dashed: false,
            points: by_hop(&p.intervals.invalidation_by_chain_position, ""),
        })
        .collect();
    plot(
        "Asserted changes: each chain position marked untrue (95% CI)",
        "position in the chain (1: the stated fact)",
        "share of items marking it (proportion)",
        &["position 1", "position 2", "position 3", "position 4"].map(String::from),
        &series,
    )
}

/// Declining to answer by hop depth: where "unknown" is right (solid) and where a value is
/// (dashed).
pub fn abstention_figure(systems: &Systems) -> String {
    let series = pair(
        systems,
        [
            "declines, answer unknown (right)",
            "declines, answer a value (wrong)",
        ],
        |p, arm| {
            let i = &p.intervals;
            by_hop(
                if arm == 0 {
                    &i.abstention_by_hop
                } else {
                    &i.over_abstention_by_hop
                },
                "",
            )
        },
    );
    plot(
        "Declining to answer after the change, by hop depth (95% CI)",
        "hop depth",
        "share declining (proportion)",
        &hop_categories(),
        &series,
    )
}
