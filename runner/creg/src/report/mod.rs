//! Reports under a run's folder: `scores.json` (every figure), `summary.md` (tables to
//! paste, with provenance), `tables.tex` (booktabs tables for a paper), `scores.csv`
//! (long format), SVG plots with axes (reliability diagram, per-regime bars with
//! intervals, a forest plot of the condition contrasts) and `report.html`: one
//! self-contained page with all of it and a browser over every sample.

pub mod browser;
pub mod failed;
#[cfg(test)]
mod honest_tests;
pub mod html;
pub mod plots;
pub mod samples;
pub mod summary;
pub mod tables;
#[cfg(test)]
mod tests;

pub use runner_core::report::{escape, write_atomic, Provenance};
pub use runner_core::report::{Browser, BrowserSample};
pub use summary::summary;
pub use tables::{csv, tex};

use crate::record::Regime;
use crate::score::aggregate::{Aggregate, Contrast, ALL_TASKS, CONTRACT_FAILURE};
use runner_core::stats::bootstrap::Estimate;
use std::path::{Path, PathBuf};

/// The headline columns: (task, metric, label). The contract-fail column pools every
/// task of the run: an endpoint-only run has no belief task to take it from. The
/// belief-derived contradiction column and the contradiction task's stand side by side
/// (see [`HEADLINE_NOTE`]).
pub const HEADLINE: [(&str, &str, &str); 13] = [
    ("belief", "top_state_accuracy", "top state"),
    ("belief", "abs_error", "abs error"),
    ("belief", "brier", "Brier"),
    ("belief", "supporting_f1", "support F1"),
    ("belief", "leakage", "leakage"),
    ("belief", "contradiction_detection", "contra. det."),
    ("contradiction", "detection", "contradiction task"),
    ("contradiction", "localization", "contradiction task loc."),
    ("action", "exact_match", "action exact"),
    ("action", "admissible", "admissible"),
    ("action", "unsafe", "unsafe"),
    ("explanation", "grounded", "grounded expl."),
    (ALL_TASKS, CONTRACT_FAILURE, "contract fail (all tasks)"),
];

/// Under the headline wherever it is shown: which samples each contradiction column and
/// support F1 are computed from.
pub const HEADLINE_NOTE: &str = "contra. det. is computed from the belief samples (every prefix): a hit is an active contradiction listed where the reference has one, or an empty list where it has none, so true negatives make up most of it; an entry naming fewer than two evidence ids is not a detection. contradiction task is the contradiction endpoint task's detection (contradiction_present against the reference), over its own samples, one per scenario; contradiction task loc. its localization (the involved ids exactly the reference's), over the scenarios whose reference has a contradiction record; each with its answered count. support F1 scores the ids an answer attributes to the reference's top state (its supporting ids if it states that state, its contradicting ids if it states the other) against the reference's supporting evidence.";

/// Belief-revision and calibration columns (belief task): (metric, label).
pub const REVISION: [(&str, &str); 5] = [
    ("direction_accuracy", "direction"),
    ("justified_revision", "justified revision"),
    ("unnecessary_update", "unnecessary update"),
    ("all_prefixes_correct", "all prefixes correct"),
    ("log_loss", "log loss"),
];

/// Beside log loss wherever it is shown: what its floor is, so that the oracle's figure
/// (which is not 0) reads right.
pub const LOG_LOSS_NOTE: &str = "Log loss is the cross-entropy of the stated p(anomalous) p against the reference probability q (not a 0/1 outcome): −[q·ln p + (1−q)·ln(1−p)]. Its floor, reached at p = q, is the reference's own entropy, not 0: the oracle, which states q exactly, scores that floor.";

/// The note that marks exploratory results, as the CREG description does: the Gemma
/// runs outside canonical JSON were not preregistered.
pub const EXPLORATORY_NOTE: &str =
    "† exploratory: Gemma outside canonical JSON was not preregistered; the conclusions do not rest on it.";

/// Whether the CREG description counts a (model, condition) as exploratory.
pub fn exploratory(model: &str, condition: &str) -> bool {
    model.to_ascii_lowercase().contains("gemma") && condition != "canonical_json"
}

/// `model / condition`, with the exploratory mark where it applies.
pub fn series_label(model: &str, condition: &str) -> String {
    let mark = if exploratory(model, condition) {
        " †"
    } else {
        ""
    };
    format!("{model} / {condition}{mark}")
}

/// `mean [lo, hi]` to three decimals, or a dash.
pub fn cell(e: Option<&Estimate>) -> String {
    e.map_or_else(
        || "–".to_string(),
        |e| format!("{:.3} [{:.3}, {:.3}]", e.mean, e.lo, e.hi),
    )
}

/// What a figure rests on: how many of its samples kept the output contract. The others
/// are scored on stand-in answers, which read as perfect on some metrics (no leakage,
/// no unsafe action), so no figure is shown without it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Basis {
    pub answered: usize,
    pub total: usize,
    /// The figure is the contract-failure rate itself, over every sample.
    pub contract: bool,
}

impl Basis {
    /// The basis of `metric` in one cell; `None` where the cell has no sample.
    pub fn of(
        a: &Aggregate,
        (model, condition): (&str, &str),
        task: &str,
        metric: &str,
        regime: Option<Regime>,
    ) -> Option<Basis> {
        a.answered(model, condition, task, regime).map(|n| Basis {
            answered: n.answered,
            total: n.total,
            contract: metric == CONTRACT_FAILURE,
        })
    }

    /// Every figure of the cell is a stand-in's: it is not shown.
    pub fn stand_ins_only(&self) -> bool {
        !self.contract && self.total > 0 && self.answered == 0
    }

    /// `4 of 7 answered`, or `n = 7` for the contract-failure rate.
    pub fn note(&self) -> String {
        if self.contract {
            format!("n = {}", self.total)
        } else {
            format!("{} of {} answered", self.answered, self.total)
        }
    }
}

/// `mean [lo, hi] (4 of 7 answered)`; a dash with the count where nothing was answered.
pub fn cell_on(e: Option<&Estimate>, basis: Option<Basis>) -> String {
    match (e, basis) {
        (_, Some(b)) if b.stand_ins_only() => format!("– ({})", b.note()),
        (Some(_), Some(b)) => format!("{} ({})", cell(e), b.note()),
        _ => cell(e),
    }
}

/// How many samples answered under each condition of a contrast: `0 of 23 vs 7 of 23`.
pub fn contrast_answered(a: &Aggregate, k: &Contrast) -> String {
    let n = |c: &str| {
        a.answered(&k.model, c, k.task, None).map_or_else(
            || "–".to_string(),
            |n| format!("{} of {}", n.answered, n.total),
        )
    };
    format!("{} vs {}", n(&k.condition), n(&k.baseline_condition))
}

/// Every (model, condition) with an estimate, sorted.
pub fn models_conditions(a: &Aggregate) -> Vec<(String, String)> {
    let set: std::collections::BTreeSet<(String, String)> = a
        .estimates
        .iter()
        .map(|e| (e.cell.model.clone(), e.cell.condition.clone()))
        .collect();
    set.into_iter().collect()
}

/// The contrasts, each once: the aggregate computes every condition against
/// `full_graph` and also `full_graph` against `graph_without_relations`, so that pair
/// would appear twice with the sign flipped. The relation-content direction
/// (`full_graph − graph_without_relations`) is the one kept.
pub fn distinct_contrasts(a: &Aggregate) -> Vec<&Contrast> {
    a.contrasts
        .iter()
        .filter(|k| {
            !(k.baseline_condition == "full_graph"
                && a.contrasts.iter().any(|o| {
                    o.model == k.model
                        && o.task == k.task
                        && o.metric == k.metric
                        && o.condition == k.baseline_condition
                        && o.baseline_condition == k.condition
                }))
        })
        .collect()
}

/// What a report is of besides its figures.
pub struct ReportInputs<'a> {
    pub title: &'a str,
    pub provenance: &'a Provenance,
    /// The samples behind the figures, for the HTML's sample browser.
    pub browser: Option<&'a Browser>,
}

/// Writes every report into `dir` and returns the paths written.
pub fn write_reports(
    dir: &Path,
    a: &Aggregate,
    inputs: &ReportInputs,
) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let title = inputs.title;
    let files = [
        (
            "scores.json",
            serde_json::to_string_pretty(a).map_err(std::io::Error::other)?,
        ),
        (
            "summary.md",
            summary(a, title, inputs.provenance) + &failed::markdown(inputs.provenance),
        ),
        ("tables.tex", tex(a, title)),
        ("scores.csv", csv(a)),
        ("reliability.svg", plots::reliability(a)),
        (
            "regimes.svg",
            plots::regime_bars(a, "belief", "top_state_accuracy", "top-state accuracy"),
        ),
        (
            "contrasts.svg",
            plots::forest(a, "belief", "top_state_accuracy"),
        ),
        ("report.html", html::creg_page(a, inputs)?),
    ];
    let mut written = Vec::new();
    for (name, body) in files {
        written.push(write_atomic(dir, name, body.as_bytes())?);
    }
    // The samples behind the figures, where the report has them (a run's or a rescore's;
    // a baseline scored without the run loop has none).
    if let Some(b) = inputs.browser {
        let body = samples::jsonl(b)?;
        written.push(write_atomic(dir, samples::SAMPLES_JSONL, body.as_bytes())?);
    }
    Ok(written)
}

/// The samples behind a contrast: both conditions' samples of its model and task.
pub fn contrast_href(k: &Contrast) -> String {
    runner_core::report::samples_href(&[
        ("model", &k.model),
        ("task", k.task),
        ("condition", &k.condition),
        ("condition", &k.baseline_condition),
    ])
}
