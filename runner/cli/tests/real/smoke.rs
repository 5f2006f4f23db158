//! `runner smoke --model FOLDER` on a real checkpoint (SmolLM2-135M-Instruct): the run
//! stops answers at the model's end-of-turn token, its journal and reports are whole,
//! and the report of a weak real model breaks its contract failures down by reason,
//! with an example reply for each.

use crate::{real, runner_exe, scratch, SMOLLM2};
use std::process::Command;

#[test]
fn the_smoke_run_on_smollm2_ends_answers_at_end_of_turn_and_reports_its_failures() {
    let Some(model) = real(SMOLLM2) else { return };
    let out = scratch("smoke");
    let o = Command::new(runner_exe())
        .args(["smoke", "--model"])
        .arg(&model)
        .args([
            "--condition",
            "full_graph",
            "--tasks",
            "action,explanation",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(stdout.contains("smoke run passed"), "{stdout}");
    let run = out.join(SMOLLM2).join("smoke");
    let journal = std::fs::read_to_string(run.join("journal.jsonl")).unwrap();
    let records: Vec<serde_json::Value> = journal
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // 7 scenarios (one per regime) x 2 tasks x 3 seeds.
    assert_eq!(records.len(), 42, "a whole journal");
    let stopped = records
        .iter()
        .filter(|r| r["finish_reason"] == "stop")
        .count();
    assert!(stopped > 0, "some answers end at the end-of-turn token");
    for r in &records {
        let text = r["text"].as_str().unwrap();
        assert!(
            !text.contains("<|im_end|>"),
            "the end-of-turn token is not part of an answer: {text:?}"
        );
        if r["finish_reason"] == "stop" {
            assert!(r["tokens"].as_u64().unwrap() < 128, "{r}");
        }
    }
    let html = std::fs::read_to_string(run.join("report.html")).unwrap();
    assert!(
        html.contains("Contract failures by reason") || html.contains("No contract failures."),
        "the report says what became of the contract"
    );
    if html.contains("Contract failures by reason") {
        let section = &html[html.find("Contract failures by reason").unwrap()..];
        assert!(
            section.contains("<code>"),
            "each reason shows an example reply"
        );
    }
}
