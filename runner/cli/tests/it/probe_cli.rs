//! The `runner probe` commands end to end: generate, check (and its exit status on a
//! defect), stats, baseline.

use super::common::{runner, scratch, text};

#[test]
fn generate_then_check_then_reject_a_mutated_gold() {
    let dir = scratch("gen");
    let out = runner(&["probe", "generate", "--out", dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let probe = dir.join("probe.json");
    let pit = dir.join("probe_pit.json");
    let sums = std::fs::read_to_string(dir.join("SHA256SUMS")).unwrap();
    assert!(sums.contains("  probe.json\n") && sums.contains("  probe_pit.json\n"));

    let out = runner(&[
        "probe",
        "check",
        probe.to_str().unwrap(),
        pit.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));

    let mut items: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&probe).unwrap()).unwrap();
    let id = items[30]["probe_id"].as_str().unwrap().to_string();
    items[30]["gold_pre"] = serde_json::json!("Atlantis");
    let bad = dir.join("bad.json");
    std::fs::write(&bad, serde_json::to_string(&items).unwrap()).unwrap();
    let out = runner(&["probe", "check", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains(&format!("item {id}, field `gold_pre`")),
        "{err}"
    );

    let out = runner(&["probe", "stats", probe.to_str().unwrap()]);
    assert!(text(&out.stdout).contains("| all | | 168 |"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn unreadable_input_fails_with_the_file_named() {
    let dir = scratch("bad");
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("truncated.json");
    std::fs::write(&bad, "[{\"probe_id\": \"x\"").unwrap();
    let out = runner(&["probe", "check", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("truncated.json: not valid JSON"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn baseline_prints_a_markdown_table() {
    let out = runner(&["probe", "baseline", "--system", "oracle"]);
    assert!(out.status.success());
    let s = text(&out.stdout);
    assert!(
        s.contains("| post accuracy (NM) | 1.000 [1.000, 1.000] |"),
        "{s}"
    );
    assert!(s.contains("## Probe PIT"));
    let out = runner(&["probe", "baseline", "--system", "oracle", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["probe"]["post_acc"]["mean"], 1.0);
    assert_eq!(v["pit"]["n_queries"], 24);
    let out = runner(&["probe", "baseline", "--system", "nonsense"]);
    assert!(!out.status.success());
}

#[test]
fn compare_reports_paired_tests() {
    let out = runner(&["probe", "compare", "--a", "oracle", "--b", "no-propagation"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let s = text(&out.stdout);
    assert!(s.contains("(168 paired items)"), "{s}");
    // no-propagation is right on the 20 hop-1 replacement items only.
    assert!(s.contains("| all | 148 | 0 |"), "{s}");
}

#[test]
fn published_v0_file_checks_and_scores() {
    let v0 = crate::common::repo_root().join("../shared/reference/probe_v0.json");
    assert!(v0.exists(), "{} is missing", v0.display());
    let out = runner(&["probe", "check", v0.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = runner(&[
        "probe",
        "baseline",
        "--system",
        "no-propagation",
        v0.to_str().unwrap(),
    ]);
    let s = text(&out.stdout);
    assert!(
        s.contains("| hop_x_contradicted | 4 derived | 24 | 0.000 |"),
        "{s}"
    );
}

#[test]
fn prompts_then_scored_responses() {
    let dir = scratch("score");
    let out = runner(&["probe", "generate", "--out", dir.to_str().unwrap()]);
    assert!(out.status.success());
    let probe = dir.join("probe.json");
    let out = runner(&["probe", "prompts", probe.to_str().unwrap()]);
    let lines: Vec<serde_json::Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2 * 168);
    assert!(lines[0]["id"].as_str().unwrap().ends_with("/pre"));

    // Answer every item with its golds, in the plain and the structured form.
    let items: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(&probe).unwrap()).unwrap();
    let mut responses = String::new();
    for item in &items {
        let post = match item["gold_post"].as_str().unwrap() {
            "unknown" => serde_json::json!({"answer": null, "abstain": true}),
            v => serde_json::json!(v),
        };
        let line = serde_json::json!({"probe_id": item["probe_id"], "pre": item["gold_pre"], "post": post});
        responses.push_str(&format!("{line}\n"));
    }
    let resp = dir.join("responses.jsonl");
    std::fs::write(&resp, &responses).unwrap();
    let out = runner(&[
        "probe",
        "score",
        probe.to_str().unwrap(),
        "--responses",
        resp.to_str().unwrap(),
        "--json",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["post_acc"]["mean"], 1.0);
    assert_eq!(v["items"], 168);

    // Half the lines gone: the missing items are scored as empty, not dropped.
    let half: String = responses
        .lines()
        .take(84)
        .map(|l| format!("{l}\n"))
        .collect();
    std::fs::write(&resp, half).unwrap();
    let out = runner(&[
        "probe",
        "score",
        probe.to_str().unwrap(),
        "--responses",
        resp.to_str().unwrap(),
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["post_acc"]["mean"], 0.5);
    assert_eq!(v["outcomes"]["empty"], 84);
    let _ = std::fs::remove_dir_all(&dir);
}
