//! Model folders as current Hugging Face tooling writes them, on fixtures: config.json in
//! transformers 5's form (`rope_parameters`, per layer type for Gemma 3, no
//! `architectures`), base models without a chat template, `--chat-template`, and
//! `generate --prompt-file`, which keeps a prompt's final newline.

use super::common::{ok, runner, s, scratch, text};
use runner_engine::candle::fixture::{write_fixture, Arch, Size};
use serde_json::{json, Value};
use std::path::Path;

fn read(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn write(path: &Path, v: &Value) {
    std::fs::write(path, serde_json::to_string_pretty(v).unwrap()).unwrap();
}

/// The stderr of a `runner` call that must fail.
#[track_caller]
fn refused(args: &[&str]) -> String {
    let o = runner(args);
    assert!(!o.status.success(), "runner {args:?} succeeded");
    text(&o.stderr)
}

/// `generate`'s JSON answer.
fn generate(model: &Path, extra: &[&str]) -> Value {
    let mut args = vec![
        "generate",
        "--model",
        s(model),
        "--greedy",
        "--max-new-tokens",
        "8",
        "--device",
        "cpu",
    ];
    args.extend(extra);
    let o = ok(&args);
    serde_json::from_slice(&o.stdout).unwrap()
}

/// The config rewritten as transformers 5 writes it.
fn transformers5(config: &mut Value) {
    let o = config.as_object_mut().unwrap();
    o.remove("architectures");
    if let Some(d) = o.remove("torch_dtype") {
        o.insert("dtype".into(), d);
    }
    let theta = o.remove("rope_theta").unwrap();
    let scaling = o.remove("rope_scaling").filter(|s| !s.is_null());
    let mut full = json!({"rope_theta": theta, "rope_type": "default"});
    if let Some(Value::Object(s)) = scaling {
        for (k, v) in s {
            full[k.as_str()] = v;
        }
    }
    let params = match o.remove("rope_local_base_freq") {
        Some(local) => json!({"full_attention": full,
            "sliding_attention": {"rope_theta": local, "rope_type": "default"}}),
        None => full,
    };
    o.insert("rope_parameters".into(), params);
}

#[test]
fn configs_written_by_transformers_5_decode_as_the_classic_ones() {
    for arch in [Arch::Llama, Arch::Gemma3, Arch::Qwen2] {
        let dir = scratch(&format!("v5-{arch:?}"));
        write_fixture(arch, Size::Tiny, &dir).unwrap();
        let classic = generate(&dir, &["--prompt", "the witness saw a red car"]);
        let path = dir.join("config.json");
        let mut config = read(&path);
        transformers5(&mut config);
        assert!(config.get("rope_theta").is_none());
        write(&path, &config);
        let v5 = generate(&dir, &["--prompt", "the witness saw a red car"]);
        assert_eq!(v5["token_ids"], classic["token_ids"], "{arch:?}");
        // Both forms stated and disagreeing: refused, naming the fields.
        config["rope_theta"] = json!(1234.0);
        write(&path, &config);
        let err = refused(&[
            "generate",
            "--model",
            s(&dir),
            "--prompt",
            "hi",
            "--device",
            "cpu",
        ]);
        assert!(
            err.contains("config.json") && err.contains("disagrees with rope_theta (1234)"),
            "{err}"
        );
    }
}

#[test]
fn a_base_model_runs_plain_text_after_its_bos_and_says_so() {
    let dir = scratch("base");
    write_fixture(Arch::Gemma3, Size::Tiny, &dir).unwrap();
    let chat = generate(&dir, &["--prompt", "the witness saw a red car"]);
    let tc = dir.join("tokenizer_config.json");
    let mut config = read(&tc);
    let template = config
        .as_object_mut()
        .unwrap()
        .remove("chat_template")
        .unwrap();
    write(&tc, &config);

    let o = ok(&[
        "generate",
        "--model",
        s(&dir),
        "--prompt",
        "the witness saw a red car",
        "--greedy",
        "--max-new-tokens",
        "8",
        "--device",
        "cpu",
    ]);
    let err = text(&o.stderr);
    assert_eq!(
        err.matches("has no chat template").count(),
        1,
        "said once: {err}"
    );
    let plain: Value = serde_json::from_slice(&o.stdout).unwrap();
    // `<bos>` and the words, without the turn markers the template writes.
    assert!(
        plain["prompt_tokens"].as_u64() < chat["prompt_tokens"].as_u64(),
        "{plain} vs {chat}"
    );

    // --chat-template gives it one again: the chat prompt, token for token.
    let file = dir.join("template.jinja");
    std::fs::write(&file, template.as_str().unwrap()).unwrap();
    let given = generate(
        &dir,
        &[
            "--prompt",
            "the witness saw a red car",
            "--chat-template",
            s(&file),
        ],
    );
    assert_eq!(given["prompt_tokens"], chat["prompt_tokens"]);
    assert_eq!(given["token_ids"], chat["token_ids"]);

    // A run records the prompt format in the manifest's model identity.
    let out = scratch("base-run");
    ok(&[
        "--model",
        s(&dir),
        "--condition",
        "full_graph",
        "--tasks",
        "action",
        "--limit",
        "1",
        "--seeds",
        "42",
        "--max-new-tokens",
        "2",
        "--device",
        "cpu",
        "--quiet",
        "--out",
        s(&out),
    ]);
    let label = dir.file_name().unwrap();
    let manifest = read(&out.join(label).join("creg-v1.0").join("manifest.json"));
    let text = manifest.to_string();
    assert!(
        text.contains("plain text after the tokenizer's BOS"),
        "{text}"
    );
    let summary =
        std::fs::read_to_string(out.join(label).join("creg-v1.0").join("summary.md")).unwrap();
    assert!(
        summary.contains("prompts plain text after the tokenizer's BOS"),
        "the report says so too"
    );

    let bad = dir.join("bad.jinja");
    std::fs::write(&bad, "{% for m in messages %}").unwrap();
    let err = refused(&[
        "generate",
        "--model",
        s(&dir),
        "--prompt",
        "hi",
        "--chat-template",
        s(&bad),
        "--device",
        "cpu",
    ]);
    assert!(err.contains("bad.jinja"), "{err}");
}

#[test]
fn generate_reads_a_prompt_file_byte_for_byte() {
    let dir = scratch("prompt-file");
    write_fixture(Arch::Qwen2, Size::Tiny, &dir).unwrap();
    let file = dir.join("prompt.txt");
    std::fs::write(&file, "the witness saw a red car\n\n").unwrap();
    let from_file = generate(&dir, &["--prompt-file", s(&file)]);
    let inline = generate(&dir, &["--prompt", "the witness saw a red car\n\n"]);
    let stripped = generate(&dir, &["--prompt", "the witness saw a red car"]);
    assert_eq!(from_file["prompt_tokens"], inline["prompt_tokens"]);
    assert_eq!(from_file["token_ids"], inline["token_ids"]);
    assert_ne!(
        from_file["prompt_tokens"], stripped["prompt_tokens"],
        "the newlines are tokens"
    );

    // Refusals name generate's own flags.
    let err = refused(&[
        "generate",
        "--model",
        s(&dir),
        "--prompt-file",
        "/nonexistent/p.txt",
        "--device",
        "cpu",
    ]);
    assert!(err.contains("--prompt-file /nonexistent/p.txt"), "{err}");
    let long = "word ".repeat(20_000);
    let err = refused(&[
        "generate",
        "--model",
        s(&dir),
        "--prompt",
        &long,
        "--device",
        "cpu",
    ]);
    assert!(
        err.contains("--prompt-file") && !err.contains("--limit"),
        "{err}"
    );
}
