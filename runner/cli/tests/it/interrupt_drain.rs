//! Ctrl-C on a real run of the fixture model: a first SIGINT starts no new request and
//! lets the rows in flight finish into the journal; a second one stops at once. Either
//! way the run exits 130 and the same command resumes to a complete journal.

use crate::common::{ok, runner_exe, s, scratch, text};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The run's arguments: a plan of many requests, three seeds each, so that the rows in
/// flight are a small part of it.
fn args<'a>(model: &'a Path, out: &'a Path, condition: &'a str, max_new: &'a str) -> Vec<&'a str> {
    vec![
        "--model",
        s(model),
        "--condition",
        condition,
        "--tasks",
        "belief",
        "--limit",
        "2",
        "--seeds",
        "42,43,44",
        "--max-new-tokens",
        max_new,
        "--max-batch",
        "6",
        "--device",
        "cpu",
        "--out",
        s(out),
    ]
}

/// The journal's lines, each parsed (a cut line fails the test), as (request, seed).
fn journaled(journal: &Path) -> Vec<(String, u64)> {
    let bytes = std::fs::read(journal).unwrap_or_default();
    let text = String::from_utf8(bytes).unwrap();
    assert!(text.is_empty() || text.ends_with('\n'), "a cut line");
    text.lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            (
                v["request_id"].as_str().unwrap().to_string(),
                v["seed"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// Starts the run with its stderr read line by line on a thread.
fn start(args: &[&str]) -> (Child, mpsc::Receiver<String>) {
    let mut child = Command::new(runner_exe())
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let err = child.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            // The bar redraws with carriage returns: each part is a line.
            for part in line.split('\r') {
                let _ = tx.send(part.to_string());
            }
        }
    });
    (child, rx)
}

fn sigint(child: &Child) {
    let pid = child.id().to_string();
    assert!(Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap()
        .success());
}

/// Waits for the first sample in the journal (the run is decoding then).
fn until_journaled(child: &mut Child, journal: &Path) {
    let started = Instant::now();
    while std::fs::metadata(journal).map_or(0, |m| m.len()) == 0 {
        assert!(child.try_wait().unwrap().is_none(), "the run ended first");
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "nothing journaled"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The line of `rx` that contains `what`, within `limit`; the lines seen on a miss.
fn line_with(rx: &mpsc::Receiver<String>, what: &str, limit: Duration) -> String {
    let until = Instant::now() + limit;
    let mut seen = Vec::new();
    while let Some(left) = until.checked_duration_since(Instant::now()) {
        match rx.recv_timeout(left) {
            Ok(l) if l.contains(what) => return l,
            Ok(l) => seen.push(l),
            Err(_) => break,
        }
    }
    panic!("no line with {what:?} in:\n{}", seen.join("\n"));
}

/// The same command again finishes the run: every planned sample once, the ones kept
/// by the interrupt resumed, not decoded again.
fn resume_completes(args: &[&str], journal: &Path, kept: usize) {
    let mut quiet = args.to_vec();
    quiet.push("--quiet");
    let o = ok(&quiet);
    let said = text(&o.stdout);
    assert!(
        said.contains(&format!("{kept} resumed from the journal")),
        "{said}"
    );
    let all = journaled(journal);
    let keys: BTreeSet<_> = all.iter().cloned().collect();
    assert_eq!(keys.len(), all.len(), "a sample journaled twice");
    // Every request has its three seeds.
    let mut seeds: BTreeMap<&str, usize> = BTreeMap::new();
    for (r, _) in &all {
        *seeds.entry(r).or_default() += 1;
    }
    assert!(seeds.values().all(|&n| n == 3), "{seeds:?}");
}

#[test]
fn a_first_ctrl_c_lets_the_rows_in_flight_finish_into_the_journal() {
    let dir = scratch("drain-once");
    let model = dir.join("model");
    crate::common::write_suite_fixture(&model);
    let out = dir.join("out");
    let args = args(&model, &out, "all", "48");
    let journal = out.join("model").join("creg-v1.0").join("journal.jsonl");
    let (mut child, rx) = start(&args);
    until_journaled(&mut child, &journal);
    let before = journaled(&journal).len();
    let signalled = Instant::now();
    sigint(&child);
    let said = line_with(
        &rx,
        "Ctrl-C: stopping after the work in flight",
        Duration::from_secs(30),
    );
    assert!(
        said.contains("Press Ctrl-C again to stop at once"),
        "{said}"
    );
    // "the N rows in flight finish ..." (N from the engine's counters at the signal).
    let rows: usize = said
        .split("; the ")
        .nth(1)
        .and_then(|r| r.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no row count in {said:?}"));
    assert!((1..=6).contains(&rows), "{said}");
    let stopped = line_with(&rx, "interrupted: ", Duration::from_secs(300));
    let status = child.wait().unwrap();
    let drained = signalled.elapsed();
    assert_eq!(status.code(), Some(130));
    let kept = journaled(&journal);
    assert!(
        stopped.contains(&format!(
            "interrupted: {} samples are journaled",
            kept.len()
        )),
        "{stopped}"
    );
    // The rows decoding at the signal were finished and journaled, not thrown away.
    assert!(
        kept.len() >= before + rows,
        "{} journaled after the drain, {before} before it with {rows} rows in flight",
        kept.len()
    );
    // Nothing new started: far less than the plan, and each request started finished
    // with all its seeds (its rows decode together from one prefill).
    let mut seeds: BTreeMap<&str, usize> = BTreeMap::new();
    for (r, _) in &kept {
        *seeds.entry(r).or_default() += 1;
    }
    assert!(
        seeds.values().all(|&n| n == 3),
        "a request cut short: {seeds:?}"
    );
    eprintln!(
        "drain: {before} journaled at the signal, {rows} rows in flight, {} after the drain \
         ({:.1} s)",
        kept.len(),
        drained.as_secs_f64()
    );
    resume_completes(&args, &journal, kept.len());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_second_ctrl_c_stops_at_once_and_the_run_resumes() {
    let dir = scratch("drain-twice");
    let model = dir.join("model");
    crate::common::write_suite_fixture(&model);
    let out = dir.join("out");
    // Long answers: the drain would take a while, the second Ctrl-C does not wait for it.
    let args = args(&model, &out, "canonical_json", "512");
    let journal = out.join("model").join("creg-v1.0").join("journal.jsonl");
    let (mut child, rx) = start(&args);
    until_journaled(&mut child, &journal);
    sigint(&child);
    line_with(
        &rx,
        "Ctrl-C: stopping after the work in flight",
        Duration::from_secs(30),
    );
    let second = Instant::now();
    sigint(&child);
    let stopped = line_with(&rx, "interrupted: ", Duration::from_secs(10));
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130));
    assert!(second.elapsed() < Duration::from_secs(5), "not at once");
    let kept = journaled(&journal);
    assert!(
        stopped.contains(&format!(
            "interrupted: {} samples are journaled",
            kept.len()
        )),
        "{stopped}"
    );
    resume_completes(&args, &journal, kept.len());
    let _ = std::fs::remove_dir_all(&dir);
}
