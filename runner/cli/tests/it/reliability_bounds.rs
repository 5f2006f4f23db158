//! Bounded inputs and served answers that must not be taken at their word: files named on
//! the command line that never end (`/dev/zero`, `/dev/urandom`), block (a FIFO) or are
//! far too large; a server that redirects, answers `content: null`, or an endpoint that
//! is not a URL. Each is refused with exit 2, naming the file or URL and the bound, in
//! seconds: the runs below are killed, and the test failed, past their deadline, and
//! the endless-device ones run under an address-space limit so that a reader without a
//! bound fails the test instead of filling the machine.

use crate::common::{runner_exe, s, scratch, scratch_dir, text};
use crate::http_stub::{chat_answer, model_list, Call, Stub};
use runner_engine::candle::fixture::{write_fixture, Arch, Size};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The address space a bounded run may map (8 GiB): far above what the runner needs
/// for these refusals (tens of MB), far below what an unbounded read of `/dev/zero`
/// reaches before the deadline.
const ADDRESS_SPACE_KIB: u64 = 8 << 20;

/// Runs `command`, killed (and the test failed) past `deadline`; with the time it took.
fn within(mut command: Command, deadline: Duration) -> (Output, Duration) {
    let mut child = command
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > deadline {
            child.kill().unwrap();
            let out = child.wait_with_output().unwrap();
            panic!(
                "the runner was still running after {deadline:?}: {}",
                text(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    (child.wait_with_output().unwrap(), started.elapsed())
}

/// `runner ARGS` under [`ADDRESS_SPACE_KIB`], within 30 s.
fn capped(args: &[&str]) -> (Output, Duration) {
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg(format!(
            "ulimit -v {ADDRESS_SPACE_KIB} && exec \"$0\" \"$@\""
        ))
        .arg(runner_exe())
        .args(args);
    within(c, Duration::from_secs(30))
}

/// The run's stderr, after checking it was refused as a user error (exit 2) that names
/// every one of `names`.
#[track_caller]
fn refused_naming(out: &Output, names: &[&str]) -> String {
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.starts_with("error: "), "{err}");
    for n in names {
        assert!(err.contains(n), "{n:?} is not named: {err}");
    }
    assert!(!err.contains("panicked"), "{err}");
    err
}

#[cfg(unix)]
fn mkfifo(path: &std::path::Path) {
    let made = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(made.success(), "mkfifo {}", path.display());
}

#[cfg(unix)]
#[test]
fn prompt_and_system_files_that_never_end_are_refused_at_16_mib() {
    for args in [
        &["--prompt-file", "/dev/zero"][..],
        &["--prompt", "hi", "--system-file", "/dev/urandom"][..],
    ] {
        let mut all = vec!["generate", "--model", "oracle"];
        all.extend_from_slice(args);
        let (out, took) = capped(&all);
        let file = args[args.len() - 1];
        let flag = args[args.len() - 2];
        refused_naming(&out, &[flag, file, "16 MiB"]);
        assert!(took < Duration::from_secs(10), "{args:?}: {took:?}");
    }
}

#[cfg(unix)]
#[test]
fn suite_files_that_are_devices_fifos_or_over_64_mib_are_refused_unread() {
    let dir = scratch_dir("suites");
    let fifo = dir.join("suite.fifo");
    mkfifo(&fifo);
    // Sparse: 65 MiB on the file's word, no disk written.
    let big = dir.join("big.jsonl");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(65 << 20)
        .unwrap();
    let out_dir = dir.join("out");
    let cases: [(&str, &str, &[&str]); 5] = [
        (
            "creg",
            "/dev/zero",
            &["a character device", "not a regular file"],
        ),
        ("creg", "/dev/urandom", &["a character device"]),
        ("creg", s(&fifo), &["a FIFO", "not a regular file"]),
        ("creg", s(&big), &["64 MiB"]),
        ("probe", s(&fifo), &["a FIFO", "not a regular file"]),
    ];
    for (suite, file, said) in cases {
        let args = [
            "--suite",
            suite,
            "--model",
            "oracle",
            "--suite-file",
            file,
            "--limit",
            "1",
            "--quiet",
            "--out",
            s(&out_dir),
        ];
        let (out, took) = capped(&args);
        let mut names = vec![file];
        names.extend_from_slice(said);
        refused_naming(&out, &names);
        assert!(took < Duration::from_secs(10), "{file}: {took:?}");
    }
    // The suite's own commands read it the same way.
    let (out, _) = capped(&["suite", "check", s(&fifo)]);
    refused_naming(&out, &[s(&fifo), "a FIFO"]);
    let (out, _) = capped(&["probe", "check", "/dev/zero"]);
    refused_naming(&out, &["/dev/zero", "a character device"]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[cfg(unix)]
#[test]
fn chat_templates_that_never_end_or_are_over_1_mib_are_refused() {
    let dir = scratch("templates");
    write_fixture(Arch::Qwen2, Size::Tiny, &dir).unwrap();
    let generate = |extra: &[&str]| {
        let mut args = vec!["generate", "--model", s(&dir), "--prompt", "hi"];
        args.extend_from_slice(&["--device", "cpu", "--max-new-tokens", "1"]);
        args.extend_from_slice(extra);
        capped(&args)
    };
    let (out, took) = generate(&["--chat-template", "/dev/zero"]);
    refused_naming(&out, &["/dev/zero", "1 MiB", "chat template"]);
    assert!(took < Duration::from_secs(20), "{took:?}");

    // A 2 MiB template in tokenizer_config.json, and beside it as chat_template.jinja.
    let config_path = dir.join("tokenizer_config.json");
    let original = std::fs::read_to_string(&config_path).unwrap();
    let mut config: serde_json::Value = serde_json::from_str(&original).unwrap();
    let huge = "{{ 1 }}".repeat(300_000);
    config["chat_template"] = huge.clone().into();
    std::fs::write(&config_path, config.to_string()).unwrap();
    let (out, _) = generate(&[]);
    refused_naming(&out, &["tokenizer_config.json", "1 MiB"]);

    config.as_object_mut().unwrap().remove("chat_template");
    std::fs::write(&config_path, config.to_string()).unwrap();
    std::fs::write(dir.join("chat_template.jinja"), &huge).unwrap();
    let (out, _) = generate(&[]);
    refused_naming(&out, &["chat_template.jinja", "1 MiB"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A chat-mode CREG run of model `m` at `endpoint` into `out`, within two minutes.
fn served(endpoint: &str, out: &std::path::Path, extra: &[&str]) -> (Output, Duration) {
    let mut c = Command::new(runner_exe());
    c.args(["--endpoint", endpoint, "--model", "m", "--tasks", "belief"])
        .args(["--limit", "1", "--quiet", "--out", s(out)])
        .args(extra);
    within(c, Duration::from_secs(120))
}

#[test]
fn a_redirect_is_refused_naming_both_urls_and_the_other_server_is_never_asked() {
    // The server it redirects to answers everything, as the wrong server would.
    let asked_there = Arc::new(AtomicUsize::new(0));
    let counter = asked_there.clone();
    let there = Stub::start(move |c: &Call| {
        counter.fetch_add(1, Ordering::SeqCst);
        match c.path.ends_with("/models") {
            true => (200, model_list("m")),
            false => (200, chat_answer("A")),
        }
    });
    let there_url = there.url("");
    let here = Stub::start_with_headers(move |c: &Call| {
        let to = format!("{there_url}{}", c.path);
        (302, vec![("Location".into(), to)], String::new())
    });
    let dir = scratch("redirect");
    let (out, took) = served(&here.url("/v1"), &dir, &["--retry-for", "600"]);
    let err = refused_naming(
        &out,
        &[
            &here.url("/v1/models"),
            &there.url("/v1/models"),
            "HTTP 302",
        ],
    );
    assert!(err.contains("redirect"), "{err}");
    assert!(took < Duration::from_secs(20), "{took:?}");
    assert_eq!(asked_there.load(Ordering::SeqCst), 0, "{err}");
    let journal = dir.join("m/creg-v1.0/journal.jsonl");
    assert!(
        !journal.exists()
            || runner_core::journal::read_records(&journal, false)
                .unwrap()
                .records
                .is_empty(),
        "another server's answers were journaled"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_answer_whose_content_is_null_is_a_failed_sample_with_its_reason() {
    // The first two samples (the probe at connection aside) say `content: null`.
    let nulls = Arc::new(AtomicUsize::new(0));
    let count = nulls.clone();
    let stub = Stub::start(move |c: &Call| {
        if c.method == "GET" {
            return (200, model_list("m"));
        }
        if c.body["max_tokens"] == 1 || count.fetch_add(1, Ordering::SeqCst) >= 2 {
            return (200, chat_answer("A"));
        }
        let null = serde_json::json!({
            "choices": [{"message": {"role": "assistant", "content": null},
                         "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 0}
        });
        (200, null.to_string())
    });
    let dir = scratch("content-null");
    let (out, _) = served(
        &stub.url("/v1"),
        &dir,
        &["--retry-for", "3", "--concurrency", "1"],
    );
    let err = text(&out.stderr);
    assert!(out.status.success(), "{err}");
    let run = dir.join("m/creg-v1.0");
    let failed = std::fs::read_to_string(run.join("failed.jsonl")).unwrap_or_default();
    assert_eq!(failed.lines().count(), 2, "{failed}\n{err}");
    assert!(failed.contains("no content (content is null"), "{failed}");
    let journal = runner_core::journal::read_records(&run.join("journal.jsonl"), false).unwrap();
    assert!(!journal.records.is_empty(), "{err}");
    assert!(
        journal.records.iter().all(|r| r.text == "A"),
        "a null content was journaled as an answer"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_malformed_endpoint_url_is_refused_at_once_not_retried() {
    let dir = scratch("bad-url");
    for endpoint in [
        "http://[::1",
        "http://[::1]:99999/v1",
        "http://127.0.0.1:99999/v1",
    ] {
        // The default --retry-for (300 s) and --wait-for-server (30 s) apply.
        let (out, took) = served(endpoint, &dir, &[]);
        refused_naming(
            &out,
            &[&format!("--endpoint {endpoint}"), "not a valid URL"],
        );
        assert!(took < Duration::from_secs(10), "{endpoint}: {took:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
