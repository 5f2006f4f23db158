//! Served runs against what a user's endpoint really does: a port nothing listens on, a
//! server answering as another API or without `/v1`, answers that are complete but
//! unusable, and a thread limit under a large --concurrency. The servers are tiny real
//! ones in the test ([`Stub`]); the port is a real closed one.

use crate::common::{runner_exe, s, scratch, text};
use crate::http_stub::{chat_answer, model_list, Call, Stub};
use serde_json::Value;
use std::collections::HashMap;
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// A port nothing listens on: bind, learn the port, close.
fn closed_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// `runner ARGS`, killed (and the test failed) if it still runs after two minutes: a
/// runner that waits out a long retry window would otherwise hang the test.
fn run_bounded(mut command: Command) -> Output {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(120) {
            child.kill().unwrap();
            panic!("the runner was still running after 120 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    child.wait_with_output().unwrap()
}

/// A chat-mode CREG run of model `m` at `endpoint` into `out`, plus `extra`.
fn served_run(endpoint: &str, out: &std::path::Path, extra: &[&str]) -> Output {
    let mut c = Command::new(runner_exe());
    c.args(["--endpoint", endpoint, "--model", "m", "--tasks", "belief"])
        .args(["--limit", "1", "--quiet", "--out", s(out)])
        .args(extra);
    run_bounded(c)
}

/// The last line of stderr, which says why the run stopped.
fn last_line(out: &Output) -> String {
    let err = text(&out.stderr);
    err.lines().last().unwrap_or_default().to_string()
}

#[test]
fn a_port_nothing_ever_answered_on_is_given_up_at_the_wait_for_a_server() {
    let dir = scratch("closed");
    let endpoint = format!("http://127.0.0.1:{}/v1", closed_port());
    // The retry window is long; the wait for a server that never answered is not.
    let out = served_run(
        &endpoint,
        &dir,
        &["--retry-for", "600", "--wait-for-server", "1"],
    );
    assert!(!out.status.success());
    let last = last_line(&out);
    let all = text(&out.stderr);
    assert!(last.starts_with("error: "), "{all}");
    assert!(
        last.contains(&format!("nothing answered at {endpoint}/models")),
        "{all}"
    );
    assert!(last.contains("connection refused"), "{all}");
    assert!(last.contains("Start the server"), "{all}");
    assert!(last.contains("--wait-for-server"), "{all}");
    // The warning while it waited names the bound that applies.
    assert!(all.contains("s more (--wait-for-server)"), "{all}");
    // By default that wait is 30 s, not the 300 s of --retry-for.
    let help = text(&crate::common::ok(&["--help"]).stdout);
    let mut lines = help
        .lines()
        .skip_while(|l| !l.contains("--wait-for-server <"));
    let said = lines.nth(1).unwrap_or_default();
    assert!(said.ends_with("[default: 30]"), "{help}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_endpoint_that_answers_404_is_told_to_add_v1() {
    let stub = Stub::start(|_| (404, r#"{"detail":"Not Found"}"#.into()));
    let dir = scratch("404");
    let out = served_run(&stub.url(""), &dir, &["--retry-for", "5"]);
    assert!(!out.status.success());
    let last = last_line(&out);
    assert!(last.contains("HTTP 404"), "{last}");
    assert!(
        last.contains(&format!("try {}/v1 as the endpoint", stub.url(""))),
        "{last}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_endpoint_whose_answers_are_not_openai_shaped_is_told_to_add_v1_at_once() {
    // llama.cpp's server without /v1: its own completion shape, and (second) a health
    // answer where the model list should be.
    let native = r#"{"content":"Hello","stop":true,"tokens_predicted":1}"#;
    let lists = [model_list("m"), r#"{"status":"ok"}"#.to_string()];
    for (i, list) in lists.into_iter().enumerate() {
        let stub = Stub::start(move |c: &Call| match c.method.as_str() {
            "GET" => (200, list.clone()),
            _ => (200, native.to_string()),
        });
        let dir = scratch(&format!("native-{i}"));
        // A run that retried these would wait out the 600 s window (and be killed).
        let out = served_run(&stub.url(""), &dir, &["--retry-for", "600"]);
        assert!(!out.status.success());
        let last = last_line(&out);
        assert!(last.contains("OpenAI-compatible"), "{last}");
        assert!(
            last.contains(&format!("try {}/v1 as the endpoint", stub.url(""))),
            "{last}"
        );
        assert!(!last.contains("did not answer"), "{last}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}

/// The answers of the unusable kinds, each complete JSON, with a word of the reason
/// each is kept for.
fn unusable(kind: usize) -> (String, &'static str) {
    let deep = format!("{}\"x\"{}", "[".repeat(10_000), "]".repeat(10_000));
    let answers = [
        (
            r#"{"choices":[{"message":{"content":""},"finish_reason":"content_filter"}]}"#.into(),
            "content_filter",
        ),
        (r#"{"choices":[],"usage":{"completion_tokens":1}}"#.into(), "no choice"),
        (
            r#"{"choices":[{"message":{"content":"A"},"finish_reason":"stop"}],"usage":{"completion_tokens":-3}}"#.into(),
            "-3",
        ),
        (
            r#"{"choices":[{"message":{"content":"A"},"finish_reason":"stop"}],"usage":{"completion_tokens":18446744073709551615}}"#.into(),
            "18446744073709551615",
        ),
        (
            format!(r#"{{"choices":[{{"message":{{"content":{deep}}},"finish_reason":"stop"}}]}}"#),
            "not a completion",
        ),
    ];
    answers[kind % answers.len()].clone()
}

/// Per seed sent: how often it was asked, and the unusable kind it gets (if any).
type Asked = HashMap<u64, (usize, Option<usize>)>;

#[test]
fn complete_but_unusable_answers_are_kept_failed_once_each_and_the_run_goes_on() {
    // Every third (request, seed), told apart by the seed sent, gets an unusable answer
    // of the next kind; the same one whenever it is asked again.
    let asked: Arc<Mutex<Asked>> = Arc::default();
    let kinds = Arc::new(Mutex::new(0usize));
    let (asked2, kinds2) = (asked.clone(), kinds.clone());
    let stub = Stub::start(move |c: &Call| {
        if c.method == "GET" {
            return (200, model_list("m"));
        }
        if c.body["max_tokens"] == 1 {
            return (200, chat_answer("A")); // the probe at connection
        }
        let seed = c.body["seed"].as_u64().unwrap();
        let mut asked = asked2.lock().unwrap();
        let entry = asked.entry(seed).or_insert_with(|| {
            let kind = seed.is_multiple_of(3).then(|| {
                let mut k = kinds2.lock().unwrap();
                *k += 1;
                *k - 1
            });
            (0, kind)
        });
        entry.0 += 1;
        match entry.1 {
            Some(kind) => (200, unusable(kind).0),
            None => (200, chat_answer("A")),
        }
    });
    let dir = scratch("unusable");
    // One request at a time: the order, and so the failures in a row, are the plan's.
    let out = served_run(
        &stub.url("/v1"),
        &dir,
        &["--retry-for", "3", "--concurrency", "1"],
    );
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    let asked = asked.lock().unwrap();
    let bad = kinds.lock().unwrap().to_owned();
    assert!(bad >= 5, "every kind is served: {bad}");
    // Each was asked once: none retried.
    assert!(asked.values().all(|(n, _)| *n == 1), "{asked:?}");
    let run = dir.join("m/creg-v1.0");
    let journal = runner_core::journal::read_records(&run.join("journal.jsonl"), false).unwrap();
    assert_eq!(journal.records.len() + bad, asked.len(), "{err}");
    let failed = std::fs::read_to_string(run.join("failed.jsonl")).unwrap();
    assert_eq!(failed.lines().count(), bad, "{failed}");
    for kind in 0..5 {
        let why = unusable(kind).1;
        assert!(failed.contains(why), "{why}: {failed}");
    }
    for line in failed.lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        assert!(v["seed"].is_u64() && v["request_id"].is_string(), "{line}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// llama-cpp-python's server, as it answers: top_k -1 is refused with HTTP 500 and a
/// pydantic validation error, top_k 0 is taken. The runner must not wait out its retry
/// window on the 500 (the same request is refused again), but send top-k off as 0, and
/// never leave top_k out (that server's default is 40).
#[test]
fn a_server_that_refuses_top_k_minus_one_with_a_500_gets_top_k_zero_at_once() {
    let top_ks: Arc<Mutex<Vec<Value>>> = Arc::default();
    let seen = top_ks.clone();
    let stub = Stub::start(move |c: &Call| {
        if c.method == "GET" {
            return (200, model_list("m"));
        }
        seen.lock().unwrap().push(c.body["top_k"].clone());
        if c.body["top_k"] == -1 {
            let refusal = "1 validation error:\n  {'type': 'greater_than_equal', 'loc': \
                           ('body', 'top_k'), 'msg': 'Input should be greater than or \
                           equal to 0', 'input': -1, 'ctx': {'ge': 0}}";
            let body = serde_json::json!({"error": {"message": refusal,
                "type": "internal_server_error", "param": null, "code": null}});
            return (500, body.to_string());
        }
        (200, chat_answer("A"))
    });
    let dir = scratch("top-k-zero");
    let started = Instant::now();
    let out = served_run(&stub.url("/v1"), &dir, &["--retry-for", "60"]);
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "the validation error was retried: {:?}\n{err}",
        started.elapsed()
    );
    let sent = top_ks.lock().unwrap();
    assert_eq!(sent.first(), Some(&serde_json::json!(-1)), "{sent:?}");
    assert!(
        sent[1..].iter().all(|k| *k == serde_json::json!(0)),
        "every request after the probe says top_k 0: {sent:?}"
    );
    let manifest = crate::common::json(&dir.join("m/creg-v1.0/manifest.json"));
    assert!(
        manifest.to_string().contains("extra_fields_top_k_0"),
        "the manifest names the dialect: {manifest}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The one precedence of `--model`: a name with `--endpoint` is the server's even where
/// a baseline has it, and its errors are the server's (not "loading oracle"); without
/// an endpoint, served-only flags are refused for a baseline too.
#[test]
fn an_endpoint_serves_a_baselines_name_and_served_flags_need_one() {
    let stub = Stub::start(|_| (404, r#"{"detail":"Not Found"}"#.into()));
    let dir = scratch("served-oracle");
    let mut c = Command::new(runner_exe());
    c.args([
        "--endpoint",
        &stub.url(""),
        "--model",
        "oracle",
        "--tasks",
        "belief",
    ])
    .args([
        "--limit",
        "1",
        "--quiet",
        "--retry-for",
        "5",
        "--out",
        s(&dir),
    ]);
    let out = run_bounded(c);
    let all = text(&out.stderr);
    assert!(!out.status.success(), "the oracle baseline ran: {all}");
    let last = last_line(&out);
    assert!(last.contains("HTTP 404"), "{all}");
    assert!(
        last.starts_with(&format!("error: connecting to {}", stub.url(""))),
        "{all}"
    );
    assert!(!dir.join("oracle").exists(), "{all}");

    let mut c = Command::new(runner_exe());
    c.args(["--model", "oracle", "--tokenizer", "t", "--tasks", "belief"])
        .args(["--limit", "1", "--quiet", "--out", s(&dir)]);
    let out = run_bounded(c);
    assert!(!out.status.success());
    assert_eq!(
        last_line(&out),
        "error: --tokenizer and --api-key-env apply to served models: give --endpoint"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
