//! The runner end to end, through the `runner` binary: crash safety under SIGKILL,
//! shards, resume and its refusals, bad output folders, offline rescoring.

use super::common::{runner, s, scratch, text};
use runner_core::journal::{batches, read_records, SampleRecord, JOURNAL_FILE, MANIFEST_FILE};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// A tiny model whose tokenizer was trained on the suite's prompts (written once).
fn fixture() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = scratch("models").join("fixture");
        super::common::write_suite_fixture(&dir);
        dir
    })
}

/// A small plan on the fixture model: one condition, belief prefixes of the first
/// scenario of each regime, three seeds (69 samples), a journal append per request.
fn fixture_args(out: &Path) -> Vec<String> {
    fixture_plan(out, "belief")
}

fn fixture_plan(out: &Path, tasks: &str) -> Vec<String> {
    [
        "--model",
        s(fixture()),
        "--condition",
        "full_graph",
        "--tasks",
        tasks,
        "--limit",
        "1",
        "--max-new-tokens",
        "6",
        "--max-batch",
        "3",
        "--device",
        "cpu",
        "--quiet",
        "--out",
        s(out),
    ]
    .map(String::from)
    .to_vec()
}

fn run_dir(out: &Path, model: &str) -> PathBuf {
    out.join(model).join("creg-v1.0")
}

/// (request, seed) -> (text, tokens, finish reason) of a journal.
type Outputs = BTreeMap<(String, u64), (String, usize, String)>;

fn outputs(records: &[SampleRecord]) -> Outputs {
    records
        .iter()
        .map(|r| {
            (
                r.key(),
                (r.text.clone(), r.tokens, format!("{:?}", r.finish_reason)),
            )
        })
        .collect()
}

/// The uninterrupted, unsharded fixture run (made once), with how long it took and
/// how long a start-up that finds everything done takes.
struct Reference {
    outputs: Outputs,
    whole: Duration,
    startup: Duration,
}

fn reference() -> &'static Reference {
    static REF: OnceLock<Reference> = OnceLock::new();
    REF.get_or_init(|| {
        let out = scratch("reference");
        let args = fixture_args(&out);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let t = Instant::now();
        let o = runner(&args);
        let whole = t.elapsed();
        assert!(o.status.success(), "{}", text(&o.stderr));
        let t = Instant::now();
        assert!(runner(&args).status.success());
        let startup = t.elapsed();
        let rec = read_records(&run_dir(&out, "fixture").join(JOURNAL_FILE), false).unwrap();
        assert_eq!(
            rec.records.len(),
            69,
            "7 scenarios' belief prefixes x 3 seeds"
        );
        Reference {
            outputs: outputs(&rec.records),
            whole,
            startup,
        }
    })
}

#[test]
fn a_run_killed_at_random_points_resumes_to_exactly_the_uninterrupted_journal() {
    let r = reference();
    let want = &r.outputs;
    // Each kill waits for the journal to grow by at least one batch (so that it lands
    // mid-run whatever the machine's speed), then a deterministic "random" delay of up
    // to about one request's work, so that it also hits generation, the write itself
    // and the report at the end. A run that finishes before 20 kills is checked too,
    // and another trial starts.
    let per_request = r.whole.saturating_sub(r.startup) / 23;
    let window = per_request.as_micros().max(1) as u64;
    let mut state = 0x6b69_6c6cu64;
    let mut next_delay = || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        Duration::from_micros((state >> 33) % window)
    };
    let (mut kills, mut mid_run, mut trials) = (0, 0, 0);
    while kills < 20 {
        trials += 1;
        let out = scratch(&format!("sigkill-{trials}"));
        let args = fixture_args(&out);
        let journal = run_dir(&out, "fixture").join(JOURNAL_FILE);
        let lines = || {
            std::fs::read(&journal)
                .map(|b| b.iter().filter(|&&c| c == b'\n').count())
                .unwrap_or(0)
        };
        loop {
            let mut child = Command::new(crate::common::runner_exe())
                .args(&args)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            if kills >= 24 {
                assert!(child.wait().unwrap().success(), "the final resume failed");
                break;
            }
            let target = lines() + 1;
            let waited = Instant::now();
            while lines() < target
                && child.try_wait().unwrap().is_none()
                && waited.elapsed() < Duration::from_secs(120)
            {
                std::thread::sleep(Duration::from_millis(2));
            }
            std::thread::sleep(next_delay());
            if let Some(status) = child.try_wait().unwrap() {
                assert!(status.success(), "a resume failed on its own");
                break;
            }
            child.kill().unwrap(); // SIGKILL
            child.wait().unwrap();
            kills += 1;
            let n = lines();
            if n > 0 && n < want.len() {
                mid_run += 1;
            }
        }
        let raw = std::fs::read_to_string(&journal).unwrap();
        let rec = read_records(&journal, false).unwrap();
        assert_eq!(rec.duplicates, 0, "no sample journaled twice");
        assert_eq!(rec.torn_bytes, 0);
        assert_eq!(raw.lines().count(), want.len(), "one line per sample");
        assert_eq!(
            &outputs(&rec.records),
            want,
            "the same samples, identical outputs"
        );
    }
    assert!(
        mid_run >= 10,
        "only {mid_run} of {kills} kills landed between the first and the last sample"
    );
}

#[test]
fn shard_runs_merge_into_the_unsharded_run() {
    let want = &reference().outputs;
    let out = scratch("shards");
    let mut dirs = Vec::new();
    for i in 0..3 {
        let mut args = fixture_args(&out);
        args.extend(["--shard".to_string(), format!("{i}/3")]);
        let o = runner(&args.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(o.status.success(), "{}", text(&o.stderr));
        dirs.push(
            out.join("fixture")
                .join(format!("creg-v1.0.shard-{i}-of-3")),
        );
    }
    let sizes: Vec<usize> = dirs
        .iter()
        .map(|d| {
            read_records(&d.join(JOURNAL_FILE), false)
                .unwrap()
                .records
                .len()
        })
        .collect();
    assert!(sizes.iter().all(|&n| n > 0 && n < want.len()), "{sizes:?}");
    assert_eq!(sizes.iter().sum::<usize>(), want.len());

    let merged = out.join("merged");
    let mut args = vec!["merge"];
    args.extend(dirs.iter().map(|d| s(d)));
    args.extend(["--out", s(&merged)]);
    let o = runner(&args);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let rec = read_records(&merged.join(JOURNAL_FILE), false).unwrap();
    assert_eq!(
        &outputs(&rec.records),
        want,
        "the union is the unsharded run"
    );
    assert!(merged.join("scores.json").is_file() && merged.join("summary.md").is_file());

    // Each shard's batch figures come along: the merged summary pools them and names
    // every shard's invocation.
    let mut shards = Vec::new();
    for d in &dirs {
        shards.extend(batches::read(d).unwrap());
    }
    assert_eq!(shards.len(), 3, "one invocation per shard");
    let pooled = batches::pooled(&shards).describe().unwrap();
    let summary = std::fs::read_to_string(merged.join("summary.md")).unwrap();
    let line = summary
        .lines()
        .find(|l| l.contains("batch utilization"))
        .unwrap_or_else(|| panic!("no utilization line in:\n{summary}"));
    assert!(
        line.contains(&format!("{pooled}, pooled over 3 invocations")),
        "{pooled} not in {line}"
    );
    for i in 0..3 {
        assert!(
            line.contains(&format!("shard {i}/3 invocation 1")),
            "{line}"
        );
    }

    // A shard of another plan (other seeds) is refused, naming what differs.
    let mut other = fixture_args(&out.join("other"));
    other.extend(["--shard", "0/3", "--seeds", "7"].map(String::from));
    let o = runner(&other.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(o.status.success(), "{}", text(&o.stderr));
    let stranger = out
        .join("other")
        .join("fixture")
        .join("creg-v1.0.shard-0-of-3");
    let o = runner(&[
        "merge",
        s(&dirs[1]),
        s(&stranger),
        "--out",
        s(&out.join("bad")),
    ]);
    assert!(!o.status.success());
    assert!(
        text(&o.stderr).contains("plan.seeds"),
        "{}",
        text(&o.stderr)
    );
}

/// An oracle run of the belief prefixes of the first two scenarios per regime.
fn oracle_args(out: &Path, extra: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = [
        "--model",
        "oracle",
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
    v.extend(extra.iter().map(|x| x.to_string()));
    v
}

fn run_ok(args: &[String]) -> Output {
    let o = runner(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(o.status.success(), "{}", text(&o.stderr));
    o
}

#[test]
fn runner_without_a_subcommand_runs_and_refuses_to_resume_another_plan() {
    let out = scratch("resume");
    run_ok(&oracle_args(&out, &[]));
    let dir = run_dir(&out, "oracle");
    assert!(dir.join(MANIFEST_FILE).is_file());
    // A baseline decodes no batch: no figures kept, no utilization line.
    assert!(!dir.join(batches::BATCHES_FILE).exists());
    let summary = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(summary.contains("- run oracle: "), "{summary}");
    assert!(!summary.contains("utilization"), "{summary}");
    let before = std::fs::read(dir.join(JOURNAL_FILE)).unwrap();

    // Same command: resumes with nothing left to do.
    let o = run_ok(&oracle_args(&out, &[]));
    assert!(
        text(&o.stdout).contains("0 generated now"),
        "{}",
        text(&o.stdout)
    );
    assert_eq!(std::fs::read(dir.join(JOURNAL_FILE)).unwrap(), before);

    // Another plan in the same folder: refused, naming the field and the way out.
    let o = runner(
        &oracle_args(&out, &["--seeds", "42"])
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    assert!(!o.status.success());
    let err = text(&o.stderr);
    assert!(
        err.contains("plan.seeds") && err.contains("--fresh"),
        "{err}"
    );
    assert_eq!(std::fs::read(dir.join(JOURNAL_FILE)).unwrap(), before);

    // --fresh starts beside it.
    run_ok(&oracle_args(&out, &["--seeds", "42", "--fresh"]));
    let beside = out.join("oracle").join("creg-v1.0.2");
    let n = read_records(&beside.join(JOURNAL_FILE), false)
        .unwrap()
        .records
        .len();
    assert_eq!(n * 3, before.iter().filter(|&&c| c == b'\n').count());
    assert_eq!(std::fs::read(dir.join(JOURNAL_FILE)).unwrap(), before);
}

#[test]
fn a_torn_or_emptied_journal_resumes_without_losing_a_line() {
    let out = scratch("torn");
    run_ok(&oracle_args(&out, &[]));
    let path = run_dir(&out, "oracle").join(JOURNAL_FILE);
    let full = std::fs::read_to_string(&path).unwrap();
    let total = full.lines().count();

    // Keep 10 lines and half of the 11th, as a crash mid-write leaves it.
    let kept: String = full.lines().take(10).map(|l| format!("{l}\n")).collect();
    let eleventh = full.lines().nth(10).unwrap();
    std::fs::write(&path, format!("{kept}{}", &eleventh[..eleventh.len() / 2])).unwrap();
    let o = run_ok(&oracle_args(&out, &[]));
    assert!(
        text(&o.stderr).contains("torn last line"),
        "{}",
        text(&o.stderr)
    );
    let after = std::fs::read_to_string(&path).unwrap();
    assert!(after.starts_with(&kept), "the intact lines are untouched");
    assert_eq!(after.lines().count(), total);
    let rec = read_records(&path, false).unwrap();
    assert_eq!((rec.records.len(), rec.duplicates), (total, 0));

    // An empty journal (a crash before the first write) starts from nothing.
    std::fs::write(&path, "").unwrap();
    run_ok(&oracle_args(&out, &[]));
    assert_eq!(
        read_records(&path, false).unwrap().records.len(),
        total,
        "every sample regenerated"
    );
}

#[test]
fn bad_output_folders_and_models_give_clear_errors() {
    // /proc does not take new folders, even for root.
    let o = runner(
        &oracle_args(Path::new("/proc/creg-runner-test"), &[])
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
    );
    assert!(!o.status.success());
    let err = text(&o.stderr);
    assert!(
        err.contains("/proc/creg-runner-test") && err.contains("cannot"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");

    let o = runner(&["--model", "qwen-7b", "--quiet"]);
    assert!(!o.status.success());
    let err = text(&o.stderr);
    assert!(
        err.contains("qwen2.5-7b") && err.contains("oracle") && err.contains("qwen-7b"),
        "{err}"
    );

    let o = runner(&["models", "qwen-7b"]);
    assert!(!o.status.success());
    assert!(
        text(&o.stderr).contains("qwen2.5-7b"),
        "{}",
        text(&o.stderr)
    );
    let o = runner(&["models", "qwen2.5-7b"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(text(&o.stdout).contains("a09a35458c702b33eeacc393d103063234e8bc28"));

    let o = runner(&["--model", "oracle", "--condition", "fullgraph"]);
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("full_graph"));
}

#[test]
fn offline_rescoring_reproduces_the_streamed_reports() {
    let out = scratch("rescore");
    let run = run_ok(&fixture_plan(&out, "all"));
    let dir = run_dir(&out, "fixture");
    // The run's batch utilization, as the terminal showed it, is kept in its summary.
    let printed = text(&run.stdout);
    let figures = printed
        .lines()
        .find_map(|l| l.strip_prefix("Batch utilization (rows decoded per row-step offered): "))
        .unwrap_or_else(|| panic!("no utilization line in:\n{printed}"));
    let kept =
        format!("- run fixture batch utilization (rows decoded per row-step offered): {figures}\n");
    let summary = || std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(summary().contains(&kept), "{kept}\nnot in:\n{}", summary());
    let streamed = std::fs::read(dir.join("scores.json")).unwrap();
    std::fs::remove_file(dir.join("scores.json")).unwrap();
    let o = runner(&["score", s(&dir)]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert_eq!(std::fs::read(dir.join("scores.json")).unwrap(), streamed);
    assert!(
        text(&o.stdout).contains("fixture"),
        "the summary is printed"
    );
    assert!(summary().contains(&kept), "rescoring keeps it");

    // Each journaled sample carries the scores the scorer gave it while streaming.
    let rec = read_records(&dir.join(JOURNAL_FILE), false).unwrap();
    assert!(rec
        .records
        .iter()
        .all(|r| r.scores.get("category").is_some()));
}

#[test]
fn the_slurm_scripts_run_one_shard_per_array_task_and_merge_them() {
    let scripts = crate::common::repo_root().join("scripts");
    let out = scratch("slurm");
    for task in 0..3 {
        let o = Command::new("bash")
            .arg(scripts.join("slurm-sweep.sbatch"))
            .args(["--", "--tasks", "belief", "--limit", "1", "--quiet"])
            .env("MODEL", "oracle")
            .env("OUT", &out)
            .env("DEVICE", "cpu")
            .env("RUNNER", crate::common::runner_exe())
            .env("SLURM_ARRAY_TASK_MIN", "0")
            .env("SLURM_ARRAY_TASK_MAX", "2")
            .env("SLURM_ARRAY_TASK_ID", task.to_string())
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o.stderr));
        assert!(out
            .join("oracle")
            .join(format!("creg-v1.0.shard-{task}-of-3"))
            .join(JOURNAL_FILE)
            .is_file());
    }
    let o = Command::new("bash")
        .arg(scripts.join("slurm-merge.sh"))
        .args(["oracle", "3", s(&out)])
        .env("RUNNER", crate::common::runner_exe())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o.stderr));
    let merged = read_records(&run_dir(&out, "oracle").join(JOURNAL_FILE), false).unwrap();
    // 23 belief prefixes of the first scenario per regime x 4 conditions x 3 seeds.
    assert_eq!(merged.records.len(), 23 * 4 * 3);
    assert!(!text(&o.stderr).contains("missing"), "{}", text(&o.stderr));

    // The merged run is the unsharded run's folder: the plain command resumes it with
    // nothing left to do.
    let mut args: Vec<String> = ["--model", "oracle", "--tasks", "belief", "--limit", "1"]
        .map(String::from)
        .to_vec();
    args.extend([
        "--quiet".to_string(),
        "--out".to_string(),
        s(&out).to_string(),
    ]);
    let o = run_ok(&args);
    assert!(
        text(&o.stdout).contains("0 generated now"),
        "{}",
        text(&o.stdout)
    );
}

#[test]
fn merge_carries_the_shards_standing_failed_samples() {
    use runner_core::journal::failed::{self, FailedLog, FAILED_FILE};
    use runner_core::journal::{identity_sha256, read_manifest, Journal};
    let out = scratch("merge-failed");
    let dirs: Vec<PathBuf> = (0..2)
        .map(|i| {
            run_ok(&oracle_args(&out, &["--shard", &format!("{i}/2")]));
            run_dir(&out, "oracle").with_file_name(format!("creg-v1.0.shard-{i}-of-2"))
        })
        .collect();
    // Shard 0 lost its last sample: its journal line goes, a failure takes its place.
    let path = dirs[0].join(JOURNAL_FILE);
    let journal = std::fs::read_to_string(&path).unwrap();
    let kept = journal.trim_end().rsplit_once('\n').unwrap().0;
    std::fs::write(&path, format!("{kept}\n")).unwrap();
    let lost = read_records(&path, false).unwrap().records.len();
    let answered = read_records(&dirs[1].join(JOURNAL_FILE), false).unwrap();
    let (lost_id, lost_seed) = {
        let all = journal.lines().last().unwrap();
        let v: serde_json::Value = serde_json::from_str(all).unwrap();
        (
            v["request_id"].as_str().unwrap().to_string(),
            v["seed"].as_u64().unwrap(),
        )
    };
    let elsewhere = answered.records[0].key();
    {
        let manifest = read_manifest(&dirs[0]).unwrap().unwrap();
        let (j, _) = Journal::open(&dirs[0], &manifest).unwrap();
        let mut log = FailedLog::open(&j).unwrap();
        log.append(&lost_id, lost_seed, "body over 10 MB").unwrap();
        // Failed in shard 0, answered in shard 1: not carried.
        log.append(&elsewhere.0, elsewhere.1, "refused").unwrap();
    }
    // A line of another run's identity is not shard 0's.
    let mut lines = std::fs::read_to_string(dirs[0].join(FAILED_FILE)).unwrap();
    lines.push_str(
        "{\"request_id\":\"x\",\"seed\":0,\"reason\":\"r\",\"identity_sha256\":\"other\"}\n",
    );
    std::fs::write(dirs[0].join(FAILED_FILE), lines).unwrap();

    let merged = run_dir(&out, "oracle");
    let mut args = vec!["merge"];
    args.extend(dirs.iter().map(|d| s(d)));
    args.extend(["--out", s(&merged)]);
    for _ in 0..2 {
        // Twice: a merge rerun writes the failure no second time.
        let o = runner(&args);
        assert!(o.status.success(), "{}", text(&o.stderr));
    }
    let ours = identity_sha256(&read_manifest(&merged).unwrap().unwrap().identity);
    let want = format!(
        "{{\"request_id\":\"{lost_id}\",\"seed\":{lost_seed},\"reason\":\"body over 10 MB\",\
         \"identity_sha256\":\"{ours}\"}}\n"
    );
    let carried = std::fs::read_to_string(merged.join(FAILED_FILE)).unwrap_or_default();
    assert_eq!(
        carried, want,
        "only the standing failure, bound to the merged run"
    );
    assert_eq!(failed::standing(&merged).unwrap().len(), 1);
    let n = read_records(&merged.join(JOURNAL_FILE), false)
        .unwrap()
        .records
        .len();
    assert_eq!(n, lost + answered.records.len());
    let summary = std::fs::read_to_string(merged.join("summary.md")).unwrap();
    assert!(summary.contains("## Failed samples"), "{summary}");
    // A resume of the merged run skips it, as the shard's would.
    let o = run_ok(&oracle_args(&out, &[]));
    assert!(
        text(&o.stdout).contains("0 generated now"),
        "{}",
        text(&o.stdout)
    );
}
