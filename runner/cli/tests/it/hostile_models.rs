//! Model folders built to break the engine (issue 43): configs and checkpoints whose
//! values no model has, weights that compute NaN, tokenizers with ids past the
//! vocabulary, and chat templates that never end. Each is refused with an error that
//! names the file and the field: exit 2, never a panic (101), an abort (134) or a hang.

use super::common::{runner_exe, s, scratch, text, within_a_minute};
use runner_engine::candle::fixture::{write_fixture, Arch, Size};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A tiny Qwen2 fixture in its own scratch folder.
fn fixture(name: &str) -> PathBuf {
    let dir = scratch(name).join("model");
    write_fixture(Arch::Qwen2, Size::Tiny, &dir).unwrap();
    dir
}

fn edit_json(path: &Path, edit: impl FnOnce(&mut Value)) {
    let mut v: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    edit(&mut v);
    std::fs::write(path, serde_json::to_vec_pretty(&v).unwrap()).unwrap();
}

/// Rewrites model.safetensors' header text with `edit` (the data offsets are relative
/// to the data, so the header may change length).
fn edit_header(model: &Path, edit: impl FnOnce(String) -> String) {
    let path = model.join("model.safetensors");
    let bytes = std::fs::read(&path).unwrap();
    let len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header = String::from_utf8(bytes[8..8 + len].to_vec()).unwrap();
    let header = edit(header).into_bytes();
    let mut out = (header.len() as u64).to_le_bytes().to_vec();
    out.extend_from_slice(&header);
    out.extend_from_slice(&bytes[8 + len..]);
    std::fs::write(path, out).unwrap();
}

fn header(model: &Path) -> Value {
    let bytes = std::fs::read(model.join("model.safetensors")).unwrap();
    let len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    serde_json::from_slice(&bytes[8..8 + len]).unwrap()
}

/// `runner generate` of 4 greedy tokens on `model`, with `extra` arguments, killed if
/// it runs past a minute (the old engine hung on some of these models; a hang must fail
/// the test, not stall the suite).
fn generate(model: &Path, extra: &[&str]) -> Output {
    generate_with(model, "hi", "4", extra)
}

fn generate_with(model: &Path, prompt: &str, max_new: &str, extra: &[&str]) -> Output {
    let mut cmd = Command::new(runner_exe());
    cmd.args([
        "generate",
        "--model",
        s(model),
        "--device",
        "cpu",
        "--greedy",
    ])
    .args(["--prompt", prompt, "--max-new-tokens", max_new])
    .args(extra)
    .env_remove("RUST_BACKTRACE");
    within_a_minute(&mut cmd).0
}

/// The error of a run that must be refused: exit 2 (an error, not a crash or a kill).
#[track_caller]
fn refused(out: &Output) -> String {
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "not refused cleanly:\n{err}");
    err
}

#[test]
fn a_config_without_a_usable_context_is_refused_before_a_huge_max_new_tokens() {
    let model = fixture("context");
    for value in [
        None,
        Some(serde_json::json!(-5)),
        Some(serde_json::json!(4096.5)),
    ] {
        edit_json(&model.join("config.json"), |c| match &value {
            None => {
                c.as_object_mut().unwrap().remove("max_position_embeddings");
            }
            Some(v) => c["max_position_embeddings"] = v.clone(),
        });
        let err = refused(&generate_with(&model, "hi", "100000000", &[]));
        assert!(
            err.contains("config.json") && err.contains("max_position_embeddings"),
            "{value:?}: {err}"
        );
    }
    let _ = std::fs::remove_dir_all(model.parent().unwrap());
}

/// Writes NaN over every value of tensor `name` (an f32 tensor of the fixture).
fn poison(model: &Path, name: &str) {
    let h = header(model);
    let len = std::fs::read(model.join("model.safetensors")).unwrap()[..8]
        .try_into()
        .map(u64::from_le_bytes)
        .unwrap() as usize;
    let [from, to] = [0, 1].map(|i| h[name]["data_offsets"][i].as_u64().unwrap() as usize);
    assert_eq!(h[name]["dtype"], "F32");
    let path = model.join("model.safetensors");
    let mut bytes = std::fs::read(&path).unwrap();
    for at in (8 + len + from..8 + len + to).step_by(4) {
        bytes[at..at + 4].copy_from_slice(&f32::NAN.to_le_bytes());
    }
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn nan_weights_stop_the_model_naming_it_instead_of_answering_token_0() {
    let model = fixture("nan");
    poison(&model, "model.norm.weight");
    let err = refused(&generate(&model, &[]));
    assert!(err.contains("not finite"), "{err}");
    assert!(err.contains("model on cpu"), "the model is named: {err}");
    let _ = std::fs::remove_dir_all(model.parent().unwrap());
}

#[test]
fn zero_layers_or_heads_in_the_config_are_refused_by_name() {
    let model = fixture("zeros");
    let config = model.join("config.json");
    let original = std::fs::read(&config).unwrap();
    for field in [
        "num_hidden_layers",
        "num_attention_heads",
        "num_key_value_heads",
    ] {
        std::fs::write(&config, &original).unwrap();
        edit_json(&config, |c| c[field] = 0.into());
        let err = refused(&generate(&model, &[]));
        assert!(
            err.contains("config.json") && err.contains(&format!("{field} is 0")),
            "{field}: {err}"
        );
    }
    let _ = std::fs::remove_dir_all(model.parent().unwrap());
}

#[test]
fn a_config_that_describes_another_checkpoint_is_refused_as_disagreeing() {
    let model = fixture("disagree");
    let config = model.join("config.json");
    let original = std::fs::read(&config).unwrap();
    for (field, value) in [("hidden_size", 1_000_000_000u64), ("num_hidden_layers", 1)] {
        std::fs::write(&config, &original).unwrap();
        edit_json(&config, |c| c[field] = value.into());
        let err = refused(&generate(&model, &[]));
        assert!(
            err.contains("config.json") && err.contains(field) && err.contains("disagree"),
            "{field} {value}: {err}"
        );
        assert!(!err.contains("0.0 GB"), "{err}");
    }
    let _ = std::fs::remove_dir_all(model.parent().unwrap());
}

#[test]
fn a_tensor_whose_element_count_wraps_is_refused_not_allocated() {
    let model = fixture("wrap");
    let h = header(&model);
    let from = h["model.norm.weight"]["data_offsets"][0].as_u64().unwrap();
    edit_header(&model, |text| {
        let mut v: Value = serde_json::from_str(&text).unwrap();
        // 2^62 x 64 f32 values: 2^70 bytes, which wraps to 0 in 64 bits.
        v["model.norm.weight"]["shape"] = serde_json::json!([1u64 << 62, 64]);
        v["model.norm.weight"]["data_offsets"] = serde_json::json!([from, from]);
        v.to_string()
    });
    let err = refused(&generate(&model, &[]));
    assert!(
        err.contains("model.safetensors") && err.contains("model.norm.weight"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(model.parent().unwrap());
}

#[test]
fn overlapping_tensors_and_a_tensor_named_twice_are_refused() {
    let model = fixture("overlap");
    let original = std::fs::read(model.join("model.safetensors")).unwrap();
    let (a, b) = (
        "model.layers.0.input_layernorm.weight",
        "model.layers.0.post_attention_layernorm.weight",
    );
    edit_header(&model, |text| {
        let mut v: Value = serde_json::from_str(&text).unwrap();
        v[b]["data_offsets"] = v[a]["data_offsets"].clone();
        v.to_string()
    });
    let err = refused(&generate(&model, &[]));
    assert!(
        err.contains("model.safetensors") && err.contains("overlap") && err.contains(a),
        "{err}"
    );

    std::fs::write(model.join("model.safetensors"), &original).unwrap();
    edit_header(&model, |text| {
        let v: Value = serde_json::from_str(&text).unwrap();
        // The same name again, pointing at another tensor's bytes: a reader keeping the
        // last of two entries would run on those.
        let twice = format!("\"{a}\":{},", v[b]);
        format!("{{{twice}{}", &text[1..])
    });
    let err = refused(&generate(&model, &[]));
    assert!(err.contains("named twice") && err.contains(a), "{err}");
    let _ = std::fs::remove_dir_all(model.parent().unwrap());
}

#[test]
fn tokenizer_ids_past_the_vocabulary_are_refused_at_load() {
    let model = fixture("vocab");
    let vocab = serde_json::from_slice::<Value>(&std::fs::read(model.join("config.json")).unwrap())
        .unwrap()["vocab_size"]
        .as_u64()
        .unwrap();
    // In the model's own vocabulary: added tokens get the next free ids whatever the
    // file says, but the model's table keeps the ids it is given.
    edit_json(&model.join("tokenizer.json"), |t| {
        t["model"]["vocab"]["<|beyond|>"] = (vocab + 100).into();
    });
    let err = refused(&generate(&model, &[]));
    assert!(
        err.contains("tokenizer.json")
            && err.contains(&format!("vocab_size {vocab}"))
            && err.contains("<|beyond|>"),
        "{err}"
    );
    let _ = std::fs::remove_dir_all(model.parent().unwrap());
}

#[test]
fn chat_templates_that_never_end_or_never_stop_writing_are_stopped() {
    let model = fixture("template");
    let config = model.join("tokenizer_config.json");
    let endless =
        "{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}";
    edit_json(&config, |c| c["chat_template"] = endless.into());
    let err = refused(&generate(&model, &[]));
    assert!(
        err.contains("chat template") && err.contains("steps of work"),
        "{err}"
    );

    let writer = "{% for i in range(100000) %}{% for j in range(100000) %}\
                  {{ messages[0].content }}{% endfor %}{% endfor %}";
    edit_json(&config, |c| c["chat_template"] = writer.into());
    let long = "x".repeat(8192);
    let err = refused(&generate_with(&model, &long, "4", &[]));
    assert!(err.contains("MiB for one prompt"), "{err}");
    let _ = std::fs::remove_dir_all(model.parent().unwrap());
}

#[test]
fn a_load_error_under_rust_backtrace_is_one_message_not_a_stack_dump() {
    let model = fixture("backtrace");
    edit_header(&model, |text| {
        text.replace("\"model.norm.weight\"", "\"model.norm.weightX\"")
    });
    let out = Command::new(runner_exe())
        .args([
            "generate",
            "--model",
            s(&model),
            "--prompt",
            "hi",
            "--device",
            "cpu",
        ])
        .env("RUST_BACKTRACE", "1")
        .output()
        .unwrap();
    let err = refused(&out);
    assert!(err.contains("model.norm.weight"), "{err}");
    assert!(
        err.lines().count() <= 3 && !err.contains("backtrace"),
        "a stack dump:\n{err}"
    );
    let _ = std::fs::remove_dir_all(model.parent().unwrap());
}
