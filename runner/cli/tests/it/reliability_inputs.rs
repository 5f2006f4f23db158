//! Inputs an adversarial user can hand the runner (issue 30, finding 7): runs that
//! cannot be pooled, a misspelled key whose value is `null`, files saved with a UTF-8
//! byte-order mark, and model names carrying Markdown or HTML into `summary.md`.

use super::common::{ok, runner, s, scratch_dir as scratch, text};
use creg::score::aggregate::aggregate;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

const BOM: &str = "\u{feff}";

/// A small oracle run: belief prefixes of the first two scenarios of every regime.
fn oracle<'a>(out: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec![
        "--model", "oracle", "--tasks", "belief", "--limit", "2", "--quiet", "--out",
    ];
    v.push(s(out));
    v.extend_from_slice(extra);
    v
}

fn refused(args: &[&str]) -> String {
    let o = runner(args);
    assert!(!o.status.success(), "{args:?} should be refused");
    assert_eq!(o.status.code(), Some(2), "an error, not a crash");
    text(&o.stderr)
}

/// `runner suite check` on a file the loader accepts: the check may find the few
/// scenarios of a test file short of the acceptance table (exit 1), but reads them.
fn read_by_suite_check(file: &Path) -> String {
    let o = runner(&["suite", "check", s(file)]);
    assert!(
        matches!(o.status.code(), Some(0 | 1)),
        "{}: not read:\n{}",
        file.display(),
        text(&o.stderr)
    );
    text(&o.stdout)
}

/// Every file of a run folder but its lock, with its bytes.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_file() && e.file_name() != "run.lock")
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            (name, std::fs::read(e.path()).unwrap())
        })
        .collect()
}

/// Replaces each report of a run folder (everything but its journal, manifest, batch
/// figures and lock) with a marker, so that a rewrite shows even within one second.
fn mark_reports(dir: &Path) {
    for name in files(dir).keys() {
        if !name.starts_with("journal") && !name.starts_with("manifest") && name != "batches.json" {
            std::fs::write(dir.join(name), format!("marker {name}\n")).unwrap();
        }
    }
}

#[test]
fn runs_that_cannot_be_pooled_are_refused_before_any_report_is_rewritten() {
    let out = scratch("pool");
    ok(&oracle(&out, &["--run", "a"]));
    ok(&oracle(&out, &["--run", "b", "--seeds", "42,45"]));
    ok(&[
        "--suite",
        "probe",
        "--model",
        "oracle",
        "--limit",
        "1",
        "--quiet",
        "--out",
        s(&out),
        "--run",
        "p",
    ]);
    let (a, b) = (out.join("oracle").join("a"), out.join("oracle").join("b"));
    let p = out.join("oracle").join("p");
    for dir in [&a, &b, &p] {
        mark_reports(dir);
    }
    let before: Vec<_> = [&a, &b, &p].iter().map(|d| files(d)).collect();
    assert!(
        before[0].contains_key("summary.md"),
        "{:?}",
        before[0].keys()
    );
    let combined = out.join("combined");

    let err = refused(&["score", s(&a), s(&b), "--out", s(&combined)]);
    assert!(err.contains("would count twice"), "{err}");
    let err = refused(&["score", s(&a), s(&p), "--out", s(&combined)]);
    assert!(err.contains("cannot be scored together"), "{err}");

    let after: Vec<_> = [&a, &b, &p].iter().map(|d| files(d)).collect();
    for (dir, (was, now)) in [&a, &b, &p].iter().zip(before.iter().zip(&after)) {
        assert_eq!(
            was.keys().collect::<Vec<_>>(),
            now.keys().collect::<Vec<_>>(),
            "{}: no file added or removed",
            dir.display()
        );
        for (name, bytes) in was {
            assert!(
                &now[name] == bytes,
                "{}: {name} was rewritten by a refused score",
                dir.display()
            );
        }
    }
    assert!(!combined.exists(), "no combined folder");
    let _ = std::fs::remove_dir_all(&out);
}

/// The first `n` scenarios of the frozen suite, one a line.
fn frozen_lines(n: usize) -> Vec<String> {
    creg::frozen::FROZEN_JSONL
        .lines()
        .take(n)
        .map(String::from)
        .collect()
}

#[test]
fn a_misspelled_suite_key_is_refused_even_when_its_value_is_null() {
    let dir = scratch("null-key");
    let lines = frozen_lines(2);
    assert!(lines[1].contains("\"suite_seed\""));
    let misspelled = dir.join("null.jsonl");
    let bad = lines[1].replacen(
        "\"suite_seed\"",
        "\"generator_versoin\":null,\"suite_seed\"",
        1,
    );
    std::fs::write(&misspelled, format!("{}\n{bad}\n", lines[0])).unwrap();
    let err = refused(&["suite", "check", s(&misspelled)]);
    assert!(
        err.contains("null.jsonl:2: field `metadata.generator_versoin`: unknown field"),
        "{err}"
    );
    let err = refused(&oracle(&dir, &["--suite-file", s(&misspelled)]));
    assert!(err.contains("metadata.generator_versoin"), "{err}");

    // Known optional fields written as null are still accepted.
    let known = dir.join("known.jsonl");
    assert!(lines[1].contains("\"counterfactual_pair_id\":null"));
    let with_null = lines[1].replacen("\"case_index\":1", "\"case_index\":null", 1);
    assert_ne!(with_null, lines[1]);
    std::fs::write(&known, format!("{}\n{with_null}\n", lines[0])).unwrap();
    assert!(read_by_suite_check(&known).contains("2 scenarios"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_misspelled_probe_key_is_refused_even_when_its_value_is_null() {
    let dir = scratch("probe-null");
    ok(&["probe", "generate", "--out", s(&dir)]);
    let pit_file = dir.join("probe_pit.json");
    let mut items: Vec<Value> = serde_json::from_slice(&std::fs::read(&pit_file).unwrap()).unwrap();
    // The known optional field, written as null, reads as absent: accepted.
    items[0]["session_dates"] = Value::Null;
    let known = dir.join("known_pit.json");
    std::fs::write(&known, serde_json::to_string_pretty(&items).unwrap()).unwrap();
    ok(&["probe", "check", s(&known)]);
    // The same key misspelled, with the same null, is not.
    let first = items[0].as_object_mut().unwrap();
    first.remove("session_dates");
    first.insert("session_datez".into(), Value::Null);
    let bad = dir.join("bad_pit.json");
    std::fs::write(&bad, serde_json::to_string_pretty(&items).unwrap()).unwrap();
    let err = refused(&["probe", "check", s(&bad)]);
    assert!(
        err.contains("bad_pit.json:") && err.contains("field `session_datez`: unknown field"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn files_saved_with_a_byte_order_mark_are_read() {
    let dir = scratch("bom");
    let suite = dir.join("bom.jsonl");
    std::fs::write(&suite, format!("{BOM}{}\n", frozen_lines(3).join("\n"))).unwrap();
    assert!(read_by_suite_check(&suite).contains("3 scenarios"));
    ok(&oracle(&dir, &["--suite-file", s(&suite), "--run", "bom"]));

    ok(&["probe", "generate", "--out", s(&dir)]);
    for name in ["probe.json", "probe_pit.json"] {
        let plain = std::fs::read_to_string(dir.join(name)).unwrap();
        let marked = dir.join(format!("bom_{name}"));
        std::fs::write(&marked, format!("{BOM}{plain}")).unwrap();
        ok(&["probe", "check", s(&marked)]);
    }
    // A responses file with a mark, its first line naming an item.
    let items = probe::load::load_probe(&dir.join("probe.json")).unwrap();
    let responses = dir.join("responses.jsonl");
    let first = format!(
        "{{\"probe_id\": {:?}, \"pre\": \"x\"}}",
        items[0].probe_id.as_str()
    );
    std::fs::write(&responses, format!("{BOM}{first}\n")).unwrap();
    let marked = dir.join("bom_probe.json");
    ok(&["probe", "score", s(&marked), "--responses", s(&responses)]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A model name that would otherwise inject markup, a table cell and a heading.
const HOSTILE: &str = "m<img src=x onerror=alert(1)>|**b**_[l](http://x)`c`\n# h";

/// No raw markup of [`HOSTILE`] reaches the text.
#[track_caller]
fn assert_inert(md: &str) {
    assert!(!md.replace("\\<", "").contains('<'), "raw HTML in:\n{md}");
    assert!(!md.contains("**b**"), "raw emphasis in:\n{md}");
    assert!(!md.contains("[l](http"), "raw link in:\n{md}");
    assert!(
        !md.lines().any(|l| l.starts_with("# h")),
        "injected heading in:\n{md}"
    );
    for line in md
        .lines()
        .filter(|l| l.starts_with('|') && l.contains("onerror"))
    {
        assert!(!line.contains("m<"), "unescaped row: {line}");
    }
}

#[test]
fn model_names_carry_no_markup_into_summary_md() {
    let suite = creg::frozen::frozen_suite().unwrap();
    let mut samples = creg::baseline_run::run_suite(
        creg::baseline::System::Oracle,
        &suite[..20],
        &["full_graph".to_string()],
        &[42],
    )
    .unwrap();
    for sample in &mut samples {
        sample.model = HOSTILE.to_string();
    }
    let agg = aggregate(&samples, &suite[..20]);
    let mut provenance = creg::report::Provenance::new(None, None);
    provenance.runs.push(runner_core::report::provenance::RunSource {
        label: HOSTILE.to_string(),
        identity: serde_json::json!({"model": {"name": HOSTILE, "kind": "served", "served_model": HOSTILE}}),
        context: Value::Null,
        invocations: Vec::new(),
        invocations_error: None,
    });
    let md = creg::report::summary(&agg, &format!("creg: {HOSTILE}"), &provenance);
    assert_inert(&md);
    assert!(md.contains("onerror"), "the name is still shown:\n{md}");
    assert!(md.contains("- run m\\<img"), "the run is named:\n{md}");
    // Each table row keeps its columns: the name's `|` does not open a cell.
    let lines: Vec<&str> = md.lines().collect();
    let is_rule = |l: &str| l.starts_with("|---") || l.starts_with("| ---");
    for (i, line) in lines.iter().enumerate() {
        if line.starts_with('|') && line.contains("onerror") {
            // A header has its rule below; a row, above.
            let rule = if lines.get(i + 1).is_some_and(|l| is_rule(l)) {
                lines.get(i + 1)
            } else {
                lines[..i].iter().rev().find(|l| is_rule(l))
            };
            let columns = rule.unwrap().matches('|').count();
            assert_eq!(
                line.replace("\\|", "").matches('|').count(),
                columns,
                "{line}"
            );
        }
    }

    let items = probe::generator::generate_probe();
    let answers: Vec<_> = items
        .iter()
        .map(|i| probe::baseline::System::Oracle.answer_probe(i))
        .collect();
    let pairs: Vec<_> = items.iter().zip(&answers).collect();
    let core = probe::score::score_probe(HOSTILE, &pairs);
    let pit_items = probe::generator::generate_pit();
    let pit_answers: Vec<_> = pit_items
        .iter()
        .map(|i| probe::baseline::System::Oracle.answer_pit(i))
        .collect();
    let pit_pairs: Vec<_> = pit_items.iter().zip(&pit_answers).collect();
    let pit = probe::score::score_pit(HOSTILE, &pit_pairs);
    let comparison = probe::score::compare_probe((HOSTILE, &pairs), ("oracle", &pairs));
    let report = probe::score::files::RunReport::new(
        &format!("probe: {HOSTILE}"),
        vec![probe::score::files::SystemReport {
            system: HOSTILE.to_string(),
            probe: Some(core),
            pit: Some(pit),
            unanswered: 1,
        }],
        vec![comparison],
    );
    let md = report.summary();
    assert_inert(&md);
    assert!(md.contains("onerror"), "the name is still shown:\n{md}");
}
