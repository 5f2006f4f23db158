//! Per-sample verdicts on disk: the run writes `samples.jsonl` beside its scores, one
//! line per journaled sample with the request's facets, the answer as the contract read
//! it, the reference and the scores; `runner score` rewrites it byte for byte.

use super::common::{journal, runner, s, scratch, text};
use serde_json::Value;

#[test]
fn a_run_and_runner_score_write_every_sample_with_its_answer_and_reference() {
    let out = scratch("samples-jsonl");
    let o = runner(&[
        "--model",
        "oracle",
        "--tasks",
        "all",
        "--limit",
        "1",
        "--seeds",
        "42",
        "--quiet",
        "--out",
        s(&out),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let dir = out.join("oracle").join("creg-v1.0");
    let path = dir.join("samples.jsonl");
    let streamed = std::fs::read(&path).expect("the run writes samples.jsonl");
    let lines: Vec<Value> = std::str::from_utf8(&streamed)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), journal(&dir).len(), "one line per sample");
    let mut tasks = std::collections::BTreeSet::new();
    for l in &lines {
        let f = &l["facets"];
        for key in ["scenario", "condition", "task"] {
            assert!(f[key].is_string(), "{key}: {l}");
        }
        assert!(f["step"].is_u64(), "{l}");
        tasks.insert(f["task"].as_str().unwrap().to_string());
        assert_eq!(l["model"], "oracle");
        assert_eq!(l["seed"], 42);
        assert_eq!(l["category"], "valid", "{l}");
        assert!(l["parsed"].is_object(), "the parsed answer: {l}");
        assert!(l["reference"].is_object(), "the reference: {l}");
        assert_eq!(l["scores"]["contract_failure"], 0.0, "{l}");
        if f["task"] == "belief" {
            assert_eq!(l["scores"]["top_state_accuracy"], 1.0, "{l}");
            // The reference of a belief prefix is that step of the trajectory.
            assert_eq!(l["reference"]["step_index"], f["step"], "{l}");
        }
    }
    assert_eq!(tasks.len(), 4, "every task: {tasks:?}");
    std::fs::remove_file(&path).unwrap();
    let o = runner(&["score", s(&dir)]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(
        std::fs::read(&path).unwrap(),
        streamed,
        "runner score rewrites it"
    );
}
