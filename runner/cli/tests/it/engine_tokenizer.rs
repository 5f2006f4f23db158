//! Fixture tokenizers against transformers: on each architecture's fixture, tricky text
//! (digit groups, decimals, whitespace runs, NFC vs NFD, CJK, emoji, text that looks like
//! a special token) and a rendered chat prompt must give exactly the ids that
//! `AutoTokenizer.from_pretrained(folder)` gives; the reference files come from
//! scripts/parity.py, which loads the same fixtures.

use runner_engine::candle::fixture::{write_fixture, Arch, Size};
use runner_engine::candle::load::hub::ModelFiles;
use runner_engine::candle::Engine;
use runner_engine::{Message, Prompt, Role};
use serde::Deserialize;

#[derive(Deserialize)]
struct Reference {
    tokenizer_class: String,
    cases: Vec<Case>,
    chat: Chat,
}

#[derive(Deserialize)]
struct Case {
    text: String,
    ids: Vec<u32>,
    ids_with_special_tokens: Vec<u32>,
    decoded: String,
}

#[derive(Deserialize)]
struct Chat {
    messages: Vec<ChatMessage>,
    ids: Vec<u32>,
}

#[derive(Deserialize)]
struct ChatMessage {
    role: String,
    content: String,
}

fn check(arch: Arch, tag: &str, class: &str, bos: Option<&str>) {
    let data = crate::common::crate_dir().join(format!("tests/data/tokenizer/{tag}.json"));
    let reference: Reference =
        serde_json::from_str(&std::fs::read_to_string(&data).unwrap()).unwrap();
    // transformers must have loaded the class the real model uses, or the reference
    // would test some other pipeline.
    assert_eq!(reference.tokenizer_class, class, "{tag}");
    let dir = std::env::temp_dir().join(format!("engine-tokenizer-{tag}-{}", std::process::id()));
    write_fixture(arch, Size::Tiny, &dir).unwrap();
    let engine = Engine::load(
        &ModelFiles::from_dir(&dir).unwrap(),
        candle_core::Device::Cpu,
        tag,
    )
    .unwrap();
    let tokenizer = tokenizers::Tokenizer::from_file(dir.join("tokenizer.json")).unwrap();
    assert!(reference.cases.len() >= 8);
    for (i, case) in reference.cases.iter().enumerate() {
        let ids = engine.encode(&Prompt::Raw(case.text.clone())).unwrap();
        assert_eq!(ids, case.ids, "{tag} case {i}: {:?}", case.text);
        // The post-processor (BOS for Llama and Gemma, nothing for Qwen2) as a user of
        // the tokenizer file gets it.
        let with = tokenizer.encode(case.text.as_str(), true).unwrap();
        assert_eq!(
            with.get_ids(),
            case.ids_with_special_tokens,
            "{tag} case {i}: with special tokens"
        );
        assert_eq!(
            engine.decode(&ids).unwrap(),
            case.decoded,
            "{tag} case {i}: decoded"
        );
    }

    let messages: Vec<Message> = reference
        .chat
        .messages
        .iter()
        .map(|m| Message {
            role: match m.role.as_str() {
                "system" => Role::System,
                "user" => Role::User,
                _ => Role::Assistant,
            },
            content: m.content.clone(),
        })
        .collect();
    let ids = engine.encode(&Prompt::Chat(messages)).unwrap();
    assert_eq!(ids, reference.chat.ids, "{tag}: chat prompt");
    if let Some(bos) = bos {
        // The template writes BOS; encoding must not add a second one. (The user's
        // literal "<bos>" later on is a BOS token in transformers too.)
        let bos = tokenizer.token_to_id(bos).unwrap();
        assert_eq!(ids[0], bos, "{tag}");
        assert_ne!(ids[1], bos, "{tag}: BOS doubled");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn qwen2_tokenizes_like_transformers() {
    check(Arch::Qwen2, "qwen2", "Qwen2Tokenizer", None);
}

#[test]
fn llama_tokenizes_like_transformers() {
    check(
        Arch::Llama,
        "llama",
        "TokenizersBackend",
        Some("<|begin_of_text|>"),
    );
}

#[test]
fn gemma3_tokenizes_like_transformers() {
    check(Arch::Gemma3, "gemma3", "GemmaTokenizer", Some("<bos>"));
}
