//! `tables.tex`: the report's tables for a paper (booktabs), each figure with its 95%
//! interval and n.

use crate::report::tables::Table;
use runner_core::report::latex_text;
use std::fmt::Write as _;

/// A long column heading over two lines (a nested tabular: no package needed), split
/// at the space nearest its middle.
fn two_lines(h: &str) -> String {
    let mid = h.len() / 2;
    let split = h
        .match_indices(' ')
        .map(|(i, _)| i)
        .min_by_key(|i| i.abs_diff(mid));
    match split {
        Some(i) if h.chars().count() > 14 => format!(
            "\\begin{{tabular}}[b]{{@{{}}r@{{}}}}{}\\\\{}\\end{{tabular}}",
            latex_text(&h[..i]),
            latex_text(&h[i + 1..])
        ),
        _ => latex_text(h),
    }
}

/// One table as a LaTeX `table` environment.
pub fn table(t: &Table) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "\\begin{{table}}[t]\n\\centering\n\\scriptsize\n\\caption{{{}}}\n\\label{{tab:probe-{}}}\n\\begin{{tabular}}{{l{}}}\n\\toprule",
        latex_text(&t.caption),
        t.id,
        "r".repeat(t.columns.len())
    );
    let header: Vec<String> = std::iter::once(latex_text(&t.corner))
        .chain(t.columns.iter().map(|h| two_lines(h)))
        .collect();
    let _ = writeln!(s, "{} \\\\\n\\midrule", header.join(" & "));
    for row in &t.rows {
        let mut cells = vec![latex_text(&row.label)];
        cells.extend(row.cells.iter().map(|c| {
            c.estimate.map_or_else(
                || "--".to_string(),
                |e| {
                    format!(
                        "{:.3} {{\\tiny[{:.3}, {:.3}] {}}}",
                        e.mean, e.lo, e.hi, e.clusters
                    )
                },
            )
        }));
        let _ = writeln!(s, "{} \\\\", cells.join(" & "));
    }
    s.push_str("\\bottomrule\n\\end{tabular}\n\\end{table}\n");
    s
}

/// The whole file: a preamble comment naming the set, then every table.
pub fn document(set: &str, tables: &[Table]) -> String {
    let mut s = format!(
        "% Probe tables (needs \\usepackage{{booktabs}}). Set: {}\n% Each cell: estimate [95% CI] n items.\n\n",
        set.replace('\n', " ")
    );
    for t in tables {
        s.push_str(&table(t));
        s.push('\n');
    }
    s
}
