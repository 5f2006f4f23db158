//! A served run with far more requests in flight asked for than the system gives
//! threads: a real pids cgroup (the kind of limit a cluster job or a container sets)
//! holds the runner to a few dozen threads, and --concurrency asks for a thousand.

use crate::cgroup::{Limit, TestCgroup};
use crate::common::{runner_exe, s, scratch, text};
use crate::http_stub::{chat_answer, model_list, Call, Stub};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

#[test]
fn a_thousand_in_flight_under_a_thread_limit_runs_with_the_threads_there_are() {
    let group = match TestCgroup::create("served-threads", Limit::Pids(24)) {
        Ok(g) => g,
        Err(why) => {
            eprintln!("skipped: no pids cgroup can be made here ({why})");
            return;
        }
    };
    let posts = Arc::new(AtomicUsize::new(0));
    let posts2 = posts.clone();
    let stub = Stub::start(move |c: &Call| match c.method.as_str() {
        "GET" => (200, model_list("m")),
        _ => {
            posts2.fetch_add(1, Ordering::SeqCst);
            (200, chat_answer("A"))
        }
    });
    let dir = scratch("threads");
    let endpoint = stub.url("/v1");
    let args = [
        "--endpoint",
        &endpoint,
        "--model",
        "m",
        "--tasks",
        "belief",
        "--limit",
        "2",
        "--seeds",
        "0,1",
        "--concurrency",
        "1000",
        "--retry-for",
        "5",
        "--quiet",
        "--out",
        s(&dir),
    ];
    let out = group.command(&runner_exe(), &args).output().unwrap();
    let err = text(&out.stderr);
    // Not a panic ("failed to spawn thread"): the run finishes with the threads it
    // could have, and says how many that was.
    assert!(!err.contains("panicked"), "{err}");
    assert!(out.status.success(), "{err}");
    assert!(err.contains("request threads could be started"), "{err}");
    assert!(err.contains("--concurrency 1000"), "{err}");
    let run = dir.join("m/creg-v1.0");
    let journal = runner_core::journal::read_records(&run.join("journal.jsonl"), false).unwrap();
    // Every sample was asked for once (and the probe at connection), and journaled:
    // more samples than the limit allows threads, so none had a thread of its own.
    let samples = journal.records.len();
    assert!(samples > 24, "{samples}");
    assert_eq!(posts.load(Ordering::SeqCst), samples + 1);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn with_no_thread_to_be_had_the_run_says_so_instead_of_panicking() {
    // One task in the group: the runner's main thread, and nothing more.
    let group = match TestCgroup::create("served-no-threads", Limit::Pids(1)) {
        Ok(g) => g,
        Err(why) => {
            eprintln!("skipped: no pids cgroup can be made here ({why})");
            return;
        }
    };
    let stub = Stub::start(|c: &Call| match c.method.as_str() {
        "GET" => (200, model_list("m")),
        _ => (200, chat_answer("A")),
    });
    let dir = scratch("no-threads");
    let endpoint = stub.url("/v1");
    let args = [
        "--endpoint",
        &endpoint,
        "--model",
        "m",
        "--tasks",
        "belief",
        "--limit",
        "1",
        "--retry-for",
        "5",
        "--quiet",
        "--out",
        s(&dir),
    ];
    let out = group.command(&runner_exe(), &args).output().unwrap();
    let err = text(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    // A clean error's exit status, not a panic's 101.
    assert!(matches!(out.status.code(), Some(1 | 2)), "{err}");
    let last = err.lines().last().unwrap_or_default();
    assert!(last.contains("cannot start a thread for requests"), "{err}");
    assert!(
        last.contains("--concurrency") && last.contains("pids.max"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
