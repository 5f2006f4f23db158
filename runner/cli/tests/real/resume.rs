//! A run of a real checkpoint killed (SIGKILL) after its first journaled samples and
//! resumed ends with exactly the journal of an uninterrupted run: same samples, same
//! texts and tokens, none twice: SmolLM2's folder, and the qwen2 GGUF file of
//! Qwen2.5-Coder-0.5B.

use crate::{real, runner_exe, scratch, SMOLLM2};
use runner_core::journal::{read_records, JOURNAL_FILE};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

type Outputs = BTreeMap<(String, u64), (String, usize, String)>;

fn args(model: &Path, out: &Path) -> Vec<String> {
    // Half of the action task's prompts of one scenario per regime (a shard of the 7),
    // one seed, one row at a time, so that samples reach the journal one by one.
    [
        "--model",
        &model.display().to_string(),
        "--condition",
        "full_graph",
        "--tasks",
        "action",
        "--limit",
        "1",
        "--shard",
        "0/2",
        "--seeds",
        "42",
        "--max-new-tokens",
        "48",
        "--max-batch",
        "1",
        "--device",
        "cpu",
        "--quiet",
        "--out",
        &out.display().to_string(),
    ]
    .map(String::from)
    .to_vec()
}

/// The run's journal: `<out>/<model's folder name>/creg-v1.0.shard-0-of-2/`, whatever
/// name the runner gives the model.
fn journal(out: &Path) -> std::path::PathBuf {
    let shard = |model: std::fs::DirEntry| model.path().join("creg-v1.0.shard-0-of-2");
    std::fs::read_dir(out)
        .into_iter()
        .flatten()
        .flatten()
        .map(shard)
        .find(|run| run.is_dir())
        .unwrap_or_else(|| out.join("none"))
        .join(JOURNAL_FILE)
}

fn outputs(out: &Path) -> Outputs {
    let rec = read_records(&journal(out), false).unwrap();
    assert_eq!(rec.duplicates, 0, "no sample journaled twice");
    rec.records
        .iter()
        .map(|r| {
            (
                r.key(),
                (r.text.clone(), r.tokens, format!("{:?}", r.finish_reason)),
            )
        })
        .collect()
}

fn lines(out: &Path) -> usize {
    std::fs::read_to_string(journal(out)).map_or(0, |t| t.lines().count())
}

#[test]
fn a_killed_run_of_smollm2_resumes_to_the_uninterrupted_journal() {
    let Some(model) = real(SMOLLM2) else { return };
    killed_and_resumed(&model, "smollm2");
}

#[test]
fn a_killed_run_of_the_qwen2_gguf_resumes_to_the_uninterrupted_journal() {
    let Some(model) = real("gguf/qwen2.5-coder-0.5b-instruct-awq.gguf") else {
        return;
    };
    killed_and_resumed(&model, "qwen2");
}

fn killed_and_resumed(model: &Path, name: &str) {
    let model = model.to_path_buf();
    let whole = scratch(&format!("resume-whole-{name}"));
    let o = Command::new(runner_exe())
        .args(args(&model, &whole))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let want = outputs(&whole);
    assert!(
        (2..7).contains(&want.len()),
        "a shard of the 7 prompts: {}",
        want.len()
    );

    let cut = scratch(&format!("resume-cut-{name}"));
    let mut child = Command::new(runner_exe())
        .args(args(&model, &cut))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while lines(&cut) == 0 && start.elapsed() < Duration::from_secs(600) {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let at_kill = lines(&cut);
    assert!(
        at_kill > 0 && at_kill < want.len(),
        "the kill landed mid-run ({at_kill} of {} journaled)",
        want.len()
    );
    let o = Command::new(runner_exe())
        .args(args(&model, &cut))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(lines(&cut), want.len(), "one line per sample");
    assert_eq!(outputs(&cut), want, "the same samples, identical outputs");
}
