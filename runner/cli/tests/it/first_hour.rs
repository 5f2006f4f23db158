//! What a new user meets first: each refusal names the cause and the way out, not a
//! neighbouring cause.

use crate::common::{json, ok, runner, runner_exe, s, scratch, text};
use runner_engine::candle::fixture::{write_fixture, Arch, Size};
use runner_engine::candle::models::ARCHITECTURES;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[test]
fn a_gated_model_with_no_hub_in_reach_blames_the_network_not_the_licence() {
    let home = scratch("hub");
    std::fs::create_dir_all(&home).unwrap();
    // An empty cache and a hub that refuses the connection (nothing listens on port 9),
    // with no token: the licence cannot be the reason, since nothing answered.
    let out = Command::new(runner_exe())
        .args([
            "generate",
            "--model",
            "llama-3.1-8b",
            "--prompt",
            "hi",
            "--device",
            "cpu",
        ])
        .env("HF_HOME", &home)
        .env("HF_ENDPOINT", "http://127.0.0.1:9")
        .env_remove("HF_HUB_CACHE")
        .env_remove("HF_TOKEN")
        .env_remove("HF_HUB_OFFLINE")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("the Hugging Face hub cannot be reached"),
        "{err}"
    );
    assert!(err.contains("HF_HUB_OFFLINE=1"), "{err}");
    assert!(!err.contains("accept its licence"), "{err}");
    std::fs::remove_dir_all(&home).unwrap();
}

#[test]
fn a_gpu_asked_of_a_build_without_cuda_says_how_to_build_one() {
    if std::env::var("CREG_TEST_DEVICE").as_deref() == Ok("cuda") {
        return; // a CUDA build: the device exists
    }
    let dir = scratch("device");
    write_fixture(Arch::Qwen2, Size::Tiny, &dir).unwrap();
    let out = Command::new(runner_exe())
        .args([
            "generate",
            "--model",
            s(&dir),
            "--prompt",
            "hi",
            "--device",
            "cuda:0",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains("--features runner/cuda"), "{err}");
    assert!(err.contains("scripts/gpu-bundle"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn prompts_longer_than_the_context_say_what_helps_instead_of_give_at_most_0() {
    // A fixture written without --suite-vocab spells the suite's text in many more
    // tokens than a real tokenizer: its full-graph prompts outgrow 4,096 positions.
    let dir = scratch("context");
    let model = dir.join("fixture");
    write_fixture(Arch::Qwen2, Size::Tiny, &model).unwrap();
    let out = Command::new(runner_exe())
        .args([
            "--model",
            s(&model),
            "--condition",
            "full_graph",
            "--tasks",
            "all",
        ])
        .args(["--limit", "50", "--device", "cpu", "--quiet", "--out"])
        .arg(dir.join("out"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(err.contains("whatever --max-new-tokens is"), "{err}");
    assert!(err.contains("--suite-vocab 4096"), "{err}");
    assert!(!err.contains("give at most 0"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn seeds_are_taken_as_the_help_shows_them_spaced_quoted_or_with_commas() {
    for command in ["run", "baseline"] {
        let help = text(&ok(&[command, "--help"]).stdout);
        assert!(
            help.contains("[default: 42 43 44]"),
            "{command} --help:\n{help}"
        );
    }
    let dir = scratch("seeds");
    let forms: [&[&str]; 4] = [
        &["run", "--seeds", "7", "8", "9", "--model", "oracle"],
        // No subcommand: `runner` is `runner run`.
        &["--seeds", "7", "8", "9", "--model", "oracle"],
        &["--model", "oracle", "--seeds", "7 8 9"],
        &["run", "--model", "oracle", "--seeds", "7,8,9"],
    ];
    for (i, form) in forms.iter().enumerate() {
        let out_dir = dir.join(i.to_string());
        let mut args = form.to_vec();
        args.extend(["--condition", "structured_list", "--tasks", "belief"]);
        args.extend(["--limit", "1", "--quiet", "--out", s(&out_dir)]);
        ok(&args);
        let m = json(&out_dir.join("oracle/creg-v1.0/manifest.json"));
        assert_eq!(
            m["identity"]["plan"]["seeds"],
            serde_json::json!([7, 8, 9]),
            "{args:?}"
        );
    }
    // The baseline command takes them alike: two seeds, twice the suite's 2,200 samples.
    let out = ok(&[
        "baseline",
        "--system",
        "oracle",
        "--condition",
        "structured_list",
        "--seeds",
        "7",
        "8",
        "--out",
        s(&dir.join("baseline")),
    ]);
    let said = text(&out.stdout);
    assert!(said.contains("4400 samples"), "{said}");
    let bad = runner(&["--model", "oracle", "--seeds", "7 x", "--out", s(&dir)]);
    assert!(!bad.status.success());
    let err = text(&bad.stderr);
    assert!(err.contains("--seeds") && err.contains("\"x\""), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_server_that_does_not_answer_is_said_at_once_and_named_at_the_end() {
    let dir = scratch("served");
    let started = Instant::now();
    // Nothing listens on port 9: every connection is refused.
    let mut child = Command::new(runner_exe())
        .args([
            "--endpoint",
            "http://user:secret@127.0.0.1:9/v1",
            "--model",
            "served-x",
        ])
        .args(["--retry-for", "3", "--out", s(&dir)])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let lines: Vec<(Duration, String)> = BufReader::new(child.stderr.take().unwrap())
        .lines()
        .map(|l| (started.elapsed(), l.unwrap()))
        .collect();
    let status = child.wait().unwrap();
    let ended = started.elapsed();
    assert!(!status.success());
    let all: Vec<&str> = lines.iter().map(|(_, l)| l.as_str()).collect();
    let all = all.join("\n");
    assert!(!all.contains("secret"), "credentials shown:\n{all}");
    // Said while waiting, long before the window closes...
    let (first_at, first) = &lines[0];
    assert!(
        first.contains("http://127.0.0.1:9/v1") && first.contains("not answering"),
        "{all}"
    );
    assert!(first.contains("retrying"), "{all}");
    assert!(
        *first_at < Duration::from_millis(2500) && ended - *first_at > Duration::from_millis(1500),
        "first line at {first_at:?}, the end at {ended:?}:\n{all}"
    );
    // ...and at the end: the server did not answer, not that the model is unavailable.
    let last = &lines.last().unwrap().1;
    assert!(last.starts_with("error: "), "{all}");
    assert!(last.contains("did not answer"), "{all}");
    assert!(last.to_lowercase().contains("connection refused"), "{all}");
    assert!(last.contains("--retry-for"), "{all}");
    assert!(!all.contains("model not available"), "{all}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_server_that_takes_the_connection_and_says_nothing_is_waited_for_aloud_within_a_second() {
    // A server that accepts every connection and never writes: the first attempt fails
    // only at --request-timeout, yet the wait is said within about a second.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming() {
            held.extend(stream.ok()); // open and silent until the test ends
        }
    });
    let dir = scratch("silent");
    let endpoint = format!("http://127.0.0.1:{port}/v1");
    let started = Instant::now();
    let mut child = Command::new(runner_exe())
        .args(["--endpoint", &endpoint, "--model", "m", "--tasks", "belief"])
        .args(["--limit", "1", "--retry-for", "3", "--request-timeout", "2"])
        .args(["--quiet", "--out", s(&dir)])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let reader = std::thread::spawn(move || {
        BufReader::new(stderr)
            .lines()
            .map(|l| (started.elapsed(), l.unwrap()))
            .collect::<Vec<_>>()
    });
    // A runner that never gives up would hang the test: stop it well past the window.
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > Duration::from_secs(120) {
            child.kill().unwrap();
            panic!("the runner was still waiting after 120 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let lines = reader.join().unwrap();
    assert!(!status.success());
    let all: Vec<&str> = lines.iter().map(|(_, l)| l.as_str()).collect();
    let all = all.join("\n");
    let (at, waiting) = lines
        .iter()
        .find(|(_, l)| l.contains("waiting for the server"))
        .unwrap_or_else(|| panic!("no waiting line:\n{all}"));
    assert!(
        *at < Duration::from_millis(2500),
        "said at {at:?}, not within about a second:\n{all}"
    );
    assert!(
        waiting.contains(&endpoint) && waiting.contains("in flight"),
        "{all}"
    );
    // The end is the usual one: the server did not answer within the window.
    let last = &lines.last().unwrap().1;
    assert!(last.starts_with("error: "), "{all}");
    assert!(last.contains("did not answer"), "{all}");
    assert!(last.contains("timed out"), "{all}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn scoring_a_folder_that_does_not_exist_says_so() {
    let dir = scratch("nope");
    let merged = dir.join("merged");
    for args in [
        vec!["score", s(&dir)],
        vec!["merge", s(&dir), "--out", s(&merged)],
    ] {
        let out = runner(&args);
        assert!(!out.status.success());
        let err = text(&out.stderr);
        assert!(
            err.contains(s(&dir)) && err.contains("does not exist"),
            "{err}"
        );
        assert!(!err.contains("not a manifest"), "{err}");
    }
}

#[test]
fn fixture_smoke_and_bench_help_list_every_architecture() {
    for command in ["fixture", "smoke", "bench"] {
        let help = text(&ok(&[command, "--help"]).stdout);
        for a in &ARCHITECTURES {
            assert!(
                help.contains(a.name),
                "{command} --help omits {}:\n{help}",
                a.name
            );
        }
    }
}

#[test]
fn merging_too_few_shards_warns_on_stderr_and_last() {
    let dir = scratch("merge");
    let shard = dir.join("oracle/creg-v1.0.shard-0-of-2");
    ok(&[
        "--model",
        "oracle",
        "--shard",
        "0/2",
        "--limit",
        "1",
        "--quiet",
        "--out",
        s(&dir),
    ]);
    // stdout and stderr into one file, in the order they were written.
    let log = dir.join("merge.log");
    let file = std::fs::File::create(&log).unwrap();
    let status = Command::new(runner_exe())
        .args(["merge", s(&shard), "--out", s(&dir.join("merged"))])
        .stdout(Stdio::from(file.try_clone().unwrap()))
        .stderr(Stdio::from(file))
        .status()
        .unwrap();
    assert!(status.success());
    let said = std::fs::read_to_string(&log).unwrap();
    let last = said.lines().rev().find(|l| !l.trim().is_empty()).unwrap();
    assert!(
        last.starts_with("warning: ") && last.contains("are missing"),
        "the warning is not the last word:\n{said}"
    );
    // On stderr, not stdout.
    let out = runner(&["merge", s(&shard), "--out", s(&dir.join("merged2"))]);
    assert!(text(&out.stderr).contains("are missing"));
    assert!(!text(&out.stdout).contains("are missing"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bench_prints_a_compact_table_and_points_at_json_for_the_rest() {
    let out = ok(&[
        "bench",
        "--size",
        "tiny",
        "--device",
        "cpu",
        "--batch",
        "1,2",
        "--prompt-tokens",
        "16",
        "--new-tokens",
        "4",
        "--repeat=1",
    ]);
    let said = text(&out.stdout);
    let table: Vec<&str> = said.lines().filter(|l| l.starts_with('|')).collect();
    let header: Vec<&str> = table[0]
        .trim_matches('|')
        .split('|')
        .map(str::trim)
        .collect();
    assert!(header.len() <= 10, "{} columns: {header:?}", header.len());
    for want in [
        "batch",
        "row limit",
        "prefill (tok/s)",
        "decode (tok/s)",
        "step forward (ms)",
        "step sampler (ms)",
        "kv cache (MiB)",
        "peak rss (MiB)",
    ] {
        assert!(header.contains(&want), "no {want:?} in {header:?}");
    }
    let after = said.split(table[table.len() - 1]).nth(1).unwrap();
    assert!(after.contains("--json"), "{said}");
}

#[test]
fn an_endpoint_that_is_not_a_url_is_refused_at_once() {
    let out = scratch("endpoint");
    for bad in ["localhost:8000/v1", "http:///v1", "ftp://host/v1"] {
        let started = std::time::Instant::now();
        let o = Command::new(runner_exe())
            .args([
                "--endpoint",
                bad,
                "--model",
                "m",
                "--tasks",
                "belief",
                "--limit",
                "1",
            ])
            .args(["--retry-for", "30", "--quiet", "--out"])
            .arg(&out)
            .output()
            .unwrap();
        assert!(!o.status.success(), "{bad}");
        let err = text(&o.stderr);
        assert!(err.contains("http://localhost:8000/v1"), "{bad}: {err}");
        // Refused before any request, not after the retry window.
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "{bad}"
        );
    }
    let _ = std::fs::remove_dir_all(&out);
}

/// A run ends with its headline and where the report is, not with every table; Ctrl-C
/// says how many samples are journaled and how to go on, and exits 130.
#[test]
fn a_run_ends_with_its_report_path_and_ctrl_c_says_what_was_kept() {
    let dir = scratch("ctrl-c");
    let model = dir.join("model");
    super::common::write_suite_fixture(&model);
    let out = dir.join("out");
    let small = ok(&[
        "--model",
        s(&model),
        "--condition",
        "canonical_json",
        "--tasks",
        "belief",
        "--limit",
        "1",
        "--seeds",
        "42",
        "--max-new-tokens",
        "4",
        "--device",
        "cpu",
        "--quiet",
        "--out",
        s(&out),
    ]);
    let said = text(&small.stdout);
    let run_dir = out.join("model").join("creg-v1.0");
    assert!(said.contains("## Headline"), "{said}");
    assert!(
        !said.contains("## By regime"),
        "the full tables were printed:\n{said}"
    );
    let report = format!("Report: {}", run_dir.join("report.html").display());
    assert!(said.contains(&report), "{report:?} not in:\n{said}");
    assert!(said.contains(&run_dir.join("summary.md").display().to_string()));

    // A long run, interrupted once it has journaled something.
    let long = dir.join("long");
    let mut child = Command::new(runner_exe())
        .args([
            "--model",
            s(&model),
            "--condition",
            "all",
            "--tasks",
            "belief",
        ])
        .args([
            "--limit",
            "2",
            "--device",
            "cpu",
            "--quiet",
            "--out",
            s(&long),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let journal = long.join("model").join("creg-v1.0").join("journal.jsonl");
    let started = Instant::now();
    while std::fs::metadata(&journal).map_or(0, |m| m.len()) == 0 {
        assert!(child.try_wait().unwrap().is_none(), "the run ended first");
        assert!(
            started.elapsed() < Duration::from_secs(300),
            "nothing journaled"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let pid = child.id().to_string();
    assert!(Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap()
        .success());
    let o = child.wait_with_output().unwrap();
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(130), "{err}");
    // Whole lines: a line the interrupt cut short is not a sample.
    let lines = std::fs::read(&journal)
        .unwrap()
        .iter()
        .filter(|&&b| b == b'\n')
        .count();
    let want = format!(
        "interrupted: {lines} samples are journaled in {}; run the same command again",
        journal.parent().unwrap().display()
    );
    assert!(err.contains(&want), "{want:?} not in:\n{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Mistakes a new user makes in `--model` and `--seeds` get the fix, not only the refusal.
#[test]
fn a_mistyped_model_or_seeds_gets_the_fix() {
    let err = text(&runner(&["--model", "Qwen2.5-7B", "--limit", "1"]).stderr);
    assert!(err.contains("did you mean qwen2.5-7b?"), "{err}");
    let missing = scratch("no-such-model").join("model");
    let err = text(&runner(&["--model", s(&missing), "--limit", "1"]).stderr);
    assert!(
        err.contains(&format!("{} does not exist", missing.display())),
        "{err}"
    );
    let o = runner(&["--model", "oracle", "--seeds=42", "43", "--limit", "1"]);
    assert_eq!(o.status.code(), Some(2));
    let err = text(&o.stderr);
    assert!(
        err.contains("hint: --seeds=42 takes one value")
            && err.contains("--seeds 42 43 or --seeds=42,43"),
        "{err}"
    );
}
