//! SVG plots a paper can use: real axes with ticks, tick labels, axis titles with
//! units, intervals drawn as whiskers with caps, and a legend.

use crate::record::Regime;
use crate::report::{contrast_href, distinct_contrasts, escape, models_conditions, series_label};
use crate::score::aggregate::{Aggregate, Contrast};
use runner_core::report::plot::{color, legend, nice_ticks, open, Frame};
use std::collections::BTreeSet;
use std::fmt::Write as _;

/// Reliability diagram: mean reference p(anomalous) against mean stated p(anomalous) per
/// tenth of the stated range, one line per model and condition; the diagonal is perfect
/// calibration.
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
    let legend_w = 260.0;
    let mut s = open(
        f.left + f.width + legend_w + 20.0,
        f.bottom() + 50.0,
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
    let mut entries = Vec::new();
    for (i, (m, c)) in series.iter().enumerate() {
        let points: Vec<(f64, f64)> = a
            .reliability
            .iter()
            .filter(|b| &b.model == m && &b.condition == c)
            .map(|b| (f.px(b.mean_stated), f.py(b.mean_reference)))
            .collect();
        let path: Vec<String> = points
            .iter()
            .map(|(x, y)| format!("{x:.1},{y:.1}"))
            .collect();
        let _ = writeln!(
            s,
            "<polyline points=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\"/>",
            path.join(" "),
            color(i)
        );
        for (x, y) in points {
            let _ = writeln!(
                s,
                "<circle cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"3\" fill=\"{}\"/>",
                color(i)
            );
        }
        entries.push((series_label(m, c), color(i)));
    }
    legend(&mut s, f.left + f.width + 20.0, f.top + 10.0, &entries);
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
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">no paired conditions in this run</text>",
            f.left + f.width / 2.0,
            f.top + 14.0
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
