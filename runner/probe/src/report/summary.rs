//! `summary.md`: the report's results in Markdown, from the same tables as `report.html`
//! and `tables.tex` (so the three cannot drift): the set run, the headline with a
//! one-line definition of each measure, accuracy by hop, declining and marking, the
//! breakdowns by domain and design axis, the point-in-time queries and the comparisons.
//! Names a user chose (title, set, systems) are written as text, never as markup.

use crate::report::html::split;
use crate::report::tables::{self, Table, TextTable};
use crate::report::words::{set_kind, AXES, HEADLINE, PIT_NOTE};
use crate::score::compare::fmt_p;
use crate::score::RunReport;
use runner_core::report::markdown_text as md;
use runner_engine::batch::UTILIZATION_MEANING;
use std::fmt::Write as _;

/// One table in Markdown: a bold caption, then each cell as `mean [lo, hi] n N`.
pub fn table_md(t: &Table) -> String {
    let mut s = format!("**{}**\n\n", md(&t.caption));
    let header: Vec<String> = std::iter::once(md(&t.corner))
        .chain(t.columns.iter().map(|c| md(c)))
        .collect();
    let _ = writeln!(s, "| {} |", header.join(" | "));
    let _ = writeln!(s, "|{}", " --- |".repeat(header.len()));
    for row in &t.rows {
        let mut cells = vec![md(&row.label)];
        cells.extend(row.cells.iter().map(|c| {
            c.estimate.map_or_else(
                || "\u{2013}".to_string(),
                |e| format!("{:.3} [{:.3}, {:.3}] n {}", e.mean, e.lo, e.hi, e.clusters),
            )
        }));
        let _ = writeln!(s, "| {} |", cells.join(" | "));
    }
    s
}

/// A table of figures already written as text: the row labels escaped, the headings
/// and figures as they are.
pub fn text_table_md(t: &TextTable) -> String {
    let mut s = format!("| {} | {} |\n|", t.corner, t.columns.join(" | "));
    s.push_str(&" --- |".repeat(t.columns.len() + 1));
    s.push('\n');
    for (label, cells) in &t.rows {
        let _ = writeln!(s, "| {} | {} |", md(label), cells.join(" | "));
    }
    s
}

fn definitions(s: &mut String, items: impl IntoIterator<Item = (String, String)>) {
    for (name, definition) in items {
        let _ = writeln!(s, "- **{}**: {}", md(&name), md(&definition));
    }
    s.push('\n');
}

/// The whole of `summary.md`.
pub fn summary(report: &RunReport) -> String {
    let (core, pit) = split(report);
    let mut s = String::new();
    let _ = writeln!(s, "# {}\n", md(&report.title));
    match &report.set {
        Some(set) => {
            let _ = writeln!(
                s,
                "**Set run: {}.** {}\n",
                set_kind(set.kind),
                md(&set.description)
            );
        }
        None => s.push_str("**Set run: not recorded.**\n\n"),
    }
    s.push_str("Intervals: 95%, bootstrap clustered by item; n counts items (seeds of an item are pooled within it).\n\n");
    if let Some(u) = &report.batch_utilization {
        let _ = writeln!(s, "Batch utilization ({UTILIZATION_MEANING}): {u}.\n");
    }
    for sys in &report.systems {
        if sys.unanswered > 0 {
            let _ = writeln!(
                s,
                "Note: {}: {} questions of started items have no journaled answer and are scored as empty answers.\n",
                md(&sys.system),
                sys.unanswered
            );
        }
    }
    s.push_str("## Headline\n\n");
    if core.is_empty() {
        s.push_str("No core items were run.\n\n");
    } else {
        s.push_str(&table_md(&tables::headline(&core)));
        s.push('\n');
        definitions(
            &mut s,
            HEADLINE
                .iter()
                .map(|m| (m.name.to_string(), m.definition.to_string())),
        );
        s.push_str("## By hop depth\n\n");
        s.push_str(&table_md(&tables::hops(&core)));
        s.push('\n');
        let mut parts = Vec::new();
        for (label, p) in &core {
            for (arm, t) in &p.depth_trend {
                parts.push(match t {
                    Some(t) => format!(
                        "{}, {arm} facts: z = {:.2}, p = {}",
                        md(label),
                        t.z,
                        fmt_p(t.p_value)
                    ),
                    None => format!("{}, {arm} facts: undefined (no variation)", md(label)),
                });
            }
        }
        if !parts.is_empty() {
            let _ = writeln!(
                s,
                "Depth trend of accuracy after the change (Cochran\u{2013}Armitage on item means): {}.\n",
                parts.join("; ")
            );
        }
        s.push_str("## Declining and marking\n\n");
        s.push_str(&table_md(&tables::abstention_invalidation(&core)));
        s.push_str("\n## By domain and design axis\n\n");
        for t in tables::breakdowns(&core) {
            s.push_str(&table_md(&t));
            s.push('\n');
        }
        definitions(
            &mut s,
            AXES.iter().map(|(_, h, d)| (h.to_string(), d.to_string())),
        );
    }
    if !pit.is_empty() {
        let _ = write!(s, "## Point in time\n\n{PIT_NOTE}\n\n");
        s.push_str(&table_md(&tables::pit(&pit)));
        s.push('\n');
        s.push_str(&text_table_md(&tables::pit_leaks(&pit)));
        s.push('\n');
    }
    if let Some(t) = tables::comparisons(report) {
        s.push_str("## Comparisons\n\n");
        s.push_str(&text_table_md(&t));
        let _ = writeln!(s, "\n{}", tables::COMPARISON_NOTE);
    }
    s
}

impl RunReport {
    /// `summary.md`: the report's tables with their plain names, the set run at the
    /// top (see [`summary`]).
    pub fn summary(&self) -> String {
        summary(self)
    }
}
