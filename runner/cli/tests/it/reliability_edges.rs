//! Edges an adversarial pass found (issue 43): ids of megabytes, `--max-batch 0`,
//! merges given a shard twice or their own input as `--out`, and stored scores that
//! rescoring does not give.

use super::common::{ok, runner, s, scratch_dir as scratch, text};
use serde_json::Value;
use std::path::Path;

fn refused(args: &[&str]) -> String {
    let o = runner(args);
    assert_eq!(o.status.code(), Some(2), "{args:?} not refused cleanly");
    text(&o.stderr)
}

/// A small oracle run: belief prefixes of the first scenario of every regime.
fn oracle<'a>(out: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec![
        "--model", "oracle", "--tasks", "belief", "--limit", "1", "--quiet", "--out",
    ];
    v.push(s(out));
    v.extend_from_slice(extra);
    v
}

#[test]
fn an_id_longer_than_the_bound_is_refused_naming_its_line_and_field() {
    let dir = scratch("long-id");
    let lines: Vec<&str> = creg::frozen::FROZEN_JSONL.lines().take(2).collect();
    let id = serde_json::from_str::<Value>(lines[1]).unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let long = format!("{id}-{}", "x".repeat(300));
    let suite = dir.join("long.jsonl");
    std::fs::write(
        &suite,
        format!("{}\n{}\n", lines[0], lines[1].replacen(&id, &long, 1)),
    )
    .unwrap();
    let err = refused(&["suite", "check", s(&suite)]);
    assert!(
        err.contains("long.jsonl:2") && err.contains("id") && err.contains("at most 256 bytes"),
        "{err}"
    );

    ok(&["probe", "generate", "--out", s(&dir)]);
    let file = dir.join("probe.json");
    let mut items: Vec<Value> = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    items[0]["probe_id"] = "p".repeat(1 << 20).into();
    std::fs::write(&file, serde_json::to_vec(&items).unwrap()).unwrap();
    let err = refused(&["probe", "check", s(&file)]);
    assert!(err.contains("at most 256 bytes"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn max_batch_0_is_refused_not_run_as_1() {
    let dir = scratch("batch-0");
    let err = refused(&oracle(&dir, &["--max-batch", "0"]));
    assert!(err.contains("--max-batch"), "{err}");
    let written: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
    assert!(written.is_empty(), "nothing was written: {written:?}");
}

#[test]
fn merge_refuses_a_shard_given_twice_and_its_own_input_as_out_with_merges_words() {
    let dir = scratch("merge");
    for shard in ["0/2", "1/2"] {
        ok(&oracle(&dir, &["--shard", shard]));
    }
    let shards: Vec<_> = ["shard-0-of-2", "shard-1-of-2"]
        .iter()
        .map(|n| dir.join("oracle").join(format!("creg-v1.0.{n}")))
        .collect();
    for shard in &shards {
        assert!(shard.is_dir(), "{} missing", shard.display());
    }
    let twice = refused(&[
        "merge",
        s(&shards[0]),
        s(&shards[0]),
        "--out",
        s(&dir.join("m")),
    ]);
    assert!(twice.contains("given twice"), "{twice}");
    let onto = refused(&[
        "merge",
        s(&shards[0]),
        s(&shards[1]),
        "--out",
        s(&shards[1]),
    ]);
    assert!(onto.contains("--out is one of the shards"), "{onto}");
    assert!(!onto.contains("pid"), "merge blamed a process: {onto}");

    // A folder holding another run: merge's own way out, not a run's --fresh.
    ok(&oracle(&dir, &["--run", "other", "--seeds", "7"]));
    let other = dir.join("oracle").join("other");
    let taken = refused(&["merge", s(&shards[0]), s(&shards[1]), "--out", s(&other)]);
    assert!(taken.contains("--out holds another run"), "{taken}");
    assert!(!taken.contains("--fresh"), "merge has no --fresh: {taken}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn score_warns_when_stored_scores_differ_from_the_recomputed() {
    let dir = scratch("stored-scores");
    ok(&oracle(&dir, &[]));
    let run = dir.join("oracle").join("creg-v1.0");
    let clean = runner(&["score", s(&run)]);
    assert!(clean.status.success());
    assert!(
        !text(&clean.stderr).contains("warning"),
        "{}",
        text(&clean.stderr)
    );

    let journal = run.join("journal.jsonl");
    let lines: Vec<String> = std::fs::read_to_string(&journal)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    let mut first: Value = serde_json::from_str(&lines[0]).unwrap();
    first["scores"] = serde_json::json!({"forged": true});
    let mut forged = vec![first.to_string()];
    forged.extend(lines[1..].iter().cloned());
    std::fs::write(&journal, forged.join("\n") + "\n").unwrap();
    let o = runner(&["score", s(&run)]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    assert!(
        err.contains("warning") && err.contains("1 samples carry stored scores that differ"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
