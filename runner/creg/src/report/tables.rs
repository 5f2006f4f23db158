//! Tables in long format (`scores.csv`) and for a paper (`tables.tex`, booktabs).

use crate::record::Regime;
use crate::report::{exploratory, models_conditions, Basis, EXPLORATORY_NOTE, HEADLINE};
use crate::score::aggregate::{Aggregate, CellEstimate};
use runner_core::report::latex_text;
use runner_core::stats::bootstrap::Estimate;
use std::fmt::Write as _;

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

fn tex_cell(e: Option<&Estimate>) -> String {
    e.map_or_else(
        || "--".to_string(),
        |e| format!("{:.3} {{\\scriptsize[{:.3}, {:.3}]}}", e.mean, e.lo, e.hi),
    )
}

/// A figure, or a dash where it rests on stand-ins only (nothing answered).
fn tex_cell_on(e: Option<&Estimate>, basis: Option<Basis>) -> String {
    if basis.is_some_and(|b| b.stand_ins_only()) {
        return "--".to_string();
    }
    tex_cell(e)
}

fn series(m: &str, c: &str) -> String {
    let mark = if exploratory(m, c) { "$^\\dagger$" } else { "" };
    format!("{} / {}{mark}", latex_text(m), latex_text(c))
}

fn table(
    out: &mut String,
    caption: &str,
    label: &str,
    header: &[String],
    rows: &[Vec<String>],
    note: bool,
) {
    let _ = writeln!(
        out,
        "\\begin{{table}}[t]\n\\centering\n\\scriptsize\n\\caption{{{caption}}}\n\\label{{{label}}}\n\\begin{{tabular}}{{l{}}}\n\\toprule",
        "r".repeat(header.len().saturating_sub(1))
    );
    let _ = writeln!(out, "{} \\\\\n\\midrule", header.join(" & "));
    for r in rows {
        let _ = writeln!(out, "{} \\\\", r.join(" & "));
    }
    let _ = writeln!(out, "\\bottomrule\n\\end{{tabular}}");
    if note {
        let _ = writeln!(
            out,
            "\\par\\smallskip {}",
            latex_text(EXPLORATORY_NOTE).replace('†', "$^\\dagger$")
        );
    }
    let _ = writeln!(out, "\\end{{table}}\n");
}

/// `tables.tex`: the headline table and one per-regime table per headline metric, in
/// booktabs style (`\usepackage{booktabs}`); 95% intervals in brackets.
pub fn tex(a: &Aggregate, title: &str) -> String {
    let rows = models_conditions(a);
    let any_exploratory = rows.iter().any(|(m, c)| exploratory(m, c));
    let mut out = format!(
        "% {}: tables for a paper. Needs \\usepackage{{booktabs}}.\n% Means with 95% bootstrap intervals clustered by scenario.\n\n",
        title
    );
    // The headline is wide: two tables of at most seven metrics each.
    for (part, chunk) in HEADLINE.chunks(HEADLINE.len().div_ceil(2)).enumerate() {
        let mut header = vec!["model / condition".to_string()];
        header.extend(chunk.iter().map(|(_, _, l)| latex_text(l)));
        let body: Vec<Vec<String>> = rows
            .iter()
            .map(|(m, c)| {
                let mut r = vec![series(m, c)];
                r.extend(chunk.iter().map(|(t, metric, _)| {
                    tex_cell_on(
                        a.pooled(m, c, t, metric),
                        Basis::of(a, (m, c), t, metric, None),
                    )
                }));
                r
            })
            .collect();
        table(
            &mut out,
            &format!(
                "{}: headline metrics ({} of 2), 95\\% intervals.",
                latex_text(title),
                part + 1
            ),
            &format!("tab:headline-{}", part + 1),
            &header,
            &body,
            any_exploratory,
        );
    }
    for (task, metric, label) in HEADLINE {
        let body: Vec<Vec<String>> = Regime::ALL
            .into_iter()
            .map(|r| {
                let mut row = vec![latex_text(&r.to_string())];
                row.extend(rows.iter().map(|(m, c)| {
                    tex_cell_on(
                        a.find(m, c, task, metric, Some(r)),
                        Basis::of(a, (m, c), task, metric, Some(r)),
                    )
                }));
                row
            })
            .collect();
        if body.iter().all(|r| r[1..].iter().all(|c| c == "--")) {
            continue;
        }
        let mut header = vec!["regime".to_string()];
        header.extend(rows.iter().map(|(m, c)| series(m, c)));
        table(
            &mut out,
            &format!(
                "{}: {} ({} task) by regime, 95\\% intervals.",
                latex_text(title),
                latex_text(label),
                task
            ),
            &format!("tab:regime-{}-{}", task, metric.replace('_', "-")),
            &header,
            &body,
            any_exploratory,
        );
    }
    out
}
