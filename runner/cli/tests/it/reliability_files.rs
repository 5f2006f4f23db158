//! Faults in the run folder itself, through the `runner` binary: symlinks planted where
//! the runner writes, `run.lock` deleted or replaced while a run holds the folder, and a
//! disk that fills up while reports are written.

use super::common::{ok, runner, s, scratch_dir as scratch, text};
use runner_core::journal::lock::{RunLock, LOCK_FILE};
use runner_core::journal::{read_records, JOURNAL_FILE, MANIFEST_FILE};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A small oracle run of the belief task into `out`.
fn oracle<'a>(out: &'a Path, limit: &'a str) -> Vec<&'a str> {
    vec![
        "--model",
        "oracle",
        "--tasks",
        "belief",
        "--quiet",
        "--limit",
        limit,
        "--out",
        s(out),
    ]
}

fn run_dir(out: &Path) -> PathBuf {
    out.join("oracle").join("creg-v1.0")
}

fn refused(args: &[&str]) -> String {
    let o = runner(args);
    assert!(!o.status.success(), "{args:?} should be refused");
    assert_eq!(o.status.code(), Some(2), "an error, not a crash");
    text(&o.stderr)
}

fn regular(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_file())
}

#[test]
fn symlinks_planted_in_a_run_folder_cannot_make_a_run_write_outside_it() {
    let out = scratch("symlinks");
    let outside = scratch("symlinks-outside");
    let dir = run_dir(&out);
    std::fs::create_dir_all(&dir).unwrap();
    // The old fixed temporary names, a plausible random one, the lock file, and a
    // report's own name: each a symlink to a file of someone else's outside the run.
    let planted = [
        ".report.html.tmp",
        ".manifest.json.tmp",
        ".scores.json.tmp",
        ".summary.md.tmp",
        ".run.lock.tmp",
        ".report.html.0123456789abcdef.tmp",
        LOCK_FILE,
        "summary.md",
    ];
    for (i, name) in planted.iter().enumerate() {
        let victim = outside.join(format!("victim-{i}"));
        std::fs::write(&victim, format!("precious {i}\n")).unwrap();
        std::os::unix::fs::symlink(&victim, dir.join(name)).unwrap();
    }
    ok(&oracle(&out, "1"));
    ok(&["score", s(&dir)]);
    for (i, name) in planted.iter().enumerate() {
        let victim = outside.join(format!("victim-{i}"));
        let now = std::fs::read_to_string(&victim).unwrap();
        assert!(
            now == format!("precious {i}\n"),
            "{} was written through {} ({} bytes now)",
            victim.display(),
            name,
            now.len()
        );
    }
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), planted.len());
    for name in [
        "report.html",
        "manifest.json",
        "scores.json",
        "summary.md",
        LOCK_FILE,
    ] {
        assert!(regular(&dir.join(name)), "{name} is not a regular file");
    }
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains("<html"), "a report, not a victim");
}

#[test]
fn a_journal_file_that_is_a_symlink_is_refused_not_appended_through() {
    // The journal is appended to in place (no rename): a symlink at its name must stop
    // the run, naming the file, with the target untouched. Its side files
    // (batches.jsonl, failed.jsonl) open the same way (`fsutil::no_follow`).
    let name = JOURNAL_FILE;
    let out = scratch(&format!("journal-link-{name}"));
    let outside = scratch(&format!("journal-link-outside-{name}"));
    std::fs::create_dir_all(&outside).unwrap();
    // Empty, so that it reads as an empty journal: only the append can touch it.
    let victim = outside.join("victim");
    std::fs::write(&victim, "").unwrap();
    let dir = run_dir(&out);
    std::fs::create_dir_all(&dir).unwrap();
    std::os::unix::fs::symlink(&victim, dir.join(name)).unwrap();
    let err = refused(&oracle(&out, "1"));
    assert!(err.contains(name), "{name}: {err}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "", "{name}");
    std::fs::remove_dir_all(&out).unwrap();
    std::fs::remove_dir_all(&outside).unwrap();
}

#[test]
fn deleting_or_replacing_run_lock_while_a_run_holds_the_folder_lets_no_one_in() {
    let out = scratch("lock-deleted");
    ok(&oracle(&out, "1"));
    let dir = run_dir(&out);
    // An unfinished run: its first ten samples journaled, the rest to do.
    let full = std::fs::read_to_string(dir.join(JOURNAL_FILE)).unwrap();
    let before: String = full.split_inclusive('\n').take(10).collect();
    std::fs::write(dir.join(JOURNAL_FILE), &before).unwrap();
    {
        // This process holds the run, as a running `runner` would.
        let _held = RunLock::exclusive(&dir).unwrap();
        std::fs::remove_file(dir.join(LOCK_FILE)).unwrap();
        let err = refused(&oracle(&out, "1"));
        assert!(err.contains("in use by another process"), "{err}");
        // Replaced by a file of its own (a "stale" lock someone recreated).
        std::fs::write(dir.join(LOCK_FILE), "pid 1: stale\n").unwrap();
        let err = refused(&oracle(&out, "1"));
        assert!(err.contains("in use by another process"), "{err}");
        let err = refused(&["score", s(&dir)]);
        assert!(err.contains("in use by another process"), "{err}");
    }
    assert_eq!(
        std::fs::read_to_string(dir.join(JOURNAL_FILE)).unwrap(),
        before
    );
    // Released with its holder: the run resumes, each sample journaled once.
    ok(&oracle(&out, "1"));
    let rec = read_records(&dir.join(JOURNAL_FILE), false).unwrap();
    assert_eq!(rec.duplicates, 0);
    assert_eq!(
        std::fs::read_to_string(dir.join(JOURNAL_FILE))
            .unwrap()
            .lines()
            .count(),
        full.lines().count()
    );
}

#[test]
fn deleting_run_lock_under_a_running_runner_and_starting_it_again_is_refused() {
    let out = scratch("lock-deleted-live");
    let dir = run_dir(&out);
    let args = oracle(&out, "20");
    let mut first = Command::new(crate::common::runner_exe())
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait until the first run holds the folder and journals.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !(dir.join(LOCK_FILE).exists()
        && std::fs::metadata(dir.join(JOURNAL_FILE)).is_ok_and(|m| m.len() > 0))
    {
        assert!(Instant::now() < deadline, "the first run never started");
        assert!(first.try_wait().unwrap().is_none(), "the first run ended");
        std::thread::sleep(Duration::from_millis(5));
    }
    std::fs::remove_file(dir.join(LOCK_FILE)).unwrap();
    let second = runner(&args);
    let first_still_running = first.try_wait().unwrap().is_none();
    let first = first.wait_with_output().unwrap();
    assert!(first.status.success(), "{}", text(&first.stderr));
    if first_still_running {
        assert_eq!(second.status.code(), Some(2), "the second was let in");
        let err = text(&second.stderr);
        assert!(err.contains("in use by another process"), "{err}");
    }
    let rec = read_records(&dir.join(JOURNAL_FILE), false).unwrap();
    assert_eq!(rec.duplicates, 0, "a sample was journaled twice");
}

/// Whether this machine lets a test mount a tmpfs of its own (a user namespace).
fn private_tmpfs() -> bool {
    Command::new("unshare")
        .args(["-rm", "true"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn a_disk_filling_up_while_reports_are_written_names_the_file_and_leaves_no_temporary() {
    if !private_tmpfs() {
        eprintln!("skipped: `unshare -rm` is not allowed here, so no small tmpfs to fill");
        return;
    }
    let out = scratch("disk-full");
    ok(&oracle(&out, "1"));
    let mount = out.join("small");
    std::fs::create_dir_all(&mount).unwrap();
    // A tmpfs of its own, the run copied in, the rest filled; then the reports rewritten.
    let script = r#"
        mount -t tmpfs -o size=8m tmpfs "$2" || exit 99
        cp -a "$3" "$2/run" || exit 98
        head -c 100000000 /dev/zero > "$2/filler" 2>/dev/null
        "$1" score "$2/run" >/dev/null
        echo "exit $?"
        ls -A "$2/run"
    "#;
    let o = Command::new("unshare")
        .args(["-rm", "sh", "-c", script, "sh"])
        .args([crate::common::runner_exe().as_os_str(), mount.as_os_str()])
        .arg(run_dir(&out))
        .output()
        .unwrap();
    let (stdout, stderr) = (text(&o.stdout), text(&o.stderr));
    assert!(stdout.starts_with("exit 2\n"), "{stdout}\n{stderr}");
    let inside = format!("{}/run/", mount.display());
    assert!(
        stderr.contains(&format!("{inside}scores.json: ")) && stderr.contains("No space left"),
        "{stderr}"
    );
    let left: Vec<&str> = stdout.lines().skip(1).collect();
    assert!(
        left.iter().all(|n| !n.ends_with(".tmp")),
        "temporary files left behind: {left:?}"
    );
    assert!(left.contains(&MANIFEST_FILE) && left.contains(&JOURNAL_FILE));
}
