use super::*;
use candle_core::quantized::gguf_file;
use std::io::Cursor;

/// A GGUF file holding only `metadata`, written and read back by candle.
fn content(metadata: &[(&str, Value)]) -> Content {
    let pairs: Vec<(&str, &Value)> = metadata.iter().map(|(k, v)| (*k, v)).collect();
    let mut bytes = Cursor::new(Vec::new());
    gguf_file::write(&mut bytes, &pairs, &[]).unwrap();
    bytes.set_position(0);
    Content::read(&mut bytes).unwrap()
}

fn strings(items: &[&str]) -> Value {
    Value::Array(items.iter().map(|s| Value::String(s.to_string())).collect())
}

/// A byte-level BPE vocabulary: `h`, `i`, `hi`, a space and ` hi`, with two control tokens.
fn gpt2() -> Vec<(&'static str, Value)> {
    vec![
        ("general.architecture", Value::String("llama".into())),
        ("llama.context_length", Value::U32(2048)),
        ("tokenizer.ggml.model", Value::String("gpt2".into())),
        (
            "tokenizer.ggml.tokens",
            strings(&["<|endoftext|>", "<|im_end|>", "h", "i", "hi", "Ġ", "Ġhi"]),
        ),
        (
            "tokenizer.ggml.token_type",
            Value::Array([3, 3, 1, 1, 1, 1, 1].map(Value::I32).to_vec()),
        ),
        ("tokenizer.ggml.merges", strings(&["h i", "Ġ hi"])),
        ("tokenizer.ggml.bos_token_id", Value::U32(0)),
        ("tokenizer.ggml.eos_token_id", Value::U32(1)),
        (
            "tokenizer.chat_template",
            Value::String("{{ messages }}".into()),
        ),
    ]
}

fn with(mut base: Vec<(&'static str, Value)>, key: &'static str, value: Option<Value>) -> Content {
    base.retain(|(k, _)| *k != key);
    if let Some(v) = value {
        base.push((key, v));
    }
    content(&base)
}

fn error(c: &Content) -> String {
    match chat_from_gguf(c, Path::new("model.gguf")) {
        Ok(_) => panic!("expected an error"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn a_byte_level_vocabulary_encodes_with_its_merges_and_keeps_control_tokens_whole() {
    let chat = chat_from_gguf(&content(&gpt2()), Path::new("model.gguf")).unwrap();
    let ids = chat.tokenizer.encode("hi hi<|im_end|>", false).unwrap();
    assert_eq!(ids.get_ids(), &[4, 6, 1]);
    assert_eq!(chat.tokenizer.decode(&[4, 6], true).unwrap(), "hi hi");
    assert_eq!(chat.bos, Some(0));
    assert_eq!(chat.eos, vec![1]);
    assert_eq!(chat.context_length, Some(2048));
    assert_eq!(chat.chat_template.as_deref(), Some("{{ messages }}"));
    assert!(!chat.add_bos);
}

#[test]
fn a_sentencepiece_vocabulary_merges_by_score_and_falls_back_to_bytes() {
    let mut tokens = vec!["<unk>", "<s>", "</s>", "▁", "a", "b", "ab", "▁ab"];
    let bytes: Vec<String> = (0..=255u8).map(|b| format!("<0x{b:02X}>")).collect();
    tokens.extend(bytes.iter().map(String::as_str));
    let mut types = vec![2, 3, 3, 1, 1, 1, 1, 1];
    types.extend([6; 256]);
    let mut scores = vec![0.0, 0.0, 0.0, -1.0, -2.0, -3.0, -4.0, -5.0];
    scores.extend([0.0; 256]);
    let c = content(&[
        ("tokenizer.ggml.model", Value::String("llama".into())),
        ("tokenizer.ggml.tokens", strings(&tokens)),
        (
            "tokenizer.ggml.token_type",
            Value::Array(types.into_iter().map(Value::I32).collect()),
        ),
        (
            "tokenizer.ggml.scores",
            Value::Array(scores.into_iter().map(Value::F32).collect()),
        ),
        ("tokenizer.ggml.unknown_token_id", Value::U32(0)),
        ("tokenizer.ggml.bos_token_id", Value::U32(1)),
        ("tokenizer.ggml.eos_token_id", Value::U32(2)),
    ]);
    let chat = chat_from_gguf(&c, Path::new("model.gguf")).unwrap();
    // A space prefix by default, `▁ab` whole, `é` as its two UTF-8 bytes.
    let ids = chat.tokenizer.encode("ab é</s>", false).unwrap();
    let want_e: Vec<u32> = "é".bytes().map(|b| 8 + u32::from(b)).collect();
    let mut want = vec![7, 3];
    want.extend(&want_e);
    want.push(2);
    assert_eq!(ids.get_ids(), want.as_slice());
    assert_eq!(chat.tokenizer.decode(&want[..4], true).unwrap(), "ab é");
    assert!(
        chat.add_bos,
        "a SentencePiece file that does not say gets a BOS"
    );
}

#[test]
fn a_key_of_the_wrong_type_is_named_with_the_file() {
    let c = with(
        gpt2(),
        "tokenizer.ggml.bos_token_id",
        Some(Value::String("1".into())),
    );
    let e = error(&c);
    assert!(
        e.contains("model.gguf") && e.contains("tokenizer.ggml.bos_token_id"),
        "{e}"
    );
    let c = with(gpt2(), "tokenizer.ggml.tokens", Some(Value::U32(3)));
    let e = error(&c);
    assert!(
        e.contains("tokenizer.ggml.tokens") && e.contains("array"),
        "{e}"
    );
    let c = with(
        gpt2(),
        "tokenizer.ggml.token_type",
        Some(strings(&["1"; 7])),
    );
    assert!(error(&c).contains("tokenizer.ggml.token_type"));
}

#[test]
fn a_missing_vocabulary_is_an_error() {
    let e = error(&with(gpt2(), "tokenizer.ggml.tokens", None));
    assert!(
        e.contains("tokenizer.ggml.tokens") && e.contains("missing"),
        "{e}"
    );
    let e = error(&with(gpt2(), "tokenizer.ggml.model", None));
    assert!(
        e.contains("tokenizer.ggml.model") && e.contains("missing"),
        "{e}"
    );
}

#[test]
fn a_byte_level_vocabulary_without_merges_is_an_error() {
    let e = error(&with(gpt2(), "tokenizer.ggml.merges", None));
    assert!(
        e.contains("tokenizer.ggml.merges") && e.contains("missing"),
        "{e}"
    );
    let e = error(&with(
        gpt2(),
        "tokenizer.ggml.merges",
        Some(strings(&["hi"])),
    ));
    assert!(e.contains("tokenizer.ggml.merges"), "{e}");
}

#[test]
fn an_unknown_tokenizer_model_is_an_error() {
    let e = error(&with(
        gpt2(),
        "tokenizer.ggml.model",
        Some(Value::String("rwkv".into())),
    ));
    assert!(e.contains("\"rwkv\"") && e.contains("not supported"), "{e}");
}

#[test]
fn an_id_outside_the_vocabulary_or_a_short_type_array_is_an_error() {
    let e = error(&with(
        gpt2(),
        "tokenizer.ggml.eos_token_id",
        Some(Value::U32(70)),
    ));
    assert!(
        e.contains("tokenizer.ggml.eos_token_id") && e.contains("outside"),
        "{e}"
    );
    let short = Value::Array(vec![Value::I32(1)]);
    let e = error(&with(gpt2(), "tokenizer.ggml.token_type", Some(short)));
    assert!(e.contains("1 entries"), "{e}");
}
