//! The fixtures' tokenizers: each carries its model family's real pipeline (normalizer,
//! pre-tokenizer, post-processor, decoder, special tokens, byte fallback for Gemma) with a
//! small BPE vocabulary trained here, so that a fixture tokenizes the way the real model
//! does and the way transformers does when it loads the folder.
//!
//! transformers does not read every part of tokenizer.json: for the classes named in
//! tokenizer_config.json (Qwen2Tokenizer, GemmaTokenizer) it keeps the vocabulary, the
//! merges and the post-processor and rebuilds the rest from its own code, and it takes the
//! added tokens from `added_tokens_decoder`. The pipelines below are therefore the ones
//! those classes build, which are also the ones the real checkpoints ship.

use super::fixture::Arch;
use crate::engine::EngineError;
use serde_json::{json, Value};
use tokenizers::models::bpe::{BpeTrainerBuilder, BPE};
use tokenizers::models::TrainerWrapper;
use tokenizers::normalizers::{NormalizerWrapper, Replace, NFC};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::pre_tokenizers::PreTokenizerWrapper;
use tokenizers::{AddedToken, SplitDelimiterBehavior, Tokenizer};

/// Qwen2's split: letters runs, single digits, punctuation runs, newline runs.
const QWEN2_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// Llama 3's split: as Qwen2's but digits in groups of up to three.
const LLAMA3_SPLIT: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";

/// SentencePiece's word-boundary marker, which Gemma's normalizer puts for every space.
const SPACE_MARK: &str = "\u{2581}";

/// Special tokens of each family in the order they get ids, the BOS token, and the
/// tokens that end a turn (from the architecture table). Qwen2 and Llama 3 number them
/// after the learned vocabulary, Gemma before it (as the real vocabularies do).
pub(super) fn specials(
    arch: Arch,
) -> (
    &'static [&'static str],
    Option<&'static str>,
    &'static [&'static str],
) {
    let facts = &arch.row().fixture;
    (facts.specials, facts.bos, facts.eos)
}

/// Phi-3's fixture keeps a generic byte-level BPE (special tokens first): the table's
/// fifth architecture shows fused projections, not a fifth tokenizer pipeline.
fn train_byte_level(
    special: &[&str],
    vocab_target: usize,
    corpus: Vec<String>,
) -> Result<Tokenizer, EngineError> {
    let err = |e: tokenizers::Error| EngineError::Tokenizer(e.to_string());
    let added: Vec<AddedToken> = special.iter().map(|s| AddedToken::from(*s, true)).collect();
    let trainer = BpeTrainerBuilder::new()
        .vocab_size(vocab_target)
        .min_frequency(2)
        .show_progress(false)
        .special_tokens(added.clone())
        .initial_alphabet(ByteLevel::alphabet().into_iter().collect())
        .build();
    let mut tokenizer = Tokenizer::new(BPE::default());
    tokenizer.with_pre_tokenizer(Some(ByteLevel::new(false, true, true)));
    tokenizer.with_decoder(Some(ByteLevel::new(false, true, true)));
    let mut trainer = TrainerWrapper::BpeTrainer(trainer);
    tokenizer
        .train(&mut trainer, corpus.into_iter())
        .map_err(err)?;
    tokenizer.add_special_tokens(added).map_err(err)?;
    Ok(tokenizer)
}

/// Trains a BPE vocabulary of about `vocab_target` tokens (special and byte tokens
/// included) on `corpus` through `arch`'s real pipeline.
pub(super) fn train_tokenizer(
    arch: Arch,
    vocab_target: usize,
    corpus: Vec<String>,
) -> Result<Tokenizer, EngineError> {
    let (special, _, _) = specials(arch);
    if arch == Arch::Phi3 {
        return train_byte_level(special, vocab_target, corpus);
    }
    let err = |e: tokenizers::Error| EngineError::Tokenizer(e.to_string());
    let gemma = arch == Arch::Gemma3;
    let reserved = special.len() + if gemma { 256 } else { 0 };
    let mut trainer = BpeTrainerBuilder::new()
        .vocab_size(vocab_target.saturating_sub(reserved))
        .min_frequency(2)
        .show_progress(false);
    if !gemma {
        trainer = trainer.initial_alphabet(ByteLevel::alphabet().into_iter().collect());
    }
    let mut trainer = TrainerWrapper::BpeTrainer(trainer.build());
    let corpus = corpus.into_iter().chain(pipeline_corpus());
    let mut tokenizer = Tokenizer::new(BPE::default());
    match arch {
        Arch::Qwen2 => {
            tokenizer.with_normalizer(Some(NFC)).map_err(err)?;
            tokenizer.with_pre_tokenizer(Some(byte_level_split(QWEN2_SPLIT)?));
        }
        Arch::Llama => {
            tokenizer.with_pre_tokenizer(Some(byte_level_split(LLAMA3_SPLIT)?));
        }
        Arch::Gemma3 => {
            let replace = Replace::new(" ", SPACE_MARK).map_err(err)?;
            tokenizer
                .with_normalizer(Some(NormalizerWrapper::Replace(replace)))
                .map_err(err)?;
            // Only while training: pieces start at a word boundary and never span one,
            // as SentencePiece trains them; the saved tokenizer has no pre-tokenizer.
            let words = Split::new(
                SplitPattern::String(SPACE_MARK.into()),
                SplitDelimiterBehavior::MergedWithNext,
                false,
            )
            .map_err(err)?;
            tokenizer.with_pre_tokenizer(Some(words));
        }
        Arch::Phi3 => unreachable!("Phi-3 returned above"),
    }
    tokenizer.train(&mut trainer, corpus).map_err(err)?;
    let trained: Value = serde_json::from_str(&tokenizer.to_string(false).map_err(err)?)
        .map_err(|e| EngineError::Tokenizer(format!("trained tokenizer: {e}")))?;
    let learned = learned_vocab(&trained)?;
    let merges = trained["model"]["merges"].clone();
    let file = match arch {
        Arch::Qwen2 => qwen2_json(special, learned, merges),
        Arch::Llama => llama3_json(special, learned, merges),
        Arch::Gemma3 => gemma3_json(special, learned, merges),
        Arch::Phi3 => unreachable!("Phi-3 returned above"),
    };
    let text = serde_json::to_string(&file).expect("json values serialise");
    text.parse::<Tokenizer>().map_err(err)
}

/// Lines added to every training corpus so that the vocabulary holds what tells the
/// pipelines apart: multi-digit numbers and decimals (digit merges exist, so Qwen2's
/// single digits and Llama 3's groups of three give different ids), whitespace runs,
/// accented letters and CJK.
fn pipeline_corpus() -> impl Iterator<Item = String> {
    const LINES: &[&str] = &[
        "confidence 0.84 after 12 of 128 sensors, 365 days, 2024 and 1000 runs",
        "scores 0.125 0.5 0.875 1.0 and 12.5 percent of 840 cases",
        "  indented  text\n\nnew paragraph\n\tcell\tcell  ",
        "caf\u{e9} na\u{ef}ve r\u{e9}sum\u{e9} \u{c5}ngstr\u{f6}m",
        "\u{4fe1}\u{5ff5} \u{6a21}\u{578b} \u{8bc1}\u{636e} \u{6982}\u{7387}",
    ];
    // Often enough that their merges rank among a tiny fixture's few hundred.
    (0..200).flat_map(|_| LINES.iter().map(|l| l.to_string()))
}

fn byte_level_split(pattern: &str) -> Result<PreTokenizerWrapper, EngineError> {
    let split = Split::new(
        SplitPattern::Regex(pattern.into()),
        SplitDelimiterBehavior::Isolated,
        false,
    )
    .map_err(|e| EngineError::Tokenizer(e.to_string()))?;
    Ok(PreTokenizerWrapper::Sequence(Sequence::new(vec![
        split.into(),
        ByteLevel::new(false, false, false).into(),
    ])))
}

/// The trained vocabulary in id order.
fn learned_vocab(trained: &Value) -> Result<Vec<String>, EngineError> {
    let map = trained["model"]["vocab"]
        .as_object()
        .ok_or_else(|| EngineError::Tokenizer("trained tokenizer has no vocabulary".into()))?;
    let mut pairs: Vec<(u64, &String)> = map
        .iter()
        .map(|(t, id)| (id.as_u64().unwrap_or(u64::MAX), t))
        .collect();
    pairs.sort();
    Ok(pairs.into_iter().map(|(_, t)| t.clone()).collect())
}

fn added(id: usize, content: &str, special: bool) -> Value {
    json!({
        "id": id,
        "content": content,
        "single_word": false,
        "lstrip": false,
        "rstrip": false,
        "normalized": false,
        "special": special,
    })
}

/// The special tokens as `added_tokens`, with ids from `first` on.
fn added_from(first: usize, special: &[&str]) -> Vec<Value> {
    special
        .iter()
        .enumerate()
        .map(|(i, t)| added(first + i, t, true))
        .collect()
}

fn vocab_object(tokens: &[String]) -> Value {
    let map: serde_json::Map<String, Value> = tokens
        .iter()
        .enumerate()
        .map(|(i, t)| (t.clone(), json!(i)))
        .collect();
    Value::Object(map)
}

fn split_json(pattern: &str) -> Value {
    json!({
        "type": "Split",
        "pattern": {"Regex": pattern},
        "behavior": "Isolated",
        "invert": false,
    })
}

fn byte_level_bpe(vocab: &[String], merges: Value, ignore_merges: bool) -> Value {
    json!({
        "type": "BPE",
        "dropout": null,
        "unk_token": null,
        "continuing_subword_prefix": "",
        "end_of_word_suffix": "",
        "fuse_unk": false,
        "byte_fallback": false,
        "ignore_merges": ignore_merges,
        "vocab": vocab_object(vocab),
        "merges": merges,
    })
}

/// Qwen2.5: NFC, the single-digit split, byte-level without a regex of its own; the
/// special tokens follow the learned vocabulary and none is added around a sequence.
fn qwen2_json(special: &[&str], learned: Vec<String>, merges: Value) -> Value {
    let base = learned.len();
    let added = added_from(base, special);
    let byte_level = json!({
        "type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false
    });
    json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": added,
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [split_json(QWEN2_SPLIT), byte_level],
        },
        "post_processor": byte_level,
        "decoder": byte_level,
        "model": byte_level_bpe(&learned, merges, false),
    })
}

fn template_processing(bos: &str, bos_id: usize) -> Value {
    let special = json!({"SpecialToken": {"id": bos, "type_id": 0}});
    json!({
        "type": "TemplateProcessing",
        "single": [special, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [
            special,
            {"Sequence": {"id": "A", "type_id": 0}},
            {"SpecialToken": {"id": bos, "type_id": 1}},
            {"Sequence": {"id": "B", "type_id": 1}},
        ],
        "special_tokens": {bos: {"id": bos, "ids": [bos_id], "tokens": [bos]}},
    })
}

/// Llama 3: no normalizer, the split with digit groups of up to three, byte-level, a
/// BPE that takes a whole word when the vocabulary has it (`ignore_merges`), and
/// `<|begin_of_text|>` prepended by the post-processor.
fn llama3_json(special: &[&str], learned: Vec<String>, merges: Value) -> Value {
    let base = learned.len();
    let added = added_from(base, special);
    json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": added,
        "normalizer": null,
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [
                split_json(LLAMA3_SPLIT),
                {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false},
            ],
        },
        "post_processor": {
            "type": "Sequence",
            "processors": [
                {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true},
                template_processing(special[0], base),
            ],
        },
        "decoder": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
        "model": byte_level_bpe(&learned, merges, true),
    })
}

/// Gemma 3: SentencePiece-style BPE. Spaces become "▁" in the normalizer, there is no
/// pre-tokenizer, characters outside the vocabulary fall back to `<0xXX>` byte tokens,
/// and the special tokens and bytes come first in the vocabulary.
fn gemma3_json(special: &[&str], learned: Vec<String>, merges: Value) -> Value {
    let mut vocab: Vec<String> = special.iter().map(|s| s.to_string()).collect();
    vocab.extend((0..=255u8).map(|b| format!("<0x{b:02X}>")));
    for t in learned {
        if !vocab.contains(&t) {
            vocab.push(t);
        }
    }
    let added = added_from(0, special);
    let bos = "<bos>";
    let bos_id = special.iter().position(|t| *t == bos).unwrap_or(0);
    json!({
        "version": "1.0",
        "truncation": null,
        "padding": null,
        "added_tokens": added,
        "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": SPACE_MARK},
        "pre_tokenizer": null,
        "post_processor": template_processing(bos, bos_id),
        "decoder": {
            "type": "Sequence",
            "decoders": [
                {"type": "Replace", "pattern": {"String": SPACE_MARK}, "content": " "},
                {"type": "ByteFallback"},
                {"type": "Fuse"},
            ],
        },
        "model": {
            "type": "BPE",
            "dropout": null,
            "unk_token": "<unk>",
            "continuing_subword_prefix": null,
            "end_of_word_suffix": null,
            "fuse_unk": true,
            "byte_fallback": true,
            "ignore_merges": false,
            "vocab": vocab_object(&vocab),
            "merges": merges,
        },
    })
}

/// tokenizer_config.json as the real checkpoints write it: the class transformers
/// builds, the special tokens by role and every added token by id (transformers takes
/// the added tokens from here, not from tokenizer.json).
pub(super) fn tokenizer_config(arch: Arch, tokenizer: &Tokenizer, template: &str) -> Value {
    let (special, bos, eos) = specials(arch);
    let mut decoder = serde_json::Map::new();
    for t in special {
        if let Some(id) = tokenizer.token_to_id(t) {
            let mut entry = added(id as usize, t, true);
            entry.as_object_mut().map(|o| o.remove("id"));
            decoder.insert(id.to_string(), entry);
        }
    }
    let mut config = match arch {
        Arch::Qwen2 => json!({
            "tokenizer_class": "Qwen2Tokenizer",
            "add_bos_token": false,
            "add_prefix_space": false,
            "bos_token": null,
            "eos_token": eos[0],
            "pad_token": "<|endoftext|>",
            "unk_token": null,
            "errors": "replace",
            "split_special_tokens": false,
            "clean_up_tokenization_spaces": false,
            "model_max_length": 131072,
        }),
        Arch::Llama => json!({
            "tokenizer_class": "PreTrainedTokenizerFast",
            "bos_token": bos,
            // The instruct model's end of turn, as its tokenizer_config.json names it.
            "eos_token": "<|eot_id|>",
            "clean_up_tokenization_spaces": true,
            "model_input_names": ["input_ids", "attention_mask"],
            "model_max_length": 131072,
        }),
        Arch::Gemma3 => json!({
            "tokenizer_class": "GemmaTokenizer",
            "add_bos_token": true,
            "add_eos_token": false,
            "bos_token": bos,
            "eos_token": eos[0],
            "pad_token": "<pad>",
            "unk_token": "<unk>",
            "spaces_between_special_tokens": false,
            "clean_up_tokenization_spaces": false,
            "model_max_length": 131072,
        }),
        Arch::Phi3 => json!({
            "tokenizer_class": "PreTrainedTokenizerFast",
            "bos_token": bos,
            "eos_token": eos[0],
            "pad_token": "<|endoftext|>",
            "add_bos_token": false,
            "add_eos_token": false,
            "model_max_length": 131072,
        }),
    };
    let object = config.as_object_mut().expect("a json object");
    object.insert("added_tokens_decoder".into(), Value::Object(decoder));
    object.insert("chat_template".into(), json!(template));
    config
}
