//! What the report calls each measure and each breakdown cell, in plain words, with a
//! one-line definition. No key of `scores.json` is shown to a reader.

use crate::score::ProbeReport;
use runner_core::stats::bootstrap::Estimate;

/// One measure of the headline table.
pub struct Measure {
    /// Column name.
    pub name: &'static str,
    /// One line: what it is, over which questions.
    pub definition: &'static str,
    /// Where the figure is in a system's entry of `scores.json`.
    pub path: &'static str,
    /// The figure in a system's core report.
    pub get: fn(&ProbeReport) -> Option<Estimate>,
}

/// The headline table's measures, in column order.
pub const HEADLINE: [Measure; 9] = [
    Measure {
        name: "Accuracy before the change",
        definition: "Share of questions answered right before the final, contradicting turn: is the chain understood at all?",
        path: "probe/pre_acc",
        get: |p| p.pre_acc,
    },
    Measure {
        name: "Accuracy after the change",
        definition: "Share answered right after the final turn: the new value, or \u{201c}unknown\u{201d} where the turn removed the basis for any value. The primary score.",
        path: "probe/post_acc",
        get: |p| p.post_acc,
    },
    Measure {
        name: "After, when right before",
        definition: "Accuracy after the change over the questions answered right before it: failing here is failing to carry the change down the chain.",
        path: "probe/post_acc_given_pre",
        get: |p| p.post_acc_given_pre,
    },
    Measure {
        name: "Stale answers",
        definition: "Share of answers after the change that still give the answer from before it (lower is better).",
        path: "probe/stale_rate",
        get: |p| p.stale_rate,
    },
    Measure {
        name: "Declines when it should",
        definition: "Over the questions whose right answer after the change is \u{201c}unknown\u{201d}: share where the model declines to name a value.",
        path: "probe/intervals/abstention_recall",
        get: |p| p.intervals.abstention_recall,
    },
    Measure {
        name: "Declines wrongly",
        definition: "Over the questions whose right answer after the change is a value: share where the model declines anyway (lower is better).",
        path: "probe/intervals/over_abstention",
        get: |p| p.intervals.over_abstention,
    },
    Measure {
        name: "Marks what the change made untrue",
        definition: "Follow-up question: per item, the share of the statements the final turn made untrue that the model marks as no longer current.",
        path: "probe/intervals/invalidation_recall",
        get: |p| p.intervals.invalidation_recall,
    },
    Measure {
        name: "Tells update from correction",
        definition: "Follow-up question: share naming the final turn right as an update (the world changed) or a correction (the earlier statement was wrong).",
        path: "probe/intervals/axis_acc",
        get: |p| p.intervals.axis_acc,
    },
    Measure {
        name: "Unusable replies",
        definition: "Share of answers, before and after the change, that give no answer at all: no words, the prompt or the conversation repeated, invented turns, or nothing said about the question (lower is better). They count as wrong in every accuracy.",
        path: "probe/unusable_rate",
        get: |p| p.unusable_rate,
    },
];

/// A design axis of the items: (breakdown key in `scores.json`, heading, definition).
pub const AXES: [(&str, &str, &str); 5] = [
    (
        "axis",
        "Kind of change",
        "Update: the world changed since the earlier statement. Correction: the earlier statement was wrong.",
    ),
    (
        "contradicted",
        "What the change contradicts",
        "Asserted: the change hits the fact the user stated at the root, so the asked conclusion, hops away, loses its basis. Derived: the change overrides the asked conclusion itself, a fact that took that many hops to derive.",
    ),
    (
        "density",
        "Distance of the change",
        "Adjacent: the chain's statements in one session, the change in the next. Distant: each statement in its own session, off-topic sessions between, the change last.",
    ),
    (
        "confidence",
        "How the change is stated",
        "High: the root fact stated plainly. Hedged: the root stated with doubt (\u{201c}I think\u{2026}\u{201d}); the right answers are the same.",
    ),
    (
        "asserted_hop1",
        "One-hop asserted changes",
        "Replacement: the change names a new value. Withdrawal: it only takes the old one back (the right answer becomes \u{201c}unknown\u{201d}).",
    ),
];

/// A cell label of a breakdown, as a reader reads it.
pub fn cell(label: &str) -> String {
    match label {
        "adjacent" => "adjacent sessions".into(),
        "distant" => "distant sessions".into(),
        "high" => "stated plainly".into(),
        "hedged" => "hedged".into(),
        "update" => "update".into(),
        "correction" => "correction".into(),
        "asserted" => "asserted fact".into(),
        "derived" => "derived fact".into(),
        "unknown" => "right answer \u{201c}unknown\u{201d}".into(),
        "value" => "right answer a value".into(),
        "before_any_fact" => "before any fact".into(),
        "after_first_fact" => "after the first fact".into(),
        "after_second_fact" => "after the second fact".into(),
        "double_update" => "two updates".into(),
        "correction_then_update" => "a correction, then an update".into(),
        other => other.replace('_', " "),
    }
}

/// An estimate as `0.750 [0.600, 0.900]`, or a dash.
pub fn estimate(e: Option<&Estimate>) -> String {
    e.map_or_else(
        || "\u{2013}".to_string(),
        |e| format!("{:.3} [{:.3}, {:.3}]", e.mean, e.lo, e.hi),
    )
}

/// What the point-in-time section says first, on the page and in `summary.md`.
pub const PIT_NOTE: &str = "Exploratory: the point-in-time set is not human-validated, and has two items per domain and distance.";

/// The point-in-time leak measures: (key in `scores.json`, name).
pub const PIT_MEASURES: [(&str, &str); 3] = [
    ("retracted_leak", "Gives the corrected-away value"),
    ("current_state_leak", "Gives today's value for a past date"),
    ("item_all_correct", "All three dates right"),
];

/// Which set was run, in words.
pub fn set_kind(kind: crate::provenance::SetKind) -> &'static str {
    match kind {
        crate::provenance::SetKind::Published => "the published set",
        crate::provenance::SetKind::Generated => "the generated set",
        crate::provenance::SetKind::UserFile => "a user's file",
    }
}

/// The heading of breakdown `name` of the core report.
pub fn breakdown_heading(name: &str) -> String {
    match name {
        "domain" => "Domain".into(),
        "hop_depth" => "Hop depth".into(),
        "hop_x_contradicted" => "Hop depth and fact contradicted".into(),
        _ => AXES
            .iter()
            .find(|(key, _, _)| *key == name)
            .map_or_else(|| cell(name), |(_, heading, _)| heading.to_string()),
    }
}

/// The plain name of a row of `scores.csv` (its `label` column), from the row's
/// machine keys: set (`probe` or `pit`), table and cell.
pub fn csv_label(set: &str, table: &str, key: &str) -> String {
    let metric = |key: &str| -> Option<&'static str> {
        let headline = HEADLINE
            .iter()
            .find(|m| m.path.rsplit('/').next() == Some(key))
            .map(|m| m.name);
        headline.or(match key {
            "post_em" => Some("Exact match after the change"),
            "post_acc_majority" => Some("Accuracy after the change, majority over seeds"),
            "abstention_precision" => Some("Right to decline, when it declines"),
            "abstention_f1" => Some("Declining, F1"),
            _ => PIT_MEASURES
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, name)| *name),
        })
    };
    match (set, table) {
        (_, "metric") => metric(key).map_or_else(|| cell(key), str::to_string),
        ("probe", "post_outcome") => format!("Answers after the change: {}", cell(key)),
        ("pit", "label") => format!("Point in time: {}", cell(key)),
        ("pit", "scenario_label") => match key.split_once(' ') {
            Some((history, label)) => {
                format!("Point in time: {}, {}", cell(history), cell(label))
            }
            None => format!("Point in time: {}", cell(key)),
        },
        (_, name) => format!("{}: {}", breakdown_heading(name), cell(key)),
    }
}
