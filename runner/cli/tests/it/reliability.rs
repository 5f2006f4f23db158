//! Crashes and faults an adversarial user can cause, through the `runner` binary: two
//! writers on one run folder, a journal whose manifest is deleted or swapped, misspelled
//! and repeated inputs, pooled runs that overlap, limits past the model's context, and
//! how errors are printed.

use super::common::{ok, runner, s, scratch_dir as scratch, text};
use runner_core::journal::lock::RunLock;
use runner_core::journal::{read_records, JOURNAL_FILE, MANIFEST_FILE};
use runner_engine::candle::fixture::{write_fixture, Arch, Size};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A small oracle run: belief prefixes of the first two scenarios of every regime.
fn oracle<'a>(out: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    let mut v = vec![
        "--model",
        "oracle",
        "--tasks",
        "belief",
        "--quiet",
        "--out",
        s(out),
    ];
    if !extra.contains(&"--limit") {
        v.extend_from_slice(&["--limit", "2"]);
    }
    v.extend_from_slice(extra);
    v
}

fn refused(args: &[&str]) -> String {
    let o = runner(args);
    assert!(!o.status.success(), "{args:?} should be refused");
    assert_eq!(o.status.code(), Some(2), "an error, not a crash");
    text(&o.stderr)
}

#[test]
fn a_second_writer_is_refused_at_once_naming_the_first() {
    let out = scratch("lock");
    ok(&oracle(&out, &[]));
    let dir = out.join("oracle").join("creg-v1.0");
    let before = std::fs::read(dir.join(JOURNAL_FILE)).unwrap();
    {
        // This process holds the run, as a running `runner` would.
        let _held = RunLock::exclusive(&dir).unwrap();
        let started = Instant::now();
        let err = refused(&oracle(&out, &[]));
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "refused at once"
        );
        assert!(
            err.contains("in use by another process")
                && err.contains(&format!("pid {}", std::process::id())),
            "{err}"
        );
        // Readers are refused too while a writer holds the folder.
        let err = refused(&["score", s(&dir)]);
        assert!(err.contains("in use by another process"), "{err}");
    }
    assert_eq!(std::fs::read(dir.join(JOURNAL_FILE)).unwrap(), before);
    // Released with its holder: the run resumes.
    ok(&oracle(&out, &[]));
}

#[test]
fn two_writers_started_together_never_journal_a_sample_twice() {
    let out = scratch("two-writers");
    let args = [
        "--model",
        "oracle",
        "--tasks",
        "belief",
        "--limit",
        "10",
        "--quiet",
        "--out",
        s(&out),
    ];
    let spawn = || {
        Command::new(crate::common::runner_exe())
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn(), spawn());
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    let dir = out.join("oracle").join("creg-v1.0");
    let rec = read_records(&dir.join(JOURNAL_FILE), false).unwrap();
    assert_eq!(rec.duplicates, 0, "no sample was generated twice");
    let refusals = [&a, &b]
        .iter()
        .filter(|o| !o.status.success())
        .map(|o| text(&o.stderr))
        .collect::<Vec<_>>();
    // One ran; the other was refused, or (if the first had already finished) resumed a
    // complete run. Either way one manifest and one journal.
    assert!(refusals.len() <= 1, "{refusals:?}");
    // The refused one names the holder's pid, or, if it looked before the holder wrote
    // run.lock's text, says a writer may be just starting.
    for e in &refusals {
        assert!(
            e.contains("in use by another process (pid ")
                || e.contains("in use by another process (a reader such as `runner score`, or a writer just starting)"),
            "{e}"
        );
    }
}

#[test]
fn a_journal_cannot_be_taken_over_by_another_command_once_its_manifest_is_gone() {
    let out = scratch("bound");
    ok(&oracle(&out, &[]));
    let dir = out.join("oracle").join("creg-v1.0");
    let before = std::fs::read(dir.join(JOURNAL_FILE)).unwrap();
    std::fs::remove_file(dir.join(MANIFEST_FILE)).unwrap();
    for other in [&["--max-new-tokens", "64"][..], &["--limit", "1"][..]] {
        let err = refused(&oracle(&out, other));
        assert!(
            err.contains("written under another run's identity") && err.contains("--fresh"),
            "{err}"
        );
    }
    assert!(!dir.join(MANIFEST_FILE).exists());
    assert_eq!(std::fs::read(dir.join(JOURNAL_FILE)).unwrap(), before);
    // The command that wrote it resumes and restores its manifest.
    let o = ok(&oracle(&out, &[]));
    assert!(String::from_utf8_lossy(&o.stdout).contains("0 generated now"));
    assert!(dir.join(MANIFEST_FILE).is_file());

    // A manifest swapped for another run's: scoring is refused, rebind sets the
    // samples aside, and the folder scores again (empty) under its manifest.
    let other = out.join("oracle").join("creg-v1.0.2");
    ok(&oracle(&out, &["--fresh", "--seeds", "42"]));
    std::fs::copy(other.join(MANIFEST_FILE), dir.join(MANIFEST_FILE)).unwrap();
    let err = refused(&["score", s(&dir)]);
    assert!(err.contains("journal rebind"), "{err}");
    ok(&["journal", "rebind", s(&dir)]);
    assert!(dir.join("journal.foreign.jsonl").is_file());
    assert_eq!(
        std::fs::read(dir.join("journal.foreign.jsonl")).unwrap(),
        before,
        "the set-aside samples are kept byte for byte"
    );
}

#[test]
fn misspelled_and_repeated_suite_records_are_refused_with_line_and_field() {
    let dir = scratch("strict");
    let frozen = creg::frozen::FROZEN_JSONL;
    let lines: Vec<&str> = frozen.lines().collect();
    let misspelled = dir.join("misspelled.jsonl");
    std::fs::write(
        &misspelled,
        format!(
            "{}\n{}\n",
            lines[0],
            lines[1].replacen("\"stale_evidence_ids\"", "\"stale_evidence_idz\"", 1)
        ),
    )
    .unwrap();
    let want = "misspelled.jsonl:2: field `evaluation.belief_trajectory[0].stale_evidence_idz`: unknown field, did you mean `stale_evidence_ids`?";
    let err = refused(&["suite", "check", s(&misspelled)]);
    assert!(err.contains(want), "{err}");
    let err = refused(&oracle(&dir, &["--suite-file", s(&misspelled)]));
    assert!(err.contains(want), "{err}");

    let repeated = dir.join("repeated.jsonl");
    std::fs::write(
        &repeated,
        format!("{}\n{}\n{}\n", lines[0], lines[1], lines[0]),
    )
    .unwrap();
    let err = refused(&["suite", "check", s(&repeated)]);
    assert!(
        err.contains("repeated.jsonl:3: scenario") && err.contains("first on line 1"),
        "{err}"
    );

    let err = refused(&oracle(&dir, &["--seeds", "42,42,43"]));
    assert!(err.contains("seed 42 is given twice"), "{err}");
}

#[test]
fn pooled_runs_holding_the_same_samples_are_refused_unless_told_how() {
    let out = scratch("pool");
    ok(&oracle(&out, &["--run", "a"]));
    ok(&oracle(&out, &["--run", "b", "--seeds", "42,45"]));
    let (a, b) = (out.join("oracle").join("a"), out.join("oracle").join("b"));
    let combined = out.join("combined");
    let err = refused(&["score", s(&a), s(&b), "--out", s(&combined)]);
    assert!(
        err.contains("would count twice") && err.contains("--keep-first"),
        "{err}"
    );
    assert!(!combined.exists(), "nothing written");
    ok(&["score", s(&a), s(&b), "--out", s(&combined), "--keep-first"]);
    assert!(combined.join("scores.json").is_file());
}

/// Every file under `dir` with its bytes and modification time.
fn files_of(dir: &Path) -> Vec<(std::path::PathBuf, Vec<u8>, std::time::SystemTime)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(files_of(&path));
        } else {
            let modified = std::fs::metadata(&path).unwrap().modified().unwrap();
            out.push((path.clone(), std::fs::read(&path).unwrap(), modified));
        }
    }
    out.sort();
    out
}

fn set_read_only(dir: &Path, read_only: bool) {
    let mut p = std::fs::metadata(dir).unwrap().permissions();
    p.set_readonly(read_only);
    std::fs::set_permissions(dir, p).unwrap();
}

/// `score … --out DIR` only reads the runs it is given: a shared or read-only run folder
/// stays as it was, file for file and time for time (the tests run as root too, where
/// permissions alone would not show a write).
#[test]
fn score_with_out_only_reads_the_runs_it_is_given() {
    let out = scratch("score-out");
    ok(&oracle(&out, &["--run", "a"]));
    ok(&oracle(&out, &["--run", "b", "--seeds", "45"]));
    let runs = [out.join("oracle").join("a"), out.join("oracle").join("b")];
    let before: Vec<_> = runs.iter().map(|d| files_of(d)).collect();
    runs.iter().for_each(|d| set_read_only(d, true));
    let (combined, one) = (out.join("combined"), out.join("one"));
    let both = runner(&["score", s(&runs[0]), s(&runs[1]), "--out", s(&combined)]);
    let single = runner(&["score", s(&runs[0]), "--out", s(&one)]);
    runs.iter().for_each(|d| set_read_only(d, false));
    for o in [&both, &single] {
        assert!(o.status.success(), "{}", text(&o.stderr));
    }
    let after: Vec<_> = runs.iter().map(|d| files_of(d)).collect();
    assert!(before == after, "score --out wrote into its inputs");
    for dir in [&combined, &one] {
        assert!(dir.join("report.html").is_file(), "{}", dir.display());
    }
    assert!(text(&single.stderr).contains(&format!("reports of the run in {}", one.display())));
    let summary = std::fs::read_to_string(combined.join("summary.md")).unwrap();
    assert!(summary.contains("combined runs"), "{summary}");
}

#[test]
fn bad_limits_names_and_folders_are_refused_before_any_work() {
    let out = scratch("limits");
    for (extra, want) in [
        (&["--limit", "0"][..], "--limit 0 keeps nothing"),
        (&["--run", ""][..], "--run \"\""),
        (&["--run", ".."][..], "--run \"..\""),
        (
            &[
                "--shard",
                "5/6",
                "--limit",
                "1",
                "--condition",
                "full_graph",
            ][..],
            "",
        ),
    ] {
        let o = runner(&oracle(&out, extra));
        if want.is_empty() {
            // A shard may or may not hold a request of so small a plan; if it holds none
            // the run is refused as empty.
            if !o.status.success() {
                assert!(
                    text(&o.stderr).contains("the plan holds no request"),
                    "{}",
                    text(&o.stderr)
                );
            }
            continue;
        }
        assert!(!o.status.success(), "{extra:?}");
        assert!(
            text(&o.stderr).contains(want),
            "{extra:?}: {}",
            text(&o.stderr)
        );
    }
    let file = out.join("a-file");
    std::fs::write(&file, "x").unwrap();
    let err = refused(&oracle(&file, &[]));
    assert!(err.contains("is a file, not a folder"), "{err}");
}

#[test]
fn new_tokens_past_the_models_context_are_refused_before_any_allocation() {
    let dir = scratch("context");
    let model = dir.join("fixture");
    write_fixture(Arch::Qwen2, Size::Tiny, &model).unwrap();
    let started = Instant::now();
    let err = refused(&[
        "--model",
        s(&model),
        "--tasks",
        "belief",
        "--limit",
        "1",
        "--condition",
        "full_graph",
        "--device",
        "cpu",
        "--quiet",
        "--out",
        s(&dir),
        "--max-new-tokens",
        "1000000000",
    ]);
    assert!(
        err.contains("does not fit the model's context") && err.contains("4096 positions"),
        "{err}"
    );
    assert!(
        !dir.join("fixture")
            .join("creg-v1.0")
            .join(JOURNAL_FILE)
            .exists(),
        "no journal is left behind"
    );
    let err = refused(&[
        "generate",
        "--model",
        s(&model),
        "--prompt",
        "hi",
        "--device",
        "cpu",
        "--max-new-tokens",
        "6000",
    ]);
    assert!(err.contains("does not fit the model's context"), "{err}");
    assert!(started.elapsed() < Duration::from_secs(120));
}

#[test]
fn each_cause_is_printed_once() {
    let err = refused(&["suite", "check", "/nonexistent/suite.jsonl"]);
    let cause = std::io::Error::from(std::io::ErrorKind::NotFound).to_string();
    let os = "(os error 2)";
    assert_eq!(err.matches(os).count(), 1, "{err} ({cause})");
    assert_eq!(err.lines().count(), 1, "{err}");
}
