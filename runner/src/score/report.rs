//! Reports under a run's folder: `scores.json` (every figure), `summary.md` (tables to
//! paste), `scores.csv` (long format) and SVG plots (reliability diagram, per-regime
//! bars with intervals, condition contrasts).

use super::aggregate::{Aggregate, CellEstimate};
use super::bootstrap::Estimate;
use crate::suite::creg::record::Regime;
use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// The headline columns of the summary: (task, metric, label).
const HEADLINE: [(&str, &str, &str); 11] = [
    ("belief", "top_state_accuracy", "top state"),
    ("belief", "abs_error", "abs error"),
    ("belief", "brier", "Brier"),
    ("belief", "supporting_f1", "support F1"),
    ("belief", "leakage", "leakage"),
    ("belief", "contradiction_detection", "contra. det."),
    ("action", "exact_match", "action exact"),
    ("action", "admissible", "admissible"),
    ("action", "unsafe", "unsafe"),
    ("explanation", "grounded", "grounded expl."),
    ("belief", "contract_failure", "contract fail"),
];

const REVISION: [(&str, &str); 5] = [
    ("direction_accuracy", "direction"),
    ("justified_revision", "justified revision"),
    ("unnecessary_update", "unnecessary update"),
    ("all_prefixes_correct", "all prefixes correct"),
    ("log_loss", "log loss"),
];

fn cell(e: Option<&Estimate>) -> String {
    e.map_or_else(
        || "–".to_string(),
        |e| format!("{:.3} [{:.3}, {:.3}]", e.mean, e.lo, e.hi),
    )
}

fn models_conditions(a: &Aggregate) -> Vec<(String, String)> {
    let set: BTreeSet<(String, String)> = a
        .estimates
        .iter()
        .map(|e| (e.cell.model.clone(), e.cell.condition.clone()))
        .collect();
    set.into_iter().collect()
}

/// The markdown summary.
pub fn summary(a: &Aggregate, title: &str) -> String {
    let mut out = String::new();
    let rows = models_conditions(a);
    let _ = writeln!(out, "# {title}\n");
    let _ = writeln!(
        out,
        "{} scored samples. Means with 95% bootstrap intervals clustered by scenario (seeds nested within scenario, {} resamples).\n",
        a.samples,
        super::aggregate::RESAMPLES
    );
    let _ = writeln!(out, "## Headline\n");
    let mut header = String::from("| model | condition |");
    let mut rule = String::from("|---|---|");
    for (_, _, label) in HEADLINE {
        let _ = write!(header, " {label} |");
        rule.push_str("---|");
    }
    let _ = writeln!(out, "{header}\n{rule}");
    for (m, c) in &rows {
        let _ = write!(out, "| {m} | {c} |");
        for (task, metric, _) in HEADLINE {
            let _ = write!(out, " {} |", cell(a.pooled(m, c, task, metric)));
        }
        out.push('\n');
    }

    let _ = writeln!(out, "\n## Belief revision and calibration\n");
    let _ = write!(out, "| model | condition |");
    for (_, label) in REVISION {
        let _ = write!(out, " {label} |");
    }
    let _ = writeln!(out, "\n|---|---|{}", "---|".repeat(REVISION.len()));
    for (m, c) in &rows {
        let _ = write!(out, "| {m} | {c} |");
        for (metric, _) in REVISION {
            let _ = write!(out, " {} |", cell(a.pooled(m, c, "belief", metric)));
        }
        out.push('\n');
    }

    let _ = writeln!(out, "\n## Top-state accuracy by regime\n");
    let _ = write!(out, "| regime |");
    for (m, c) in &rows {
        let _ = write!(out, " {m} / {c} |");
    }
    let _ = writeln!(out, "\n|---|{}", "---|".repeat(rows.len()));
    for regime in Regime::ALL {
        let _ = write!(out, "| {regime} |");
        for (m, c) in &rows {
            let _ = write!(
                out,
                " {} |",
                cell(a.find(m, c, "belief", "top_state_accuracy", Some(regime)))
            );
        }
        out.push('\n');
    }

    let shown: Vec<_> = a
        .contrasts
        .iter()
        .filter(|k| k.task == "belief" && matches!(k.metric, "top_state_accuracy" | "abs_error"))
        .collect();
    if !shown.is_empty() {
        let _ = writeln!(out, "\n## Paired condition contrasts (belief)\n");
        let _ = writeln!(
            out,
            "| model | contrast | metric | difference |\n|---|---|---|---|"
        );
        for k in shown {
            let _ = writeln!(
                out,
                "| {} | {} − {} | {} | {} |",
                k.model,
                k.condition,
                k.baseline_condition,
                k.metric,
                cell(Some(&k.difference))
            );
        }
    }

    if !a.twins.is_empty() {
        let _ = writeln!(
            out,
            "\n## Counterfactual twins (25 relation-association pairs)\n"
        );
        let _ = writeln!(
            out,
            "| model | condition | both twins correct | stated gap (abs. p_A − p_B) | reference gap |\n|---|---|---|---|---|"
        );
        for t in &a.twins {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {:.3} |",
                t.model,
                t.condition,
                cell(Some(&t.both_correct)),
                cell(Some(&t.stated_gap)),
                t.reference_gap
            );
        }
    }

    let _ = writeln!(out, "\n## Output contract categories\n");
    let _ = writeln!(out, "| model / condition / task | valid | repaired | invalid | truncated |\n|---|---|---|---|---|");
    for (key, counts) in &a.categories {
        let n = |k: &str| counts.get(k).copied().unwrap_or(0);
        let _ = writeln!(
            out,
            "| {key} | {} | {} | {} | {} |",
            n("valid"),
            n("repaired"),
            n("invalid"),
            n("truncated")
        );
    }
    out
}

/// Every estimate in long format.
pub fn csv(a: &Aggregate) -> String {
    let mut out =
        String::from("model,condition,task,metric,regime,seed,clusters,values,mean,lo,hi\n");
    for CellEstimate {
        cell: c,
        estimate: e,
    } in &a.estimates
    {
        let _ = writeln!(
            out,
            "{},{},{},{},{},{},{},{},{},{},{}",
            c.model,
            c.condition,
            c.task,
            c.metric,
            c.regime.map_or(String::new(), |r| r.to_string()),
            c.seed.map_or(String::new(), |s| s.to_string()),
            e.clusters,
            e.values,
            e.mean,
            e.lo,
            e.hi
        );
    }
    out
}

const PALETTE: [&str; 8] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
];

fn svg_open(w: u32, h: u32, title: &str) -> String {
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" font-family=\"sans-serif\" font-size=\"11\">\n\
         <rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"{}\" y=\"16\" text-anchor=\"middle\" font-size=\"13\">{title}</text>\n",
        w / 2
    )
}

/// Stated versus reference probability of anomalous, one line per model and condition.
pub fn reliability_svg(a: &Aggregate) -> String {
    let (x0, y0, side) = (50.0, 30.0, 300.0);
    let mut s = svg_open(560, 370, "Reliability: stated vs reference p(anomalous)");
    let _ = writeln!(
        s,
        "<rect x=\"{x0}\" y=\"{y0}\" width=\"{side}\" height=\"{side}\" fill=\"none\" stroke=\"#999\"/>\n\
         <line x1=\"{x0}\" y1=\"{}\" x2=\"{}\" y2=\"{y0}\" stroke=\"#bbb\" stroke-dasharray=\"4\"/>\n\
         <text x=\"{}\" y=\"{}\" text-anchor=\"middle\">stated</text>\n\
         <text x=\"14\" y=\"{}\" transform=\"rotate(-90 14 {})\" text-anchor=\"middle\">reference</text>",
        y0 + side,
        x0 + side,
        x0 + side / 2.0,
        y0 + side + 28.0,
        y0 + side / 2.0,
        y0 + side / 2.0
    );
    let series: BTreeSet<(String, String)> = a
        .reliability
        .iter()
        .map(|b| (b.model.clone(), b.condition.clone()))
        .collect();
    for (i, (m, c)) in series.iter().enumerate() {
        let color = PALETTE[i % PALETTE.len()];
        let points: Vec<String> = a
            .reliability
            .iter()
            .filter(|b| &b.model == m && &b.condition == c)
            .map(|b| {
                format!(
                    "{:.1},{:.1}",
                    x0 + b.mean_stated * side,
                    y0 + side - b.mean_reference * side
                )
            })
            .collect();
        let _ = writeln!(
            s,
            "<polyline points=\"{}\" fill=\"none\" stroke=\"{color}\" stroke-width=\"2\"/>\n<text x=\"{}\" y=\"{}\" fill=\"{color}\">{m} / {c}</text>",
            points.join(" "),
            x0 + side + 12.0,
            y0 + 12.0 + 14.0 * i as f64
        );
    }
    s.push_str("</svg>\n");
    s
}

/// Top-state accuracy per regime, with 95% intervals, one bar per model and condition.
pub fn regime_bars_svg(a: &Aggregate) -> String {
    let series = models_conditions(a);
    let group_w = 20.0 + 14.0 * series.len() as f64;
    let (x0, y0, h) = (50.0, 30.0, 220.0);
    let width = (x0 + group_w * 7.0 + 200.0) as u32;
    let mut s = svg_open(width, 330, "Top-state accuracy by regime (95% CI)");
    let _ = writeln!(
        s,
        "<line x1=\"{x0}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#999\"/>",
        y0 + h,
        x0 + group_w * 7.0,
        y0 + h
    );
    for (g, regime) in Regime::ALL.into_iter().enumerate() {
        let gx = x0 + g as f64 * group_w;
        let _ = writeln!(
            s,
            "<text x=\"{}\" y=\"{}\" transform=\"rotate(30 {} {})\">{regime}</text>",
            gx + 4.0,
            y0 + h + 14.0,
            gx + 4.0,
            y0 + h + 14.0
        );
        for (i, (m, c)) in series.iter().enumerate() {
            let Some(e) = a.find(m, c, "belief", "top_state_accuracy", Some(regime)) else {
                continue;
            };
            let x = gx + 10.0 + 14.0 * i as f64;
            let y = |v: f64| y0 + h - v * h;
            let color = PALETTE[i % PALETTE.len()];
            let _ = writeln!(
                s,
                "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"12\" height=\"{:.1}\" fill=\"{color}\"/>\n\
                 <line x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"black\"/>",
                y(e.mean),
                e.mean * h,
                x + 6.0,
                y(e.lo),
                x + 6.0,
                y(e.hi)
            );
        }
    }
    for (i, (m, c)) in series.iter().enumerate() {
        let _ = writeln!(
            s,
            "<text x=\"{}\" y=\"{}\" fill=\"{}\">{m} / {c}</text>",
            x0 + group_w * 7.0 + 10.0,
            y0 + 12.0 + 14.0 * i as f64,
            PALETTE[i % PALETTE.len()]
        );
    }
    s.push_str("</svg>\n");
    s
}

/// Paired contrasts of top-state accuracy as a forest plot.
pub fn contrasts_svg(a: &Aggregate) -> String {
    let rows: Vec<_> = a
        .contrasts
        .iter()
        .filter(|k| k.task == "belief" && k.metric == "top_state_accuracy")
        .collect();
    let (x0, y0, w) = (330.0, 30.0, 300.0);
    let height = (y0 + 20.0 * rows.len() as f64 + 40.0) as u32;
    let mut s = svg_open(
        680,
        height,
        "Paired contrasts: top-state accuracy difference (95% CI)",
    );
    let x = |v: f64| x0 + (v.clamp(-1.0, 1.0) + 1.0) / 2.0 * w;
    let _ = writeln!(
        s,
        "<line x1=\"{:.1}\" y1=\"{y0}\" x2=\"{:.1}\" y2=\"{}\" stroke=\"#bbb\" stroke-dasharray=\"4\"/>",
        x(0.0),
        x(0.0),
        y0 + 20.0 * rows.len() as f64
    );
    for (i, k) in rows.iter().enumerate() {
        let y = y0 + 12.0 + 20.0 * i as f64;
        let d = &k.difference;
        let _ = writeln!(
            s,
            "<text x=\"10\" y=\"{:.1}\">{} : {} − {}</text>\n<line x1=\"{:.1}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"black\"/>\n<circle cx=\"{:.1}\" cy=\"{y:.1}\" r=\"4\" fill=\"#1f77b4\"/>",
            y + 4.0,
            k.model,
            k.condition,
            k.baseline_condition,
            x(d.lo),
            x(d.hi),
            x(d.mean)
        );
    }
    s.push_str("</svg>\n");
    s
}

/// Writes every report into `dir` and returns the paths written.
pub fn write_reports(dir: &Path, a: &Aggregate, title: &str) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let files = [
        (
            "scores.json",
            serde_json::to_string_pretty(a).map_err(std::io::Error::other)?,
        ),
        ("summary.md", summary(a, title)),
        ("scores.csv", csv(a)),
        ("reliability.svg", reliability_svg(a)),
        ("regimes.svg", regime_bars_svg(a)),
        ("contrasts.svg", contrasts_svg(a)),
    ];
    let mut written = Vec::new();
    for (name, body) in files {
        let path = dir.join(name);
        // Write beside, then rename: a crash never leaves a half-written report.
        let tmp = dir.join(format!(".{name}.tmp"));
        std::fs::write(&tmp, body)?;
        std::fs::rename(&tmp, &path)?;
        written.push(path);
    }
    Ok(written)
}
