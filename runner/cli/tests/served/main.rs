//! Served models against a real OpenAI-compatible server (transformers' `serve` on a
//! fixture model; no mocks). Run through `scripts/serve-fixture cargo test --test served`,
//! which provides the server program; without it every test fails with that advice.

mod faults;
mod proxy;
mod server;

use proxy::{Fault, Proxy};
use runner_engine::candle::load::hub::ModelFiles;
use runner_engine::candle::Engine;
use runner_engine::panel::Panel;
use runner_engine::served::client::RetryPolicy;
use runner_engine::served::prompt::LocalPrompts;
use runner_engine::served::{ServedBackend, ServedOptions};
use runner_engine::{Backend, Message, Prompt, Request, RequestId, Role, Sampling};
use serde_json::Value;
use server::{fixture, scratch, served_name, Server};
use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::process::Output;
use std::sync::atomic::Ordering;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// One server for the tests that leave it alone.
fn shared() -> &'static Server {
    static S: OnceLock<Server> = OnceLock::new();
    S.get_or_init(Server::start)
}

fn runner(args: &[&str]) -> Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_runner"))
        .args(args)
        .env("HF_HUB_OFFLINE", "1")
        .output()
        .unwrap()
}

fn ok(out: &Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "runner failed: {err}");
    String::from_utf8_lossy(&out.stdout).to_string()
}

/// A CREG run of the served fixture in completions mode (the runner renders its
/// template with the fixture's tokenizer): the action task of one scenario per regime
/// with seeds 0 and 1, 56 samples, into `out`, plus `extra` arguments.
fn creg_action_run(
    endpoint: &str,
    out: &str,
    max_new_tokens: &str,
    concurrency: &str,
    extra: &[&str],
) -> Output {
    let (name, tokenizer) = (served_name(), fixture().display().to_string());
    let mut args = vec![
        "--model",
        &name,
        "--endpoint",
        endpoint,
        "--tokenizer",
        &tokenizer,
        "--tasks",
        "action",
        "--limit",
        "1",
        "--seeds",
        "0,1",
        "--max-new-tokens",
        max_new_tokens,
        "--concurrency",
        concurrency,
        "--out",
        out,
        "--quiet",
    ];
    args.extend_from_slice(extra);
    runner(&args)
}

fn manifest(run: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(run.join("manifest.json")).unwrap()).unwrap()
}

/// The journal's (request, seed) pairs; fails on a pair journaled twice.
fn journaled(run: &Path) -> BTreeSet<(String, u64)> {
    let rec = runner_core::journal::read_records(&run.join("journal.jsonl"), false).unwrap();
    let pairs: BTreeSet<(String, u64)> = rec
        .records
        .iter()
        .map(|r| (r.request_id.clone(), r.seed))
        .collect();
    assert_eq!(
        pairs.len(),
        rec.records.len(),
        "{}: duplicates",
        run.display()
    );
    assert_eq!(rec.duplicates, 0);
    pairs
}

#[test]
fn a_creg_run_and_a_probe_run_go_through_a_real_server_end_to_end() {
    let server = shared();
    let out = scratch("e2e");
    let (name, url) = (served_name(), server.url());
    let o = out.display().to_string();
    // CREG in completions mode: the runner renders the fixture's template itself.
    let text = ok(&creg_action_run(&url, &o, "24", "4", &[]));
    assert!(text.contains("56 samples (56 generated now"), "{text}");
    let run = out.join("fixture-qwen2").join("creg-v1.0");
    let m = manifest(&run);
    let model = &m["identity"]["model"];
    assert_eq!(model["kind"], "served");
    assert_eq!(model["served_model"], name.as_str());
    assert_eq!(model["server_reports"]["id"], name.as_str());
    assert_eq!(model["prompt_mode"], "completions");
    assert_eq!(model["tokenizer"]["folder"], "fixture-qwen2");
    assert_eq!(model["server_deterministic"], false);
    // transformers' server refuses top_k as a field: the overrides go in its
    // generation_config, and the manifest says so.
    assert_eq!(model["overrides"], "generation_config");
    let body = &model["sampling_body"];
    assert_eq!(
        (&body["temperature"], &body["top_p"], &body["max_tokens"]),
        (
            &serde_json::json!(0.2),
            &serde_json::json!(0.9),
            &serde_json::json!(24)
        )
    );
    let config: Value = serde_json::from_str(body["generation_config"].as_str().unwrap()).unwrap();
    assert_eq!(
        (&config["top_k"], &config["repetition_penalty"]),
        (&serde_json::json!(0), &serde_json::json!(1.0))
    );
    // The URL is context, not identity.
    assert_eq!(m["context"]["endpoint"], url.as_str());
    assert!(!m["identity"].to_string().contains(&url));
    assert_eq!(journaled(&run).len(), 56);
    let summary = std::fs::read_to_string(run.join("summary.md")).unwrap();
    assert!(
        summary.contains("may depend on the server's batching"),
        "{summary}"
    );
    assert!(std::fs::metadata(run.join("report.html")).unwrap().len() > 10_000);

    // Probe in chat mode, declared deterministic: the server's template applies.
    let text = ok(&runner(&[
        "--suite",
        "probe",
        "--model",
        &name,
        "--endpoint",
        &url,
        "--limit",
        "1",
        "--seeds",
        "0",
        "--max-new-tokens",
        "24",
        "--out",
        &o,
        "--quiet",
        "--server-deterministic",
    ]));
    assert!(text.contains("15 samples (15 generated now"), "{text}");
    let run = out.join("fixture-qwen2").join("probe");
    let model = manifest(&run)["identity"]["model"].clone();
    assert_eq!(
        (&model["prompt_mode"], &model["tokenizer"]),
        (&"chat".into(), &Value::Null)
    );
    assert_eq!(model["server_deterministic"], true);
    assert_eq!(journaled(&run).len(), 15);
    // The server returns no token ids in chat mode: the counts are its own usage figures.
    let records = runner_core::journal::read_records(&run.join("journal.jsonl"), false)
        .unwrap()
        .records;
    assert!(records.iter().all(|r| r.tokens <= 24), "at most the cap");
    assert!(
        records.iter().map(|r| r.tokens).sum::<usize>() > 0,
        "counts recorded"
    );
    // The Probe report states the server's declared determinism in its provenance.
    let html = std::fs::read_to_string(run.join("report.html")).unwrap();
    assert!(html.contains("was declared batch-invariant"));
    assert!(!html.contains("may depend on the server"));
}

#[test]
fn a_wrong_model_name_is_refused_at_once_with_the_servers_words() {
    let server = shared();
    let started = Instant::now();
    let out = runner(&[
        "--model",
        "no-such-model",
        "--endpoint",
        &server.url(),
        "--limit",
        "1",
        "--out",
        &scratch("wrong").display().to_string(),
        "--quiet",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("does not serve \"no-such-model\"") && err.contains(&served_name()),
        "{err}"
    );
    assert!(started.elapsed() < Duration::from_secs(30));
}

/// Chat prompts of plain words (~1,000 tokens): numbers may tokenize differently in the
/// fixture's tokenizer and the server's library.
fn parity_prompts() -> Vec<Request> {
    // Numbers and decimals included: the fixture tokenizes them as transformers does.
    let words = "the belief of the agent changes when a new report arrives and the older \
                 report is withdrawn so the state that was true before may no longer hold: \
                 confidence 0.84 after 3 of 12 sensors reported at 14:05, then 1000.5;";
    (0..3)
        .map(|i| Request {
            id: RequestId::new(format!("parity-{i}")),
            prompt: Prompt::Chat(vec![Message {
                role: Role::User,
                content: std::iter::repeat_n(words, 30 + 10 * i)
                    .collect::<Vec<_>>()
                    .join(" "),
            }]),
            seeds: vec![0],
            max_new_tokens: 128,
            sampling: Sampling::Greedy,
        })
        .collect()
}

#[test]
fn greedy_tokens_of_the_server_equal_the_embedded_engines() {
    let server = shared();
    let requests = parity_prompts();
    let files = ModelFiles::from_dir(fixture()).unwrap();
    let mut engine = Engine::load(&files, candle_core::Device::Cpu, "fixture").unwrap();
    let local = engine.generate(&requests).unwrap();
    let prompts =
        LocalPrompts::load(&fixture().display().to_string(), &Panel::builtin().unwrap()).unwrap();
    let mut served = ServedBackend::connect(ServedOptions {
        endpoint: server.url(),
        model: served_name(),
        api_key: None,
        prompts: Some(prompts),
        concurrency: 3,
        server_deterministic: true,
        policy: RetryPolicy::default(),
    })
    .unwrap();
    let remote = served.generate(&requests).unwrap();
    assert_eq!(local.len(), remote.len());
    for (l, r) in local.iter().zip(&remote) {
        assert!(
            l.prompt_tokens >= 1000,
            "prompt of {} tokens",
            l.prompt_tokens
        );
        // The server's own count of the prompt: the same tokens, no doubled BOS.
        assert_eq!(l.prompt_tokens, r.prompt_tokens, "{}", l.request_id);
        assert_eq!(
            (&l.text, l.finish_reason),
            (&r.text, r.finish_reason),
            "{}",
            l.request_id
        );
    }
    assert!(
        local.iter().any(|s| s.token_ids.len() >= 16),
        "the answers are too short to compare"
    );
    assert_eq!(
        served
            .traffic()
            .prompt_token_mismatches
            .load(Ordering::Relaxed),
        0
    );
}

#[test]
fn faults_and_a_server_restart_lose_and_double_nothing_and_a_rerun_resumes() {
    let mut server = Server::start();
    let port = server.port;
    let out = scratch("faults");
    let run = |endpoint: &str, dir: &str, retry_for: &str| {
        let o = out.join(dir).display().to_string();
        creg_action_run(
            endpoint,
            &o,
            "16",
            "3",
            &["--request-timeout", "5", "--retry-for", retry_for],
        )
    };
    let journal = |dir: &str| journaled(&out.join(dir).join("fixture-qwen2").join("creg-v1.0"));

    ok(&run(&server.url(), "calm", "60"));
    let calm = journal("calm");
    assert_eq!(calm.len(), 56);

    // 429, 500, a cut answer and a stall past the timeout, then the server killed after
    // ten answers and restarted on its port while the run retries.
    let faults = HashMap::from([
        (2, Fault::Status(429)),
        (4, Fault::Status(500)),
        (6, Fault::CutMidResponse),
        (8, Fault::Stall(Duration::from_secs(8))),
    ]);
    let proxy = Proxy::start(port, faults);
    let answered = proxy.answered.clone();
    let restarter = std::thread::spawn(move || {
        while answered.load(Ordering::SeqCst) < 10 {
            std::thread::sleep(Duration::from_millis(20));
        }
        server.kill();
        std::thread::sleep(Duration::from_secs(2));
        Server::start_on(port)
    });
    ok(&run(&proxy.url(), "faulty", "240"));
    let mut server = restarter.join().unwrap();
    assert_eq!(
        proxy.injected.lock().unwrap().len(),
        4,
        "every fault was injected"
    );
    assert_eq!(journal("faulty"), calm);

    // The server gone for longer than the run waits: it stops with what finished
    // journaled, and the same command resumes once the server is back.
    let proxy = Proxy::start(port, HashMap::new());
    let answered = proxy.answered.clone();
    let killer = std::thread::spawn(move || {
        while answered.load(Ordering::SeqCst) < 20 {
            std::thread::sleep(Duration::from_millis(20));
        }
        server.kill();
    });
    let failed = run(&proxy.url(), "gone", "3");
    killer.join().unwrap();
    assert!(!failed.status.success());
    let err = String::from_utf8_lossy(&failed.stderr);
    assert!(err.contains("rerunning the same command resumes"), "{err}");
    let partial = journal("gone");
    assert!(
        partial.len() >= 16 && partial.len() < 56,
        "{} journaled",
        partial.len()
    );
    let _server = Server::start_on(port);
    let text = ok(&run(&proxy.url(), "gone", "60"));
    assert!(
        text.contains(&format!("{} resumed from the journal", partial.len())),
        "{text}"
    );
    assert_eq!(journal("gone"), calm);
}
