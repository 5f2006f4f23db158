//! `runner --suite probe` end to end through the runner binary: the baselines as
//! backends, the journal, resume, rescoring, shards and the published v0 file (read
//! from `../shared` and skipped when that is absent).

use super::common::{journal, json, ok, runner, scratch};
use serde_json::Value;
use std::path::Path;
use std::process::Output;

/// 168 core items asked before and after the final turn, 24 PIT queries, 3 seeds.
const SAMPLES: usize = (3 * 168 + 24) * 3;

fn run_probe(model: &str, out: &Path, extra: &[&str]) -> Output {
    let mut args = vec![
        "--suite",
        "probe",
        "--model",
        model,
        "--out",
        out.to_str().unwrap(),
        "--quiet",
    ];
    args.extend_from_slice(extra);
    ok(&args)
}

fn mean(v: &Value, pointer: &str) -> f64 {
    v.pointer(pointer)
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("no number at {pointer}"))
}

/// Every headline figure and every breakdown cell of a core report is perfect.
fn assert_core_perfect(probe: &Value) {
    for m in ["pre_acc", "post_acc", "post_em", "post_acc_given_pre"] {
        assert_eq!(mean(probe, &format!("/{m}/mean")), 1.0, "{m}");
    }
    assert_eq!(mean(probe, "/stale_rate/mean"), 0.0);
    assert_eq!(mean(probe, "/abstention/recall"), 1.0);
    assert_eq!(mean(probe, "/abstention/precision"), 1.0);
    // The follow-up: every invalidation and every axis right, no contract failure.
    for m in [
        "micro_recall",
        "macro_recall",
        "micro_precision",
        "macro_precision",
    ] {
        assert_eq!(mean(probe, &format!("/invalidation/{m}")), 1.0, "{m}");
    }
    assert_eq!(mean(probe, "/invalidation/over_invalidation"), 0.0);
    assert_eq!(mean(probe, "/axis_acc"), 1.0);
    assert_eq!(probe["followup_contract_failures"], 0);
    for (table, cells) in probe["propagation"].as_object().unwrap() {
        for (cell, e) in cells.as_object().unwrap() {
            assert_eq!(e["mean"].as_f64(), Some(1.0), "propagation {table} {cell}");
        }
    }
    let by = probe["by"].as_object().unwrap();
    assert!(by.len() > 5);
    for (table, cells) in by {
        for (cell, e) in cells.as_object().unwrap() {
            assert_eq!(e["mean"].as_f64(), Some(1.0), "{table} {cell}");
        }
    }
}

#[test]
fn oracle_run_writes_manifest_journal_and_perfect_reports() {
    let out = scratch("oracle");
    let o = run_probe("oracle", &out, &[]);
    let dir = out.join("oracle").join("probe");
    let manifest = json(&dir.join("manifest.json"));
    assert_eq!(
        manifest.pointer("/identity/suite/name"),
        Some(&"probe".into())
    );
    assert_eq!(
        manifest.pointer("/identity/suite/family"),
        Some(&"probe".into())
    );
    assert_eq!(
        manifest.pointer("/identity/suite/probe/items"),
        Some(&168.into())
    );
    assert_eq!(
        manifest.pointer("/identity/model/name"),
        Some(&"oracle".into())
    );

    let lines = journal(&dir);
    assert_eq!(lines.len(), SAMPLES);
    for l in &lines {
        assert_eq!(l["scores"]["correct"], true, "{l}");
    }
    let conditions: Vec<&str> = lines
        .iter()
        .map(|l| l["condition"].as_str().unwrap())
        .collect();
    assert_eq!(
        conditions.iter().filter(|c| **c == "conversation").count(),
        3 * 168 * 3
    );
    assert_eq!(
        conditions.iter().filter(|c| **c == "point-in-time").count(),
        24 * 3
    );

    let scores = json(&dir.join("scores.json"));
    let system = &scores["systems"][0];
    assert_eq!(system["system"], "oracle");
    assert_eq!(system["unanswered"], 0);
    assert_eq!(system["probe"]["items"], 168);
    assert_eq!(system["probe"]["samples"], 168 * 3);
    assert_core_perfect(&system["probe"]);
    let pit = &system["pit"];
    assert_eq!(pit["n_queries"], 24 * 3);
    assert_eq!(mean(pit, "/item_all_correct"), 1.0);
    assert_eq!(mean(pit, "/retracted_leak"), 0.0);
    for (label, e) in pit["by_label"].as_object().unwrap() {
        assert_eq!(e["mean"].as_f64(), Some(1.0), "{label}");
    }

    assert_eq!(scores["set"]["kind"], "generated");
    assert_eq!(scores["set"]["human_validated"], false);
    let summary = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(summary.starts_with("# probe: oracle\n"), "{summary}");
    assert!(summary.contains("NOT human-validated"), "{summary}");
    assert!(
        !summary.contains("Batch utilization"),
        "the oracle has no decode batch: {summary}"
    );
    assert!(
        summary.contains("**Set run: the generated set.**"),
        "{summary}"
    );
    assert!(
        summary.contains("| system | Accuracy before the change | Accuracy after the change |"),
        "{summary}"
    );
    assert!(
        summary.contains("| oracle | 1.000 [1.000, 1.000] n 168 | 1.000 [1.000, 1.000] n 168 |"),
        "{summary}"
    );
    assert!(!summary.contains("post_acc"), "{summary}");
    let csv = std::fs::read_to_string(dir.join("scores.csv")).unwrap();
    assert!(csv.starts_with("system,set,table,cell,n,mean,lo,hi,label\n"));
    assert!(
        csv.contains("oracle,probe,metric,post_acc,168,1,1,1,Accuracy after the change\n"),
        "{csv}"
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains(&format!(
        "{SAMPLES} samples ({SAMPLES} generated now, 0 resumed"
    )));
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn no_propagation_run_fails_derived_and_multi_hop_cells_and_passes_hop1_asserted() {
    let out = scratch("noprop");
    run_probe("no-propagation", &out, &[]);
    let dir = out.join("no-propagation").join("probe");
    let scores = json(&dir.join("scores.json"));
    let probe = &scores["systems"][0]["probe"];
    let cells = probe["by"]["hop_x_contradicted"].as_object().unwrap();
    assert_eq!(
        cells.len(),
        7,
        "hop 1 asserted, hops 2-4 x asserted/derived"
    );
    for (cell, e) in cells {
        let acc = e["mean"].as_f64().unwrap();
        if cell == "1 asserted" {
            // Right on the 20 replacements, stale on the 4 training withdrawals.
            assert!((acc - 20.0 / 24.0).abs() < 1e-12, "{cell}: {acc}");
        } else {
            assert_eq!(acc, 0.0, "{cell}: derived and multi-hop cells fail");
        }
    }
    assert_eq!(mean(probe, "/by/asserted_hop1/replacement/mean"), 1.0);
    assert_eq!(mean(probe, "/by/asserted_hop1/withdrawal/mean"), 0.0);
    assert_eq!(
        mean(probe, "/pre_acc/mean"),
        1.0,
        "the stated chain is remembered"
    );
    // Every wrong post answer is the stale value.
    let stale = probe["outcomes"]["stale"].as_u64().unwrap() as usize;
    let correct = probe["outcomes"]["correct"].as_u64().unwrap() as usize;
    assert_eq!((correct, stale), (20 * 3, (168 - 20) * 3));
    let pit = &scores["systems"][0]["pit"];
    assert_eq!(mean(pit, "/current_state_leak"), 1.0);
    assert_eq!(mean(pit, "/item_all_correct"), 0.0);
    // The journal's streamed scores agree: only hop-1 replacement posts are correct.
    let right = journal(&dir)
        .iter()
        .filter(|l| l["task"] == "post" && l["scores"]["correct"] == true)
        .count();
    assert_eq!(right, 20 * 3);
    // The follow-up: it re-states the root only where the last turn names a new root,
    // never a conclusion, and always calls the change an update.
    let inv = &probe["invalidation"];
    assert_eq!(mean(inv, "/micro_precision"), 1.0);
    assert!(mean(inv, "/micro_recall") < 0.3, "{inv}");
    for position in ["2", "3", "4"] {
        assert_eq!(mean(inv, &format!("/by_chain_position/{position}")), 0.0);
    }
    assert_eq!(mean(probe, "/axis_acc"), 0.5);
    assert_eq!(mean(probe, "/axis_acc_by/derived correction"), 0.0);
    assert_eq!(mean(probe, "/axis_acc_by/asserted update"), 1.0);
    assert_eq!(probe["followup_contract_failures"], 0);
    // Propagation: the chain was learned (pre right) and never carried past hop 1.
    for hop in ["2", "3", "4"] {
        assert_eq!(
            mean(probe, &format!("/propagation/hop_depth/{hop}/mean")),
            0.0
        );
    }
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn rerunning_resumes_without_new_samples_and_completes_a_cut_journal() {
    let out = scratch("resume");
    run_probe("oracle", &out, &[]);
    let dir = out.join("oracle").join("probe");
    let before = std::fs::read(dir.join("journal.jsonl")).unwrap();
    let again = run_probe("oracle", &out, &[]);
    let stdout = String::from_utf8_lossy(&again.stdout);
    assert!(
        stdout.contains(&format!(
            "{SAMPLES} samples (0 generated now, {SAMPLES} resumed"
        )),
        "{stdout}"
    );
    assert_eq!(std::fs::read(dir.join("journal.jsonl")).unwrap(), before);

    // Keep the first 100 lines: the rerun makes exactly the rest.
    let text = String::from_utf8(before).unwrap();
    let kept: String = text.lines().take(100).map(|l| format!("{l}\n")).collect();
    std::fs::write(dir.join("journal.jsonl"), kept).unwrap();
    let third = run_probe("oracle", &out, &[]);
    let stdout = String::from_utf8_lossy(&third.stdout);
    assert!(
        stdout.contains(&format!(
            "{SAMPLES} samples ({} generated now, 100 resumed",
            SAMPLES - 100
        )),
        "{stdout}"
    );
    let mut keys: Vec<(String, u64)> = journal(&dir)
        .iter()
        .map(|l| {
            (
                l["request_id"].as_str().unwrap().to_string(),
                l["seed"].as_u64().unwrap(),
            )
        })
        .collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), SAMPLES);
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn score_rewrites_identical_reports() {
    let out = scratch("score");
    run_probe("no-propagation", &out, &["--limit", "3"]);
    let dir = out.join("no-propagation").join("probe");
    let files = ["scores.json", "summary.md", "scores.csv"];
    let before: Vec<Vec<u8>> = files
        .iter()
        .map(|f| std::fs::read(dir.join(f)).unwrap())
        .collect();
    for f in files {
        std::fs::remove_file(dir.join(f)).unwrap();
    }
    let o = ok(&["score", dir.to_str().unwrap()]);
    for (f, b) in files.iter().zip(&before) {
        assert_eq!(&std::fs::read(dir.join(f)).unwrap(), b, "{f} differs");
    }
    assert!(String::from_utf8_lossy(&o.stdout).starts_with("# probe: no-propagation\n"));
    // --limit 3: three items of each domain, core and PIT.
    let scores = json(&dir.join("scores.json"));
    assert_eq!(scores["systems"][0]["probe"]["items"], 9);
    assert_eq!(scores["systems"][0]["pit"]["items"], 6);
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn shards_merge_into_the_unsharded_run() {
    let out = scratch("shards");
    run_probe("oracle", &out, &[]);
    let whole = out.join("oracle").join("probe");
    run_probe("oracle", &out, &["--shard", "0/2"]);
    run_probe("oracle", &out, &["--shard", "1/2"]);
    let s0 = out.join("oracle").join("probe.shard-0-of-2");
    let s1 = out.join("oracle").join("probe.shard-1-of-2");
    let (n0, n1) = (journal(&s0).len(), journal(&s1).len());
    assert!(n0 > 0 && n1 > 0);
    assert_eq!(n0 + n1, SAMPLES);
    let merged = out.join("merged");
    ok(&[
        "merge",
        s0.to_str().unwrap(),
        s1.to_str().unwrap(),
        "--out",
        merged.to_str().unwrap(),
    ]);
    assert_eq!(journal(&merged).len(), SAMPLES);
    assert_eq!(
        std::fs::read(merged.join("scores.json")).unwrap(),
        std::fs::read(whole.join("scores.json")).unwrap()
    );
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_bad_probe_file_is_refused_with_file_item_and_field() {
    let out = scratch("bad");
    std::fs::create_dir_all(&out).unwrap();
    let bad = out.join("probe_bad.json");
    std::fs::write(
        &bad,
        r#"[{"probe_id": "x-1", "domain": "employment", "hop_depth": 7}]"#,
    )
    .unwrap();
    let o = runner(&[
        "--suite",
        "probe",
        "--model",
        "oracle",
        "--suite-file",
        bad.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("probe_bad.json: item x-1, field `hop_depth`"),
        "{err}"
    );
    assert!(!out.join("oracle").exists(), "no run folder for a bad file");
    let o = runner(&[
        "--suite",
        "probe",
        "--model",
        "oracle",
        "--condition",
        "all",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr)
        .contains("--condition and --tasks apply to the CREG suite"));
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn a_fixture_model_answers_through_the_engine() {
    let out = scratch("fixture");
    let model = out.join("fixture-qwen2");
    ok(&[
        "fixture",
        "--arch",
        "qwen2",
        "--size",
        "tiny",
        "--out",
        model.to_str().unwrap(),
    ]);
    let runs = out.join("runs");
    run_probe(
        model.to_str().unwrap(),
        &runs,
        &[
            "--limit",
            "1",
            "--seeds",
            "7",
            "--max-new-tokens",
            "3",
            "--device",
            "cpu",
        ],
    );
    let dir = runs.join("fixture-qwen2").join("probe");
    let lines = journal(&dir);
    // One item per domain asked pre, post and the follow-up, one PIT item per domain
    // asked three times.
    assert_eq!(lines.len(), 3 * 3 + 2 * 3);
    for l in &lines {
        assert!(l["tokens"].as_u64().unwrap() > 0, "{l}");
        assert_eq!(l["seed"], 7);
        if l["task"] == "followup" {
            // Three tokens cannot hold the JSON contract: a counted failure.
            let category = l["scores"]["category"].as_str().unwrap();
            assert!(["truncated", "invalid"].contains(&category), "{l}");
        } else {
            assert!(l["scores"]["outcome"].is_string(), "{l}");
        }
    }
    let scores = json(&dir.join("scores.json"));
    assert_eq!(scores["systems"][0]["system"], "fixture-qwen2");
    assert_eq!(scores["systems"][0]["probe"]["samples"], 3);
    assert_eq!(
        scores["systems"][0]["probe"]["followup_contract_failures"],
        3
    );
    // The engine's batch figures, as the run folder recorded them, are in the summary
    // (and rescoring keeps them).
    let recorded = runner_core::journal::batches::read(&dir).unwrap();
    assert_eq!(recorded.len(), 1, "one invocation");
    let pooled = runner_core::journal::batches::pooled(&recorded);
    assert!(pooled.rows_decoded > 0, "{pooled:?}");
    let line = format!(
        "Batch utilization (rows decoded per row-step offered): {}.\n",
        pooled.describe().unwrap()
    );
    let summary = || std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(summary().contains(&line), "{line}\nnot in:\n{}", summary());
    ok(&["score", dir.to_str().unwrap()]);
    assert!(
        summary().contains(&line),
        "{line}\nnot in after rescoring:\n{}",
        summary()
    );
    let _ = std::fs::remove_dir_all(&out);
}

#[test]
fn oracle_on_the_published_v0_file_scores_perfectly() {
    let v0 = crate::common::repo_root().join("../shared/reference/probe_v0.json");
    assert!(v0.exists(), "{} is missing", v0.display());
    let out = scratch("v0");
    run_probe("oracle", &out, &["--suite-file", v0.to_str().unwrap()]);
    let dir = out.join("oracle").join("probe-v0");
    let manifest = json(&dir.join("manifest.json"));
    assert_eq!(
        manifest.pointer("/identity/suite/name"),
        Some(&"probe-v0".into())
    );
    assert_eq!(
        manifest.pointer("/identity/suite/generated"),
        Some(&false.into())
    );
    assert_eq!(journal(&dir).len(), 3 * 168 * 3);
    let scores = json(&dir.join("scores.json"));
    assert_eq!(scores["systems"][0]["probe"]["items"], 168);
    assert!(scores["systems"][0]["pit"].is_null());
    assert_eq!(scores["set"]["kind"], "published");
    assert_eq!(scores["set"]["human_validated"], true);
    assert_core_perfect(&scores["systems"][0]["probe"]);
    // Rescoring needs the file the run used.
    let o = runner(&["score", dir.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--suite-file"));
    ok(&[
        "score",
        dir.to_str().unwrap(),
        "--suite-file",
        v0.to_str().unwrap(),
    ]);
    let _ = std::fs::remove_dir_all(&out);
}
