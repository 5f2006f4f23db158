//! What a new user meets first: each refusal names the cause and the way out, not a
//! neighbouring cause.

use crate::common::{runner_exe, s, scratch, text};
use runner_engine::candle::fixture::{write_fixture, Arch, Size};
use std::process::Command;

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
