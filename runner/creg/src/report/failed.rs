//! The samples a run could not get (`failed.jsonl`: a served model's server refused the
//! prompt, or answered what cannot be read): how many, and why, grouped by reason. They
//! are in no figure; the reports say so only where there are any.

use crate::report::{escape, Provenance};
use runner_core::journal::failed::FAILED_FILE;
use runner_core::report::markdown_text as md;
use std::fmt::Write as _;

/// Reasons listed, most frequent first; the rest are counted.
const REASONS_SHOWN: usize = 20;
/// Samples named per reason.
const EXAMPLES: usize = 3;

/// The sentence that opens the section: the count and what it means, with `code`
/// marking up a file or command (the rest is plain text in either format).
fn lead(p: &Provenance, code: impl Fn(&str) -> String) -> String {
    let n = p.failed.len();
    format!(
        "{n} sample{s} of this run could not be had, however often asked, and {are} in no figure \
         (kept in {} beside the journal; {} asks for them again).",
        code(FAILED_FILE),
        code("runner run ... --retry-failed"),
        s = if n == 1 { "" } else { "s" },
        are = if n == 1 { "is" } else { "are" },
    )
}

/// A reason's example samples: `request r seed s`, the first few, then how many more.
fn examples(samples: &[(&str, u64)]) -> String {
    let mut out: Vec<String> = samples
        .iter()
        .take(EXAMPLES)
        .map(|(id, seed)| format!("request {id} seed {seed}"))
        .collect();
    if samples.len() > EXAMPLES {
        out.push(format!("and {} more", samples.len() - EXAMPLES));
    }
    out.join(", ")
}

/// `summary.md`'s section; empty when the run lost no sample.
pub fn markdown(p: &Provenance) -> String {
    let mut out = String::new();
    if let Some(e) = &p.failed_error {
        let _ = writeln!(
            out,
            "\n## Failed samples\n\n{FAILED_FILE} could not be read: {}",
            md(e)
        );
        return out;
    }
    if p.failed.is_empty() {
        return out;
    }
    let _ = writeln!(
        out,
        "\n## Failed samples\n\n{}\n",
        lead(p, |c| format!("`{c}`"))
    );
    let _ = writeln!(out, "| reason | samples | examples |\n|---|---|---|");
    let groups = p.failed_by_reason();
    for (why, samples) in groups.iter().take(REASONS_SHOWN) {
        let _ = writeln!(
            out,
            "| {} | {} | {} |",
            md(why),
            samples.len(),
            md(&examples(samples))
        );
    }
    if groups.len() > REASONS_SHOWN {
        let rest: usize = groups[REASONS_SHOWN..].iter().map(|g| g.1.len()).sum();
        let _ = writeln!(
            out,
            "\n{} more reasons, {rest} samples: see {FAILED_FILE}.",
            groups.len() - REASONS_SHOWN
        );
    }
    out
}

/// `report.html`'s section body; `None` when the run lost no sample.
pub fn html(p: &Provenance) -> Option<String> {
    if let Some(e) = &p.failed_error {
        return Some(format!(
            "<p class=\"note\">{FAILED_FILE} could not be read: {}</p>",
            escape(e)
        ));
    }
    if p.failed.is_empty() {
        return None;
    }
    let mut s = format!(
        "<p data-failed=\"{}\">{}</p><table class=\"figures text\"><thead><tr><th>reason</th><th>samples</th><th>examples</th></tr></thead><tbody>",
        p.failed.len(),
        lead(p, |c| format!("<code>{}</code>", escape(c)))
    );
    let groups = p.failed_by_reason();
    for (why, samples) in groups.iter().take(REASONS_SHOWN) {
        let _ = write!(
            s,
            "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(why),
            samples.len(),
            escape(&examples(samples))
        );
    }
    s.push_str("</tbody></table>");
    if groups.len() > REASONS_SHOWN {
        let rest: usize = groups[REASONS_SHOWN..].iter().map(|g| g.1.len()).sum();
        let _ = write!(
            s,
            "<p class=\"note\">{} more reasons, {rest} samples: see {FAILED_FILE}.</p>",
            groups.len() - REASONS_SHOWN
        );
    }
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use runner_core::journal::failed::Failure;

    fn provenance(failed: &[(&str, u64, &str)]) -> Provenance {
        let mut p = Provenance::new(None, None);
        p.failed = failed
            .iter()
            .map(|(id, seed, why)| Failure {
                request_id: id.to_string(),
                seed: *seed,
                reason: why.to_string(),
                identity_sha256: "x".into(),
            })
            .collect();
        p
    }

    #[test]
    fn no_failed_samples_no_section() {
        let p = provenance(&[]);
        assert_eq!(markdown(&p), "");
        assert_eq!(html(&p), None);
    }

    #[test]
    fn failed_samples_are_counted_and_grouped_by_reason() {
        let p = provenance(&[
            ("r1", 42, "lone surrogate <\\ud800>"),
            ("r2", 42, "body over 10 MB"),
            ("r3", 43, "body over 10 MB"),
            ("r4", 42, "body over 10 MB"),
            ("r5", 44, "body over 10 MB"),
        ]);
        let md = markdown(&p);
        assert!(md.contains("## Failed samples"), "{md}");
        assert!(
            md.contains("5 samples of this run could not be had"),
            "{md}"
        );
        // The most frequent reason first, with its count and the first three samples.
        let big = md.find("| body over 10 MB | 4 | request r2 seed 42, request r3 seed 43, request r4 seed 42, and 1 more |");
        let small = md.find("| lone surrogate \\<\\\\ud800\\> | 1 | request r1 seed 42 |");
        assert!(big.is_some() && small.is_some() && big < small, "{md}");
        let h = html(&p).unwrap();
        assert!(h.contains("data-failed=\"5\""), "{h}");
        assert!(h.contains("<td>body over 10 MB</td><td>4</td>"), "{h}");
        assert!(
            h.contains("lone surrogate &lt;\\ud800&gt;"),
            "markup escaped: {h}"
        );
    }

    #[test]
    fn an_unreadable_file_is_named_not_hidden() {
        let mut p = provenance(&[]);
        p.failed_error = Some("failed.jsonl:2: damaged".into());
        assert!(markdown(&p).contains("could not be read: failed.jsonl:2: damaged"));
        assert!(html(&p).unwrap().contains("could not be read"));
    }
}
