//! SVG plots a paper can use: real axes with ticks, tick labels, axis titles with
//! units, intervals drawn as whiskers with caps, and a legend.

use crate::record::Regime;
use crate::report::{
    contrast_href, distinct_contrasts, escape, models_conditions, series_label, Basis,
};
use crate::score::aggregate::{Aggregate, Contrast};
use runner_core::report::plot::{color, legend, nice_ticks, open, Frame};
use std::collections::BTreeSet;
use std::fmt::Write as _;

/// Dash patterns, one per series in turn: where lines coincide, the later (dashed) line
/// lets the earlier show through its gaps.
const DASHES: [&str; 5] = ["", "7 4", "2 3", "10 3 2 3", "4 2"];

/// Marker `i` (a dot, then open square, triangle, diamond and cross in turn) at (x, y):
/// open shapes of different sizes stay apart where points coincide.
fn marker(i: usize, x: f64, y: f64, color: &str) -> String {
    match i % 5 {
        0 => format!("<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"2.5\" fill=\"{color}\"/>"),
        1 => format!(
            "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"9\" height=\"9\" fill=\"none\" stroke=\"{color}\" stroke-width=\"1.3\"/>",
            x - 4.5,
            y - 4.5
        ),
        2 => format!(
            "<path d=\"M{x:.1} {:.1}L{:.1} {:.1}L{:.1} {:.1}Z\" fill=\"none\" stroke=\"{color}\" stroke-width=\"1.3\"/>",
            y - 6.0,
            x + 5.5,
            y + 4.0,
            x - 5.5,
            y + 4.0
        ),
        3 => format!(
            "<path d=\"M{x:.1} {:.1}L{:.1} {y:.1}L{x:.1} {:.1}L{:.1} {y:.1}Z\" fill=\"none\" stroke=\"{color}\" stroke-width=\"1.3\"/>",
            y - 7.0,
            x + 7.0,
            y + 7.0,
            x - 7.0
        ),
        _ => format!(
            "<path d=\"M{:.1} {:.1}L{:.1} {:.1}M{:.1} {:.1}L{:.1} {:.1}\" stroke=\"{color}\" stroke-width=\"1.5\"/>",
            x - 4.0,
            y - 4.0,
            x + 4.0,
            y + 4.0,
            x - 4.0,
            y + 4.0,
            x + 4.0,
            y - 4.0
        ),
    }
}

/// For each series (by its points), the first earlier series it coincides with: every
/// point within a pixel of the other's, in order. Such lines are drawn on top of each
/// other, and the legend says so.
pub fn coinciding(points: &[Vec<(f64, f64)>]) -> Vec<Option<usize>> {
    let same = |a: &[(f64, f64)], b: &[(f64, f64)]| {
        a.len() == b.len()
            && a.iter()
                .zip(b)
                .all(|(p, q)| (p.0 - q.0).abs() <= 1.0 && (p.1 - q.1).abs() <= 1.0)
    };
    (0..points.len())
        .map(|j| (0..j).find(|&i| same(&points[i], &points[j])))
        .collect()
}

/// Why series have no point in the reliability diagram (a point needs a belief answer
/// that kept the output contract, which is where the stated probability comes from),
/// or why the diagram has none at all; empty when every series has points.
pub fn reliability_gaps(a: &Aggregate) -> Vec<String> {
    let plotted: BTreeSet<(&str, &str)> = a
        .reliability
        .iter()
        .map(|b| (b.model.as_str(), b.condition.as_str()))
        .collect();
    let mut without = Vec::new();
    for (m, c) in models_conditions(a) {
        if plotted.contains(&(m.as_str(), c.as_str())) {
            continue;
        }
        if let Some(e) = a.pooled(&m, &c, "belief", "contract_failure") {
            let failed = (e.mean * e.values as f64).round() as usize;
            without.push(format!(
                "{}: {failed} of its {} belief answers failed the output contract",
                series_label(&m, &c),
                e.values
            ));
        }
    }
    if without.is_empty() && !a.reliability.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    if a.reliability.is_empty() {
        out.push(if without.is_empty() {
            "The reliability diagram is empty: this report holds no belief sample.".to_string()
        } else {
            "The reliability diagram is empty: no belief answer kept the output contract, and an answer that fails it states no probability to bin.".to_string()
        });
    } else {
        out.push("Series without points in the reliability diagram (an answer that fails the output contract states no probability to bin):".to_string());
    }
    if !without.is_empty() {
        out.push(format!("{}.", without.join("; ")));
    }
    out
}

/// Reliability diagram: mean reference p(anomalous) against mean stated p(anomalous) per
/// tenth of the stated range, one line per model and condition; the diagonal is perfect
/// calibration. Each series has its own colour, marker and dash pattern; series whose
/// points coincide are named as such in the legend, and an empty diagram says why.
pub fn reliability(a: &Aggregate) -> String {
    let series: Vec<(String, String)> = a
        .reliability
        .iter()
        .map(|b| (b.model.clone(), b.condition.clone()))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let f = Frame {
        left: 64.0,
        top: 34.0,
        width: 320.0,
        height: 320.0,
        x: (0.0, 1.0),
        y: (0.0, 1.0),
    };
    let points: Vec<Vec<(f64, f64)>> = series
        .iter()
        .map(|(m, c)| {
            a.reliability
                .iter()
                .filter(|b| &b.model == m && &b.condition == c)
                .map(|b| (f.px(b.mean_stated), f.py(b.mean_reference)))
                .collect()
        })
        .collect();
    let same = coinciding(&points);
    let labels: Vec<String> = series.iter().map(|(m, c)| series_label(m, c)).collect();
    let notes: Vec<Option<String>> = same
        .iter()
        .map(|j| j.map(|j| format!("lines overlap: same points as {}", labels[j])))
        .collect();
    // Wide enough for the longest label or note (about 6.5 px a character at 11 px).
    let longest = labels
        .iter()
        .chain(notes.iter().flatten())
        .map(|l| l.chars().count())
        .max()
        .unwrap_or(0);
    let legend_w = (40.0 + 6.5 * longest as f64).max(260.0);
    let rows = series.len() + same.iter().flatten().count();
    let height = (f.bottom() + 50.0).max(f.top + 20.0 + 16.0 * rows as f64);
    let mut s = open(
        f.left + f.width + legend_w + 20.0,
        height,
        "Reliability: stated vs reference p(anomalous)",
    );
    let ticks = nice_ticks(0.0, 1.0, 5);
    f.axes(
        &mut s,
        Some(&ticks),
        Some(&ticks),
        "mean stated p(anomalous) in bin (probability)",
        "mean reference p(anomalous) (probability)",
    );
    let _ = writeln!(
        s,
        "<line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"#999\" stroke-dasharray=\"4\"/>",
        f.px(0.0),
        f.py(0.0),
        f.px(1.0),
        f.py(1.0)
    );
    if series.is_empty() {
        let any_belief = models_conditions(a)
            .iter()
            .any(|(m, c)| a.pooled(m, c, "belief", "contract_failure").is_some());
        let why = if !any_belief {
            ["No points: this report holds", "no belief answer."]
        } else {
            [
                "No points: no belief answer kept the output",
                "contract, so none states a probability.",
            ]
        };
        let (cx, cy) = (f.left + f.width / 2.0, f.top + f.height / 2.0);
        let _ = writeln!(
            s,
            "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"280\" height=\"40\" fill=\"white\" stroke=\"#ccc\"/>",
            cx - 140.0,
            cy - 24.0
        );
        for (k, line) in why.iter().enumerate() {
            let _ = writeln!(
                s,
                "<text class=\"empty\" x=\"{cx:.1}\" y=\"{:.1}\" text-anchor=\"middle\" font-size=\"12\">{line}</text>",
                cy - 8.0 + 16.0 * k as f64
            );
        }
    }
    let (lx, mut ly) = (f.left + f.width + 20.0, f.top + 10.0);
    for (i, label) in labels.iter().enumerate() {
        let dash = match DASHES[i % DASHES.len()] {
            "" => String::new(),
            d => format!(" stroke-dasharray=\"{d}\""),
        };
        let path: Vec<String> = points[i]
            .iter()
            .map(|(x, y)| format!("{x:.1},{y:.1}"))
            .collect();
        let _ = writeln!(
            s,
            "<g class=\"series\" data-series=\"{}\"><polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.8\"{dash}/>",
            escape(label),
            path.join(" "),
            color(i)
        );
        for &(x, y) in &points[i] {
            s.push_str(&marker(i, x, y, color(i)));
        }
        s.push_str("</g>\n");
        // The legend: a stretch of the line with its marker, the label, and where the
        // series coincides with another, a line saying so.
        let _ = writeln!(
            s,
            "<line x1=\"{lx:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"{}\" stroke-width=\"1.8\"{dash}/>{}<text x=\"{:.1}\" y=\"{ly:.1}\">{}</text>",
            ly - 4.0,
            lx + 22.0,
            ly - 4.0,
            color(i),
            marker(i, lx + 11.0, ly - 4.0, color(i)),
            lx + 28.0,
            escape(label)
        );
        if let Some(note) = &notes[i] {
            ly += 16.0;
            let _ = writeln!(
                s,
                "<text class=\"overlap\" x=\"{:.1}\" y=\"{ly:.1}\" fill=\"#555\" font-style=\"italic\">{}</text>",
                lx + 28.0,
                escape(note)
            );
        }
        ly += 16.0;
    }
    s.push_str("</svg>\n");
    s
}

/// One metric per regime: a bar per model and condition with its 95% interval.
pub fn regime_bars(a: &Aggregate, task: &str, metric: &str, label: &str) -> String {
    let series = models_conditions(a);
    let n = series.len().max(1) as f64;
    let bar = (60.0 / n).clamp(6.0, 14.0);
    let group = bar * n + 16.0;
    let f = Frame {
        left: 64.0,
        top: 34.0,
        width: group * Regime::ALL.len() as f64,
        height: 240.0,
        x: (0.0, Regime::ALL.len() as f64),
        y: (0.0, 1.0),
    };
    let legend_w = 260.0;
    let mut s = open(
        f.left + f.width + legend_w + 20.0,
        f.bottom() + 115.0,
        &format!("{label} by regime (95% CI)"),
    );
    let ticks = nice_ticks(0.0, 1.0, 5);
    f.axes(
        &mut s,
        None,
        Some(&ticks),
        "",
        &format!("{label} (proportion)"),
    );
    for (g, regime) in Regime::ALL.into_iter().enumerate() {
        let gx = f.px(g as f64);
        let (lx, ly) = (gx + group / 2.0, f.bottom() + 14.0);
        let _ = writeln!(
            s,
            "<line x1=\"{lx:.1}\" y1=\"{:.1}\" x2=\"{lx:.1}\" y2=\"{:.1}\" stroke=\"#333\"/><text x=\"{lx:.1}\" y=\"{ly:.1}\" transform=\"rotate(35 {lx:.1} {ly:.1})\">{regime}</text>",
            f.bottom(),
            f.bottom() + 5.0
        );
        for (i, (m, c)) in series.iter().enumerate() {
            let Some(e) = a.find(m, c, task, metric, Some(regime)) else {
                continue;
            };
            // A bar of stand-ins only would read as a score of 0 (or 1).
            if Basis::of(a, (m, c), task, metric, Some(regime)).is_some_and(|b| b.stand_ins_only())
            {
                continue;
            }
            let x = gx + 8.0 + bar * i as f64;
            let mid = x + bar / 2.0;
            let clamp = |v: f64| v.clamp(0.0, 1.0);
            let _ = writeln!(
                s,
                "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{}\"><title>{}: {:.3} [{:.3}, {:.3}]</title></rect>\n\
                 <line x1=\"{mid:.1}\" y1=\"{:.1}\" x2=\"{mid:.1}\" y2=\"{:.1}\" stroke=\"black\"/><line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"black\"/><line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"black\"/>",
                f.py(clamp(e.mean)),
                bar - 1.0,
                f.bottom() - f.py(clamp(e.mean)),
                color(i),
                escape(&series_label(m, c)),
                e.mean,
                e.lo,
                e.hi,
                f.py(clamp(e.lo)),
                f.py(clamp(e.hi)),
                mid - 3.0,
                f.py(clamp(e.lo)),
                mid + 3.0,
                f.py(clamp(e.lo)),
                mid - 3.0,
                f.py(clamp(e.hi)),
                mid + 3.0,
                f.py(clamp(e.hi)),
            );
        }
    }
    let present = |answered: bool| {
        series.iter().any(|(m, c)| {
            Regime::ALL.into_iter().any(|r| {
                a.find(m, c, task, metric, Some(r)).is_some()
                    && (!answered
                        || !Basis::of(a, (m, c), task, metric, Some(r))
                            .is_some_and(|b| b.stand_ins_only()))
            })
        })
    };
    let why = if !present(false) {
        Some(format!("no {task} samples in this run"))
    } else if !present(true) {
        Some(format!(
            "no bars: no {task} answer kept the output contract (figures of stand-ins are not drawn)"
        ))
    } else {
        None
    };
    if let Some(why) = why {
        let _ = writeln!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" class=\"empty\">{}</text>",
            f.left + f.width / 2.0,
            f.top + 14.0,
            escape(&why)
        );
    }
    let entries: Vec<(String, &str)> = series
        .iter()
        .enumerate()
        .map(|(i, (m, c))| (series_label(m, c), color(i)))
        .collect();
    legend(&mut s, f.left + f.width + 20.0, f.top + 10.0, &entries);
    s.push_str("</svg>\n");
    s
}

/// Forest plot of the paired condition contrasts of one metric, each contrast once:
/// the mean difference with its 95% interval against a line at zero.
pub fn forest(a: &Aggregate, task: &str, metric: &str) -> String {
    forest_with(a, task, metric, |_| None)
}

/// The forest plot with each row a link to the samples behind it (inside report.html).
pub fn forest_linked(a: &Aggregate, task: &str, metric: &str) -> String {
    forest_with(a, task, metric, |k| Some(contrast_href(k)))
}

/// Why a forest plot of `task` has no row: the run holds no sample of the task, or no
/// model answered it under two conditions that pair, or the paired conditions share no
/// scenario.
pub fn no_contrast_reason(a: &Aggregate, task: &str) -> String {
    let mut conditions: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
    for e in a.estimates.iter().filter(|e| e.cell.task == task) {
        let c = conditions.entry(&e.cell.model).or_default();
        if !c.contains(&e.cell.condition.as_str()) {
            c.push(&e.cell.condition);
        }
    }
    if conditions.is_empty() {
        return format!("no {task} samples in this run");
    }
    let paired = conditions
        .values()
        .any(|c| c.len() > 1 && c.contains(&"full_graph"));
    if paired {
        format!("no scenario has {task} samples under both conditions of a pair")
    } else {
        format!("no paired conditions among the {task} samples (each condition is compared with full_graph)")
    }
}

/// The height of one contrast's row, in pixels.
const FOREST_ROW_H: f64 = 20.0;

fn forest_with(
    a: &Aggregate,
    task: &str,
    metric: &str,
    href: impl Fn(&Contrast) -> Option<String>,
) -> String {
    let rows: Vec<_> = distinct_contrasts(a)
        .into_iter()
        .filter(|k| k.task == task && k.metric == metric)
        .collect();
    let (f, ticks) = forest_frame(&rows);
    let mut s = open(
        f.left + f.width + 170.0,
        f.bottom() + 50.0,
        &format!("Paired contrasts: {task} {metric} (95% CI)"),
    );
    f.axes(
        &mut s,
        Some(&ticks),
        None,
        &format!("difference in {metric} (condition − baseline), paired by scenario"),
        "",
    );
    let _ = writeln!(
        s,
        "<line x1=\"{x:.1}\" y1=\"{:.1}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"#666\" stroke-dasharray=\"4\"/>",
        f.top,
        f.bottom(),
        x = f.px(0.0)
    );
    if rows.is_empty() {
        let _ = writeln!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" class=\"empty\">{}</text>",
            f.left + f.width / 2.0,
            f.top + 14.0,
            escape(&no_contrast_reason(a, task))
        );
    }
    for (i, k) in rows.iter().enumerate() {
        let y = f.top + 10.0 + FOREST_ROW_H * i as f64 + FOREST_ROW_H / 2.0;
        forest_row(&mut s, &f, y, k, href(k).as_deref());
    }
    s.push_str("</svg>\n");
    s
}

/// The plot area, with its ticks: an x range about zero wide enough for every interval
/// (at least ±0.1), and a row per contrast.
fn forest_frame(rows: &[&Contrast]) -> (Frame, Vec<f64>) {
    let span = rows
        .iter()
        .flat_map(|k| [k.difference.lo.abs(), k.difference.hi.abs()])
        .fold(0.1f64, f64::max);
    let ticks = nice_ticks(-span, span, 6);
    let (lo, hi) = (
        ticks.first().copied().unwrap_or(-span).min(-span),
        ticks.last().copied().unwrap_or(span).max(span),
    );
    let f = Frame {
        left: 330.0,
        top: 34.0,
        width: 320.0,
        height: FOREST_ROW_H * rows.len().max(1) as f64 + 10.0,
        x: (lo, hi),
        y: (0.0, 1.0),
    };
    (f, ticks)
}

/// One contrast at height `y`: its label, its interval with caps, its mean and the
/// figures, as a link when `link` is given.
fn forest_row(s: &mut String, f: &Frame, y: f64, k: &Contrast, link: Option<&str>) {
    let d = &k.difference;
    if let Some(h) = link {
        let _ = write!(s, "<a href=\"{}\">", escape(h));
    }
    let _ = writeln!(
        s,
        "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}: {} − {}</text>\n\
         <line x1=\"{:.1}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"black\"/><line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"black\"/><line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"black\"/>\n\
         <rect x=\"{:.1}\" y=\"{:.1}\" width=\"7\" height=\"7\" fill=\"#1f77b4\"/><text x=\"{:.1}\" y=\"{:.1}\">{:+.3} [{:+.3}, {:+.3}]</text>",
        f.left - 10.0,
        y + 4.0,
        escape(&k.model),
        escape(&k.condition),
        escape(&k.baseline_condition),
        f.px(d.lo),
        f.px(d.hi),
        f.px(d.lo),
        y - 4.0,
        f.px(d.lo),
        y + 4.0,
        f.px(d.hi),
        y - 4.0,
        f.px(d.hi),
        y + 4.0,
        f.px(d.mean) - 3.5,
        y - 3.5,
        f.left + f.width + 10.0,
        y + 4.0,
        d.mean,
        d.lo,
        d.hi
    );
    if link.is_some() {
        s.push_str("</a>\n");
    }
}

#[cfg(test)]
mod tests {
    use super::nice_ticks;

    #[test]
    fn ticks_are_round_and_cover_the_range() {
        let near = |t: Vec<f64>, want: &[f64]| {
            t.len() == want.len() && t.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-12)
        };
        assert!(near(
            nice_ticks(0.0, 1.0, 5),
            &[0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
        ));
        // Steps of 1, 2 or 5 times a power of ten, inside the range.
        assert!(near(nice_ticks(-0.37, 0.37, 6), &[-0.2, 0.0, 0.2]));
        assert!(near(
            nice_ticks(-0.1, 0.1, 6),
            &[-0.1, -0.05, 0.0, 0.05, 0.1]
        ));
        assert!(near(nice_ticks(0.0, 730.0, 5), &[0.0, 200.0, 400.0, 600.0]));
    }
}
