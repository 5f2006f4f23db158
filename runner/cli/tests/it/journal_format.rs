//! Journals in the format runs write today (December 2026), copied from an oracle run of
//! each suite with its manifest: one JSON object per sample with `request_id`, `seed`,
//! the suite's `scenario`, `condition`, `task` and `step`, `prompt_sha256`, `text`,
//! `tokens`, `finish_reason`, the timings, `scores` and `identity_sha256`. Whatever the
//! journal's types become, such a journal must resume (nothing generated again, nothing
//! appended) and rescore. The files are kept as written then (a run's `context` aside:
//! its command and start time): do not regenerate them when the format changes.

use crate::common::{crate_dir, ok};
use std::path::PathBuf;

/// The stored run of `suite` copied to `<out>/oracle/<folder>`, where a run with the
/// same arguments finds it.
fn stored_run(suite: &str, folder: &str, test: &str) -> (PathBuf, PathBuf) {
    let from = crate_dir().join("tests/data/journals-2026-12").join(suite);
    let out = std::env::temp_dir().join(format!("journal-format-{test}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&out);
    let dir = out.join("oracle").join(folder);
    std::fs::create_dir_all(&dir).unwrap();
    for f in ["manifest.json", "journal.jsonl"] {
        std::fs::copy(from.join(f), dir.join(f)).unwrap();
    }
    (out, dir)
}

fn resumes_and_rescores(suite: &str, folder: &str, args: &[&str], samples: usize) {
    let (out, dir) = stored_run(suite, folder, suite);
    let journal = std::fs::read(dir.join("journal.jsonl")).unwrap();
    assert_eq!(journal.iter().filter(|&&b| b == b'\n').count(), samples);
    let mut all = args.to_vec();
    all.extend([
        "--model", "oracle", "--limit", "1", "--seeds", "42", "--quiet",
    ]);
    all.extend(["--out", out.to_str().unwrap()]);
    let run = ok(&all);
    let said = String::from_utf8_lossy(&run.stdout);
    assert!(
        said.contains(&format!(
            "{samples} samples (0 generated now, {samples} resumed from the journal)"
        )),
        "{said}"
    );
    assert_eq!(std::fs::read(dir.join("journal.jsonl")).unwrap(), journal);
    let scored = ok(&["score", dir.to_str().unwrap()]);
    let said = String::from_utf8_lossy(&scored.stdout) + String::from_utf8_lossy(&scored.stderr);
    assert!(
        said.contains(&format!("{samples} samples rescored")),
        "{said}"
    );
    assert!(dir.join("summary.md").is_file() && dir.join("report.html").is_file());
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn a_creg_journal_of_today_resumes_without_generating_and_rescores() {
    resumes_and_rescores("creg", "creg-v1.0", &["--condition", "canonical_json"], 44);
}

#[test]
fn a_probe_journal_of_today_resumes_without_generating_and_rescores() {
    resumes_and_rescores("probe", "probe", &["--suite", "probe"], 15);
}
