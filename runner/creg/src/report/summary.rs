//! `summary.md`: the tables to paste, with the provenance they need.

use crate::record::Regime;
use crate::report::{
    cell, cell_on, distinct_contrasts, exploratory, models_conditions, series_label, Provenance,
    EXPLORATORY_NOTE, HEADLINE, HEADLINE_NOTE, LOG_LOSS_NOTE, REVISION,
};
use crate::report::{contrast_answered, Basis};
use crate::score::aggregate::{Aggregate, CONTRACT_FAILURE, RESAMPLES};
use runner_core::report::markdown_text as md;
use std::fmt::Write as _;

/// Metrics whose contrasts the summary lists (all are in `scores.json`).
pub const CONTRAST_METRICS: [(&str, &str); 3] = [
    ("top_state_accuracy", "top-state accuracy"),
    ("abs_error", "abs error"),
    ("brier", "Brier"),
];

/// The markdown summary. Every name a user chose (model, title, provenance) is written
/// as text: no markup of it reaches the page.
pub fn summary(a: &Aggregate, title: &str, provenance: &Provenance) -> String {
    let mut out = String::new();
    let rows = models_conditions(a);
    header(&mut out, a, title, provenance, &rows);
    headline(&mut out, a, &rows);
    revision(&mut out, a, &rows);
    by_regime(&mut out, a, &rows);
    contrasts(&mut out, a);
    twins(&mut out, a);
    reliability(&mut out, a);
    contract_categories(&mut out, a);
    out
}

type Rows = [(String, String)];

/// The title, the provenance, how the intervals are computed and the exploratory note.
fn header(out: &mut String, a: &Aggregate, title: &str, provenance: &Provenance, rows: &Rows) {
    let _ = writeln!(out, "# {}\n", md(title));
    for (field, value) in provenance.lines() {
        let _ = writeln!(out, "- {}: {}", md(&field), md(&value));
    }
    let _ = writeln!(
        out,
        "\n{} scored samples. Means with 95% bootstrap intervals clustered by scenario (seeds nested within scenario, {RESAMPLES} resamples).",
        a.samples
    );
    if rows.iter().any(|(m, c)| exploratory(m, c)) {
        let _ = writeln!(out, "\n{EXPLORATORY_NOTE}");
    }
}

/// The headline metrics, pooled over regimes, per model / condition.
fn headline(out: &mut String, a: &Aggregate, rows: &Rows) {
    let _ = writeln!(out, "\n## Headline\n");
    let mut header = String::from("| model / condition |");
    for (_, _, label) in HEADLINE {
        let _ = write!(header, " {label} |");
    }
    let _ = writeln!(out, "{header}\n|---|{}", "---|".repeat(HEADLINE.len()));
    for (m, c) in rows {
        let _ = write!(out, "| {} |", md(&series_label(m, c)));
        for (task, metric, _) in HEADLINE {
            let basis = Basis::of(a, (m, c), task, metric, None);
            let _ = write!(out, " {} |", cell_on(a.pooled(m, c, task, metric), basis));
        }
        out.push('\n');
    }
    let _ = writeln!(out, "\n{HEADLINE_NOTE}");
}

/// The belief-revision and calibration metrics per model / condition.
fn revision(out: &mut String, a: &Aggregate, rows: &Rows) {
    let _ = writeln!(out, "\n## Belief revision and calibration\n");
    let _ = write!(out, "| model / condition |");
    for (_, label) in REVISION {
        let _ = write!(out, " {label} |");
    }
    let _ = writeln!(out, "\n|---|{}", "---|".repeat(REVISION.len()));
    for (m, c) in rows {
        let _ = write!(out, "| {} |", md(&series_label(m, c)));
        for (metric, _) in REVISION {
            let basis = Basis::of(a, (m, c), "belief", metric, None);
            let _ = write!(
                out,
                " {} |",
                cell_on(a.pooled(m, c, "belief", metric), basis)
            );
        }
        out.push('\n');
    }
    let _ = writeln!(out, "\n{LOG_LOSS_NOTE}");
}

/// A table per headline metric that has per-regime estimates: regimes by model / condition.
fn by_regime(out: &mut String, a: &Aggregate, rows: &Rows) {
    let _ = writeln!(out, "\n## By regime\n");
    for (task, metric, label) in HEADLINE {
        let present = rows.iter().any(|(m, c)| {
            Regime::ALL
                .iter()
                .any(|r| a.find(m, c, task, metric, Some(*r)).is_some())
        });
        if !present {
            continue;
        }
        let _ = writeln!(out, "### {label} ({task} `{metric}`)\n");
        let _ = write!(out, "| regime |");
        for (m, c) in rows {
            let _ = write!(out, " {} |", md(&series_label(m, c)));
        }
        let _ = writeln!(out, "\n|---|{}", "---|".repeat(rows.len()));
        for regime in Regime::ALL {
            let _ = write!(out, "| {regime} |");
            for (m, c) in rows {
                let basis = Basis::of(a, (m, c), task, metric, Some(regime));
                let e = a.find(m, c, task, metric, Some(regime));
                let _ = write!(out, " {} |", cell_on(e, basis));
            }
            out.push('\n');
        }
        out.push('\n');
    }
}

/// The belief contrasts of the contrast metrics, each once; no section when there are none.
fn contrasts(out: &mut String, a: &Aggregate) {
    let shown: Vec<_> = distinct_contrasts(a)
        .into_iter()
        .filter(|k| k.task == "belief" && CONTRAST_METRICS.iter().any(|(m, _)| *m == k.metric))
        .collect();
    if shown.is_empty() {
        return;
    }
    let _ = writeln!(out, "## Paired condition contrasts (belief)\n");
    let _ = writeln!(
        out,
        "Each contrast once: a condition minus `full_graph`, and `full_graph` minus `graph_without_relations` (what relation content adds). Paired by scenario.\n"
    );
    let _ = writeln!(
        out,
        "A figure's contrast is read beside the contract-failure contrast of the same pair: where the failure rates differ, the difference is one of output format as much as of reasoning.\n"
    );
    let _ = writeln!(
        out,
        "| model | contrast | metric | difference | contract-fail difference | answered |\n|---|---|---|---|---|---|"
    );
    for k in shown {
        let mark = if exploratory(&k.model, &k.condition)
            || exploratory(&k.model, &k.baseline_condition)
        {
            " †"
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "| {} | {} − {}{mark} | {} | {} | {} | {} |",
            md(&k.model),
            md(&k.condition),
            md(&k.baseline_condition),
            k.metric,
            cell(Some(&k.difference)),
            cell(a.companion(k, CONTRACT_FAILURE).map(|f| &f.difference)),
            contrast_answered(a, k)
        );
    }
}

/// The relation-association twins; no section without a complete pair.
fn twins(out: &mut String, a: &Aggregate) {
    if a.twins.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\n## Counterfactual twins (relation-association pairs)\n"
    );
    let _ = writeln!(
        out,
        "| model / condition | pairs | both twins correct | stated gap (abs. p_A − p_B) | reference gap |\n|---|---|---|---|---|"
    );
    for t in &a.twins {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {:.3} |",
            md(&series_label(&t.model, &t.condition)),
            t.both_correct.clusters,
            cell(Some(&t.both_correct)),
            cell(Some(&t.stated_gap)),
            t.reference_gap
        );
    }
}

/// The reliability bins; where a series has none (or no series has any), why.
fn reliability(out: &mut String, a: &Aggregate) {
    let gaps = crate::report::plots::reliability_gaps(a);
    if a.reliability.is_empty() && gaps.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "\n## Reliability (belief samples with a usable answer)\n"
    );
    if !gaps.is_empty() {
        let _ = writeln!(out, "{}\n", md(&gaps.join(" ")));
    }
    if a.reliability.is_empty() {
        return;
    }
    let _ = writeln!(
        out,
        "| model / condition | stated p(anomalous) bin | samples | mean stated | mean reference |\n|---|---|---|---|---|"
    );
    for b in &a.reliability {
        let _ = writeln!(
            out,
            "| {} | [{:.1}, {:.1}) | {} | {:.3} | {:.3} |",
            md(&series_label(&b.model, &b.condition)),
            b.lo,
            b.hi,
            b.count,
            b.mean_stated,
            b.mean_reference
        );
    }
}

/// Output-contract category counts per model / condition / task.
fn contract_categories(out: &mut String, a: &Aggregate) {
    let _ = writeln!(out, "\n## Output contract categories\n");
    let _ = writeln!(out, "| model / condition / task | valid | repaired | invalid | truncated |\n|---|---|---|---|---|");
    for (key, counts) in &a.categories {
        let n = |k: &str| counts.get(k).copied().unwrap_or(0);
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} |",
            md(key),
            n("valid"),
            n("repaired"),
            n("invalid"),
            n("truncated")
        );
    }
}
