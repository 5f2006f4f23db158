//! Fixture models: deterministic files in the Hugging Face layout that the real loader
//! reads, for every architecture; chat prompts encode with BOS exactly once; generation
//! stops on the model's end-of-turn tokens and reports why it stopped.

use runner_engine::candle::fixture::{write_fixture, Arch, Size};
use runner_engine::candle::load::hub::ModelFiles;
use runner_engine::candle::Engine;
use runner_engine::{Backend, FinishReason, Message, Prompt, Request, RequestId, Role};
use std::path::PathBuf;

fn dir(tag: &str) -> PathBuf {
    std::env::temp_dir().join(format!("engine-fixture-{tag}-{}", std::process::id()))
}

#[test]
fn fixtures_are_byte_identical_across_writes() {
    let (a, b) = (dir("a"), dir("b"));
    write_fixture(Arch::Gemma3, Size::Tiny, &a).unwrap();
    write_fixture(Arch::Gemma3, Size::Tiny, &b).unwrap();
    for f in [
        "config.json",
        "generation_config.json",
        "model.safetensors",
        "tokenizer.json",
        "tokenizer_config.json",
    ] {
        assert_eq!(
            std::fs::read(a.join(f)).unwrap(),
            std::fs::read(b.join(f)).unwrap(),
            "{f}"
        );
    }
    std::fs::remove_dir_all(&a).unwrap();
    std::fs::remove_dir_all(&b).unwrap();
}

fn chat(user: &str) -> Prompt {
    Prompt::Chat(vec![
        Message {
            role: Role::System,
            content: "be brief".into(),
        },
        Message {
            role: Role::User,
            content: user.into(),
        },
    ])
}

#[test]
fn every_architecture_loads_encodes_once_and_generates() {
    for (arch, tag, bos) in [
        (Arch::Qwen2, "qwen2", None),
        (Arch::Llama, "llama", Some("<|begin_of_text|>")),
        (Arch::Gemma3, "gemma3", Some("<bos>")),
    ] {
        let d = dir(tag);
        write_fixture(arch, Size::Tiny, &d).unwrap();
        let mut e = Engine::load(
            &ModelFiles::from_dir(&d).unwrap(),
            candle_core::Device::Cpu,
            tag,
        )
        .unwrap();
        let ids = e.encode(&chat("the coin is fair")).unwrap();
        let tok = tokenizers::Tokenizer::from_file(d.join("tokenizer.json")).unwrap();
        if let Some(bos) = bos {
            let bos_id = tok.token_to_id(bos).unwrap();
            assert_eq!(ids[0], bos_id, "{tag}");
            assert_eq!(ids.iter().filter(|&&i| i == bos_id).count(), 1, "{tag}");
        }
        let out = e
            .generate(&[Request {
                id: RequestId::new("r"),
                prompt: chat("the coin is fair"),
                seeds: vec![5],
                max_new_tokens: 7,
                sampling: runner_core::protocol::SAMPLING,
            }])
            .unwrap();
        let s = &out[0];
        assert!(
            !s.token_ids.iter().any(|t| e.eos_ids().contains(t)),
            "{tag}"
        );
        match s.finish_reason {
            FinishReason::Length => assert_eq!(s.token_ids.len(), 7, "{tag}"),
            FinishReason::Stop => assert!(s.token_ids.len() < 7, "{tag}"),
        }
        assert_eq!(s.prompt_tokens, ids.len());
        std::fs::remove_dir_all(&d).unwrap();
    }
}

#[test]
fn sharded_weights_named_by_an_index_load_like_a_single_file() {
    let d = dir("sharded");
    write_fixture(Arch::Llama, Size::Tiny, &d).unwrap();
    let single = Engine::load(
        &ModelFiles::from_dir(&d).unwrap(),
        candle_core::Device::Cpu,
        "one",
    )
    .unwrap();
    let prompt = single
        .encode(&Prompt::Raw("the coin is fair".into()))
        .unwrap();
    let want = single.prompt_logits(std::slice::from_ref(&prompt)).unwrap();

    // Split the tensors over two shard files and describe them in an index.
    let tensors =
        candle_core::safetensors::load(d.join("model.safetensors"), &candle_core::Device::Cpu)
            .unwrap();
    std::fs::remove_file(d.join("model.safetensors")).unwrap();
    let mut names: Vec<&String> = tensors.keys().collect();
    names.sort();
    let mut map = serde_json::Map::new();
    for (i, part) in names.chunks(names.len() / 2 + 1).enumerate() {
        let file = format!("model-0000{}-of-00002.safetensors", i + 1);
        let subset: std::collections::HashMap<String, candle_core::Tensor> = part
            .iter()
            .map(|n| ((*n).clone(), tensors[*n].clone()))
            .collect();
        candle_core::safetensors::save(&subset, d.join(&file)).unwrap();
        for n in part {
            map.insert((*n).clone(), serde_json::Value::String(file.clone()));
        }
    }
    let index = serde_json::json!({ "metadata": {}, "weight_map": map });
    std::fs::write(d.join("model.safetensors.index.json"), index.to_string()).unwrap();

    let files = ModelFiles::from_dir(&d).unwrap();
    assert_eq!(files.weights.len(), 2);
    assert_eq!(files.weight_digests().unwrap().len(), 2);
    let sharded = Engine::load(&files, candle_core::Device::Cpu, "two").unwrap();
    assert_eq!(
        sharded
            .prompt_logits(std::slice::from_ref(&prompt))
            .unwrap(),
        want
    );
    std::fs::remove_dir_all(&d).unwrap();
}
