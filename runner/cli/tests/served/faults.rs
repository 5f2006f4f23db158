//! What a misbehaving server or a hostile endpoint must not do to a run (issue 30): a
//! huge `Retry-After` crash it, credentials in the URL end up on disk or on screen,
//! finished samples wait unjournaled behind slow ones, answers that can never be read
//! be retried until the run gives up, implausible answers pass unremarked.

use super::*;
use std::process::{Command, Stdio};

/// The run folder of [`creg_action_run`] under `out`.
fn creg_run(out: &Path) -> std::path::PathBuf {
    out.join("fixture-qwen2").join("creg-v1.0")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).to_string()
}

#[test]
fn a_huge_or_dated_retry_after_neither_crashes_the_run_nor_outlasts_retry_for() {
    let server = shared();
    let out = scratch("retry-after");
    // POSTs 1 and 2 are the connection's probes; then the run's own requests.
    let proxy = Proxy::start(
        server.port,
        HashMap::from([
            (3, Fault::RetryAfter(429, "1e20")),
            (4, Fault::RetryAfter(503, "Wed, 21 Oct 2099 07:28:00 GMT")),
            (5, Fault::RetryAfter(429, "-3")),
            (6, Fault::RetryAfter(503, "NaN")),
            (7, Fault::RetryAfter(429, "soon")),
        ]),
    );
    let started = Instant::now();
    let o = out.display().to_string();
    let text = ok(&creg_action_run(
        &proxy.url(),
        &o,
        "4",
        "4",
        &["--retry-for", "4", "--request-timeout", "60"],
    ));
    assert!(text.contains("56 samples (56 generated now"), "{text}");
    assert_eq!(proxy.injected.lock().unwrap().len(), 5);
    assert_eq!(journaled(&creg_run(&out)).len(), 56);
    // Each wait is bounded by what is left of --retry-for (4 s), not by the header.
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn credentials_in_the_endpoint_are_neither_stored_nor_printed() {
    let server = shared();
    let out = scratch("credentials");
    let o = out.display().to_string();
    let url = format!("http://someone:hunter2secret@127.0.0.1:{}/v1", server.port);
    let done = creg_action_run(&url, &o, "4", "4", &[]);
    let text = ok(&done);
    let run = creg_run(&out);
    let mut seen = format!("{text}{}", stderr(&done));
    for f in [
        "manifest.json",
        "journal.jsonl",
        "summary.md",
        "report.html",
    ] {
        seen.push_str(&std::fs::read_to_string(run.join(f)).unwrap_or_default());
    }
    assert!(!seen.contains("hunter2secret"), "{seen}");
    assert!(!seen.contains("someone:"), "{seen}");
    assert_eq!(
        manifest(&run)["context"]["endpoint"],
        format!("http://127.0.0.1:{}/v1", server.port)
    );
    // An endpoint that does not answer: the error names it without the credentials.
    let dead = format!(
        "http://someone:hunter2secret@127.0.0.1:{}/v1",
        server::free_port()
    );
    let failed = creg_action_run(&dead, &o, "4", "4", &["--retry-for", "1"]);
    assert!(!failed.status.success());
    let err = stderr(&failed);
    assert!(
        err.contains("127.0.0.1") && !err.contains("hunter2secret"),
        "{err}"
    );
    // run.lock records the command line too (runner/core/src/journal/lock.rs writes it,
    // and must pass it through runner_engine::served::wire::redact).
    let lock = std::fs::read_to_string(run.join("run.lock")).unwrap();
    assert!(
        lock.contains("--endpoint http://127.0.0.1:") && !lock.contains("hunter2secret"),
        "{lock}"
    );
}

#[test]
fn finished_samples_are_journaled_within_a_second_while_others_hang() {
    let server = shared();
    let out = scratch("prompt-journal");
    // Three of four workers hang on their first request; the fourth answers the rest of
    // the backend's first call (16 samples), then waits on the three.
    let stall = Fault::Stall(Duration::from_secs(120));
    let proxy = Proxy::start(
        server.port,
        HashMap::from([(3, stall), (4, stall), (5, stall)]),
    );
    let (name, tokenizer) = (served_name(), fixture().display().to_string());
    let url = proxy.url();
    let o = out.display().to_string();
    let mut child = Command::new(env!("CARGO_BIN_EXE_runner"))
        .args([
            "--model",
            &name,
            "--endpoint",
            &url,
            "--tokenizer",
            &tokenizer,
        ])
        .args(["--tasks", "action", "--limit", "1", "--seeds", "0,1"])
        .args(["--max-new-tokens", "4", "--concurrency", "4", "--out", &o])
        .args(["--request-timeout", "300", "--quiet"])
        .env("HF_HUB_OFFLINE", "1")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The fast answers: the model list's, the generation-config probe's and 13 samples.
    let started = Instant::now();
    while proxy.answered.load(Ordering::SeqCst) < 15 {
        assert!(
            started.elapsed() < Duration::from_secs(90),
            "only {} answered",
            proxy.answered.load(Ordering::SeqCst)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(1500));
    let answered = proxy.answered.load(Ordering::SeqCst) - 2;
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert_eq!(
        proxy.injected.lock().unwrap().len(),
        3,
        "three requests hang"
    );
    assert_eq!(answered, 13, "the backend's first call holds 16 samples");
    assert_eq!(journaled(&creg_run(&out)).len(), answered);
}

/// A completion whose text holds a lone surrogate escape: no JSON parser reads it.
const LONE_SURROGATE: &str = r#"{"choices":[{"text":"bad \ud800 text","finish_reason":"stop"}],"usage":{"completion_tokens":3}}"#;

#[test]
fn answers_that_can_never_be_read_are_journaled_failed_and_retried_only_when_asked() {
    let server = shared();
    let out = scratch("never");
    let o = out.display().to_string();
    let run = creg_run(&out);
    let faults = HashMap::from([
        (3, Fault::Answer(LONE_SURROGATE)),
        (5, Fault::Huge),
        (7, Fault::Status(400)),
    ]);
    let proxy = Proxy::start_sticky(server.port, faults);
    let args = ["--retry-for", "20", "--request-timeout", "60"];
    let first = creg_action_run(&proxy.url(), &o, "4", "2", &args);
    let text = ok(&first);
    assert!(text.contains("53 samples (53 generated now"), "{text}");
    assert!(text.contains("3 samples failed"), "{text}");
    assert_eq!(journaled(&run).len(), 53);
    let failed = std::fs::read_to_string(run.join("failed.jsonl")).unwrap();
    assert_eq!(failed.lines().count(), 3, "{failed}");
    for why in ["hex escape", "over 10 MiB", "HTTP 400"] {
        assert!(failed.contains(why), "{why}: {failed}");
    }
    // Each was asked once: failures are not retried.
    assert_eq!(proxy.posts.load(Ordering::SeqCst), 2 + 56);

    // A resume skips them: nothing is asked but the connection's probes.
    let proxy = Proxy::start(server.port, HashMap::new());
    let text = ok(&creg_action_run(&proxy.url(), &o, "4", "2", &args));
    assert!(text.contains("53 resumed from the journal"), "{text}");
    assert!(text.contains("3 samples failed"), "{text}");
    assert_eq!(proxy.posts.load(Ordering::SeqCst), 2);

    // --retry-failed asks for them again; answered now, they join the journal.
    let proxy = Proxy::start(server.port, HashMap::new());
    let mut again = args.to_vec();
    again.push("--retry-failed");
    let text = ok(&creg_action_run(&proxy.url(), &o, "4", "2", &again));
    assert!(text.contains("56 samples (3 generated now"), "{text}");
    assert!(!text.contains("samples failed"), "{text}");
    assert_eq!(proxy.posts.load(Ordering::SeqCst), 2 + 3);
    assert_eq!(journaled(&run).len(), 56);
}

/// More tokens than the 4 asked for, from another model than the one asked.
const IMPLAUSIBLE: &str = r#"{"model":"someone-else","choices":[{"text":"x","finish_reason":"length"}],"usage":{"completion_tokens":999}}"#;

#[test]
fn an_answer_over_the_token_budget_or_from_another_model_is_warned_about() {
    let server = shared();
    let out = scratch("implausible");
    let proxy = Proxy::start(
        server.port,
        HashMap::from([(3, Fault::Answer(IMPLAUSIBLE))]),
    );
    let done = creg_action_run(&proxy.url(), &out.display().to_string(), "4", "2", &[]);
    let text = ok(&done);
    assert!(text.contains("56 samples (56 generated now"), "{text}");
    let err = stderr(&done);
    let lines: Vec<&str> = err.lines().filter(|l| l.starts_with("warning")).collect();
    let tokens = lines.iter().find(|l| l.contains("999")).expect(&err);
    assert!(
        tokens.contains("request ") && tokens.contains("max_tokens 4"),
        "{err}"
    );
    let model = lines
        .iter()
        .find(|l| l.contains("someone-else"))
        .expect(&err);
    assert!(
        model.contains("request ") && model.contains(&served_name()),
        "{err}"
    );
    // The server's ordinary answers raise no such warning.
    assert_eq!(
        lines.iter().filter(|l| l.contains("request ")).count(),
        2,
        "{err}"
    );
}

#[test]
fn a_request_timeout_of_zero_is_refused() {
    let out = runner(&[
        "--model",
        "m",
        "--endpoint",
        "http://127.0.0.1:9/v1",
        "--request-timeout",
        "0",
        "--retry-for",
        "1",
        "--out",
        &scratch("timeout0").display().to_string(),
    ]);
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(err.contains("--request-timeout 0"), "{err}");
}
