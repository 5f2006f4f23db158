//! Helpers the integration tests share: the `runner` binary, scratch folders, and the
//! JSON a run writes.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// The `runner` binary: `CREG_TEST_RUNNER` where the tests run away from the tree that
/// built them (a bundle carried to a GPU machine, `scripts/gpu-bundle`), else cargo's.
pub fn runner_exe() -> PathBuf {
    std::env::var_os("CREG_TEST_RUNNER").map_or_else(
        || PathBuf::from(env!("CARGO_BIN_EXE_runner")),
        PathBuf::from,
    )
}

/// The binary crate's folder (its test data): `CREG_TEST_CRATE_DIR` for a carried test
/// binary, as for [`runner_exe`], else the folder cargo built from.
pub fn crate_dir() -> PathBuf {
    std::env::var_os("CREG_TEST_CRATE_DIR")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from)
}

/// The repository's root (`models.toml`, `scripts/`; `../shared` beside it).
pub fn repo_root() -> PathBuf {
    crate_dir().join("../..")
}

/// Runs the `runner` binary; the caller judges the exit status.
pub fn runner(args: &[&str]) -> Output {
    Command::new(runner_exe())
        .args(args)
        .output()
        .expect("the runner binary starts")
}

/// Runs the `runner` binary and fails the test, with its stderr, unless it succeeds.
#[track_caller]
pub fn ok(args: &[&str]) -> Output {
    let out = runner(args);
    assert!(
        out.status.success(),
        "runner {args:?} failed:\n{}",
        text(&out.stderr)
    );
    out
}

/// A scratch path under the temp folder, absent: named after the calling test file,
/// `name` and the process, so that tests running together never share one.
#[track_caller]
pub fn scratch(name: &str) -> PathBuf {
    let file = Path::new(std::panic::Location::caller().file());
    let stem = file.file_stem().map_or_else(
        || "it".to_string(),
        |s| s.to_string_lossy().replace('_', "-"),
    );
    let dir = std::env::temp_dir().join(format!("{stem}-{name}-{}", std::process::id()));
    // Tests run in parallel threads of one process: two handed the same folder remove
    // and rewrite each other's files, and fail only when the timing says so. Refuse
    // the second at once instead.
    static GIVEN: std::sync::Mutex<Vec<PathBuf>> = std::sync::Mutex::new(Vec::new());
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    assert!(
        !given.contains(&dir),
        "scratch folder {} handed out twice in one run: give each test its own name",
        dir.display()
    );
    given.push(dir.clone());
    drop(given);
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// Like [`scratch`], created empty.
#[track_caller]
pub fn scratch_dir(name: &str) -> PathBuf {
    let dir = scratch(name);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A path as a command-line argument.
pub fn s(p: &Path) -> &str {
    p.to_str().expect("temp paths are UTF-8")
}

/// A JSON file, read and parsed; a failure names the file.
pub fn json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// A run folder's journal, one value per line.
pub fn journal(dir: &Path) -> Vec<Value> {
    std::fs::read_to_string(dir.join("journal.jsonl"))
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Writes the tiny qwen2 fixture into `dir`, its tokenizer trained on the suite's
/// prompts, so that CREG prompts encode to few tokens and a run stays short.
pub fn write_suite_fixture(dir: &Path) {
    use runner_engine::candle::fixture::{write_fixture_with, Arch, Size};
    let corpus = creg::workload::tokenizer_corpus().unwrap();
    write_fixture_with(
        Arch::Qwen2,
        Size::Tiny,
        dir,
        Some((corpus, creg::workload::SMOKE_VOCAB)),
    )
    .unwrap();
}

/// `cmd` run with its output captured, killed past a minute (a hang must fail the test,
/// not stall the suite); returns the output and the time it took.
pub fn within_a_minute(cmd: &mut Command) -> (Output, Duration) {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(60) {
            child.kill().unwrap();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let took = start.elapsed();
    (child.wait_with_output().unwrap(), took)
}
