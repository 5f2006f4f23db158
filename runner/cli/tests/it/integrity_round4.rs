//! Fault tests of four integrity holes: a remembered weight digest forged in the model
//! cache, a clean run's rescore taken for an edited journal (a float that did not parse
//! back to its bits), journal lines moved outside the plan, and a journal line with a
//! hundred thousand fields.

use super::common::{runner_exe, s, scratch_dir, text};
use super::pins::REVISION;
use runner_core::journal::{self, JOURNAL_FILE};
use runner_core::run::rescore::{same_bits, workload_of};
use runner_engine::digest::sha256_hex;
use serde_json::Value;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// `model`'s files as the Hugging Face cache holds `org/fixture` at [`REVISION`]; the
/// weights a link to a blob. Returns the blob.
fn cache(hub: &Path, model: &Path) -> PathBuf {
    super::pins::cache(hub, model, "org/fixture", REVISION, "weights")
}

/// A panel of one model, `pinned`: `org/fixture` at [`REVISION`], its weights pinned.
fn panel(dir: &Path, bytes: u64, digest: &str) -> PathBuf {
    super::pins::panel(dir, REVISION, bytes, digest)
}

/// The runner with the model cache `hub` (offline) and its own cache folder in `state`.
fn runner_with(hub: &Path, state: &Path, args: &[&str]) -> Output {
    Command::new(runner_exe())
        .args(args)
        .env("HF_HUB_CACHE", hub)
        .env("HF_HUB_OFFLINE", "1")
        .env("XDG_CACHE_HOME", state)
        .env_remove("HF_ENDPOINT")
        .output()
        .unwrap()
}

#[track_caller]
fn refused(out: &Output) -> String {
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "not refused cleanly:\n{err}");
    err
}

/// A digest memory entry in the format runner versions before this one trusted (path,
/// size, modification and change time), which anyone who can write the model cache
/// can write: the blob's current figures with `sha256` set to the pin.
fn forged_entry(blob: &Path, pin: &str) -> (String, Value) {
    let real = blob.canonicalize().unwrap();
    let m = std::fs::metadata(&real).unwrap();
    let entry = serde_json::json!({
        "dev": m.dev(), "ino": m.ino(), "bytes": m.len(),
        "mtime": [m.mtime(), m.mtime_nsec()],
        "ctime": [m.ctime(), m.ctime_nsec()],
        "sha256": pin,
    });
    (real.to_string_lossy().into_owned(), entry)
}

#[test]
fn a_digest_forged_in_the_model_cache_does_not_pass_tampered_weights_for_the_pin() {
    let dir = scratch_dir("forged-digest");
    let model = dir.join("fixture");
    super::common::write_suite_fixture(&model);
    let weights = std::fs::read(model.join("model.safetensors")).unwrap();
    let pin = sha256_hex(&weights);
    let hub = dir.join("hub");
    let state = dir.join("state");
    let blob = cache(&hub, &model);
    let panel = panel(&dir, weights.len() as u64, &pin);
    let args = |out: &Path| -> Vec<String> {
        [
            "--model",
            "pinned",
            "--panel",
            s(&panel),
            "--condition",
            "full_graph",
            "--tasks",
            "belief",
            "--limit",
            "1",
            "--seeds",
            "42",
            "--max-new-tokens",
            "2",
            "--device",
            "cpu",
            "--quiet",
            "--out",
            s(out),
        ]
        .map(String::from)
        .to_vec()
    };
    let run = |n: &str| {
        let out = dir.join(n);
        let a = args(&out);
        let a: Vec<&str> = a.iter().map(String::as_str).collect();
        runner_with(&hub, &state, &a)
    };
    let first = run("out1");
    assert!(first.status.success(), "{}", text(&first.stderr));

    // Overwrite bytes in place (same size), then set the modification time back.
    let mtime = std::fs::metadata(&blob).unwrap().modified().unwrap();
    let mut tampered = weights.clone();
    let half = tampered.len() / 2;
    let end = tampered.len().min(half + 4096);
    for b in &mut tampered[half..end] {
        *b ^= 0x55;
    }
    {
        use std::io::{Seek, SeekFrom, Write};
        let mut f = std::fs::OpenOptions::new().write(true).open(&blob).unwrap();
        f.seek(SeekFrom::Start(0)).unwrap();
        f.write_all(&tampered).unwrap();
        f.set_modified(mtime).unwrap();
    }
    assert_eq!(std::fs::metadata(&blob).unwrap().modified().unwrap(), mtime);
    let real = sha256_hex(&tampered);
    let err = refused(&run("out2"));
    assert!(err.contains(&real) && err.contains(&pin), "{err}");

    // The model cache's writer sets the remembered digest back to the pin: where earlier
    // runners kept it, and (a folder anyone may write) where this one keeps its own.
    let old = hub.join("models--org--fixture/runner-digests.json");
    let mut remembered: serde_json::Map<String, Value> = std::fs::read(&old)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default();
    for entry in remembered.values_mut() {
        entry["sha256"] = pin.clone().into();
    }
    let (key, entry) = forged_entry(&blob, &pin);
    remembered.entry(key.clone()).or_insert(entry.clone());
    std::fs::write(&old, serde_json::to_vec(&remembered).unwrap()).unwrap();
    let err = refused(&run("out3"));
    assert!(
        err.contains(&real) && err.contains(&pin),
        "the forged entry in the model cache was believed:\n{err}"
    );
    let own = state.join("creg-runner");
    if own.is_dir() {
        std::fs::set_permissions(&own, std::fs::Permissions::from_mode(0o777)).unwrap();
        let file = own.join("weight-digests.json");
        std::fs::write(
            &file,
            serde_json::to_vec(&serde_json::json!({ key: entry })).unwrap(),
        )
        .unwrap();
        let err = refused(&run("out4"));
        assert!(
            err.contains(&real) && err.contains(&pin),
            "a digest memory anyone may write was believed:\n{err}"
        );
    }
    for n in ["out2", "out3", "out4"] {
        assert!(
            !dir.join(n).join("pinned/creg-v1.0/journal.jsonl").exists(),
            "{n}: the tampered weights ran"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every journaled sample of `run` scored again in this process with `runner score`'s
/// code: each score must be the journaled one to the bit. Returns how many were compared.
fn assert_scores_round_trip(run: &Path) -> usize {
    let reading = journal::read_run(run).unwrap();
    let w = workload_of(&runner::SUITES, run, &reading.manifest, None).unwrap();
    assert!(!reading.records.is_empty(), "{}: no samples", run.display());
    for (rec, line) in reading.records.iter().zip(&reading.lines) {
        let again = w.score(rec).unwrap();
        assert!(
            same_bits(&again.scores, &rec.scores),
            "{}:{line}: journaled scores {} but rescored {}",
            run.join(JOURNAL_FILE).display(),
            rec.scores,
            again.scores
        );
        // The text is the same too: the shortest form of each float is unique to it.
        assert_eq!(
            serde_json::to_string(&again.scores).unwrap(),
            serde_json::to_string(&rec.scores).unwrap()
        );
    }
    reading.records.len()
}

/// `runner score` on `run`, which must succeed without saying a stored score differs.
#[track_caller]
fn assert_rescore_agrees(run: &Path) {
    let out = Command::new(runner_exe())
        .args(["score", s(run), "--out", s(&run.with_extension("rescored"))])
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        !err.contains("differ"),
        "a clean run's rescore says its journal was edited:\n{err}"
    );
}

#[test]
fn every_baselines_streaming_scores_are_runner_scores_to_the_bit_in_every_condition() {
    let dir = scratch_dir("bits");
    let creg = [
        "oracle",
        "confidence-only",
        "no-relations",
        "no-epochs",
        "latest-wins",
        "uniform",
    ];
    let mut compared = 0;
    for system in creg {
        let out = dir.join(system);
        super::common::ok(&[
            "--model",
            system,
            "--condition",
            "all",
            "--quiet",
            "--out",
            s(&out),
        ]);
        let run = out.join(system).join("creg-v1.0");
        assert_rescore_agrees(&run);
        compared += assert_scores_round_trip(&run);
    }
    for system in ["oracle", "no-propagation"] {
        let out = dir.join(format!("probe-{system}"));
        super::common::ok(&[
            "--suite",
            "probe",
            "--model",
            system,
            "--quiet",
            "--out",
            s(&out),
        ]);
        let runs: Vec<PathBuf> = std::fs::read_dir(out.join(system))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.join(JOURNAL_FILE).is_file())
            .collect();
        assert!(!runs.is_empty(), "no probe run of {system}");
        for run in runs {
            assert_rescore_agrees(&run);
            compared += assert_scores_round_trip(&run);
        }
    }
    // The nine conditions of the whole suite, six times, and the Probe runs.
    assert!(compared > 6 * 59_400, "{compared} samples compared");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_model_runs_streaming_scores_are_runner_scores_to_the_bit() {
    let dir = scratch_dir("bits-model");
    let model = dir.join("fixture");
    super::common::write_suite_fixture(&model);
    let out = dir.join("out");
    super::common::ok(&[
        "--model",
        s(&model),
        "--condition",
        "all",
        "--limit",
        "1",
        "--seeds",
        "42",
        "43",
        "--max-new-tokens",
        "12",
        "--device",
        "cpu",
        "--quiet",
        "--out",
        s(&out),
    ]);
    let run = out.join("fixture").join("creg-v1.0");
    assert_rescore_agrees(&run);
    assert!(assert_scores_round_trip(&run) > 0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A small oracle run of `conditions` in `out`; its run folder.
fn oracle_run(out: &Path, conditions: &str) -> (PathBuf, Vec<String>) {
    let args: Vec<String> = [
        "--model",
        "oracle",
        "--condition",
        conditions,
        "--tasks",
        "belief",
        "--limit",
        "2",
        "--quiet",
        "--out",
        s(out),
    ]
    .map(String::from)
    .to_vec();
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    super::common::ok(&a);
    (out.join("oracle/creg-v1.0"), args)
}

/// The journal's lines, the `k`-th (from 0) changed by `edit`, written back.
fn edit_line(run: &Path, k: usize, edit: impl FnOnce(&mut Value)) {
    let path = run.join(JOURNAL_FILE);
    let mut lines: Vec<String> = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(String::from)
        .collect();
    let mut v: Value = serde_json::from_str(&lines[k]).unwrap();
    edit(&mut v);
    lines[k] = serde_json::to_string(&v).unwrap();
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
}

#[test]
fn journal_lines_moved_outside_the_plan_are_reported_and_left_out_and_a_resume_refuses() {
    let dir = scratch_dir("strays");
    let (run, args) = oracle_run(&dir.join("out"), "full_graph");
    let before = std::fs::read_to_string(run.join("summary.md")).unwrap();
    edit_line(&run, 1, |v| v["condition"] = "invented_condition".into());
    edit_line(&run, 3, |v| v["seed"] = 7.into());

    let out = Command::new(runner_exe())
        .args(["score", s(&run)])
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    for part in [
        "2 lines do not belong to the manifest's plan",
        "line 2: request",
        "field `condition` is \"invented_condition\"",
        "left out of the reports",
    ] {
        assert!(err.contains(part), "{part:?} missing from:\n{err}");
    }
    let summary = std::fs::read_to_string(run.join("summary.md")).unwrap();
    assert!(
        !summary.contains("invented_condition"),
        "the report gained a row for a condition outside the plan"
    );
    let scores = std::fs::read_to_string(run.join("scores.json")).unwrap();
    assert!(!scores.contains("invented_condition"));
    assert_ne!(summary, before, "two samples fewer are not the same report");

    // A resume refuses, naming the file, the line and the field.
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = super::common::runner(&a);
    let err = refused(&out);
    for part in [
        run.join(JOURNAL_FILE).display().to_string(),
        "do not belong to this run's plan".into(),
        "line 2: request".into(),
        "field `condition`".into(),
        "--fresh".into(),
    ] {
        assert!(err.contains(&part), "{part:?} missing from:\n{err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Runs `args`, killed after `limit`; its output (None when killed) and time taken.
fn timed(args: &[&str], limit: Duration) -> (Option<Output>, Duration) {
    let started = Instant::now();
    let mut child = Command::new(runner_exe())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    loop {
        if child.try_wait().unwrap().is_some() {
            return (Some(child.wait_with_output().unwrap()), started.elapsed());
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return (None, started.elapsed());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_journal_line_with_100k_extra_fields_is_refused_at_once_by_score_and_resume() {
    let dir = scratch_dir("fields");
    let (run, args) = oracle_run(&dir.join("out"), "full_graph");
    edit_line(&run, 0, |v| {
        let o = v.as_object_mut().unwrap();
        for k in 0..100_000 {
            o.insert(format!("f{k}"), Value::from(k));
        }
    });
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let score = ["score", s(&run)];
    for (what, cmd) in [("score", &score[..]), ("resume", &a[..])] {
        let (out, took) = timed(cmd, Duration::from_secs(60));
        let out = out.unwrap_or_else(|| panic!("{what}: still reading after {took:?}"));
        let err = refused(&out);
        assert!(
            took < Duration::from_secs(10),
            "{what}: {took:?} to read one line"
        );
        for part in [
            format!("{}:1:", run.join(JOURNAL_FILE).display()),
            "more than 64 fields".into(),
        ] {
            assert!(err.contains(&part), "{what}: {part:?} missing from:\n{err}");
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
