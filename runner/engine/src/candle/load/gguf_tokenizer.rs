//! The tokenizer and chat metadata of a GGUF file. A GGUF carries no tokenizer.json: its
//! vocabulary, merges, scores and special token ids sit in the metadata under llama.cpp's
//! key names, and this builds the `tokenizers` pipeline they describe, as transformers'
//! GGUF loader does, so that a GGUF model sees the token ids its safetensors twin would.
//!
//! Two vocabularies are known: `gpt2` (byte-level BPE with merges, SmolLM2's, Llama 3's,
//! Qwen's) and `llama` (SentencePiece BPE with scores and byte fallback, Llama 2's and
//! Gemma's).

use crate::candle::chat_template::ChatTemplate;
use crate::EngineError;
use candle_core::quantized::gguf_file::{Content, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use tokenizers::decoders::byte_fallback::ByteFallback;
use tokenizers::decoders::byte_level::ByteLevel as ByteLevelDecoder;
use tokenizers::decoders::fuse::Fuse;
use tokenizers::decoders::sequence::Sequence as DecoderSequence;
use tokenizers::decoders::strip::Strip;
use tokenizers::models::bpe::{BpeBuilder, Vocab as BpeVocab};
use tokenizers::normalizers::{ByteLevel as ByteLevelNormalizer, Replace};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::metaspace::{Metaspace, PrependScheme};
use tokenizers::pre_tokenizers::sequence::Sequence as PreSequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::{
    AddedToken, DecoderWrapper, NormalizedString, Normalizer, PreTokenizerWrapper,
    SplitDelimiterBehavior, Tokenizer,
};

/// What a chat needs from a GGUF file besides the weights.
pub struct GgufChat {
    pub tokenizer: Tokenizer,
    pub bos: Option<u32>,
    /// The ids that end a reply: the file's EOS, its end-of-turn ids, and the control
    /// tokens chat templates close a turn with.
    pub eos: Vec<u32>,
    /// `tokenizer.chat_template`; base models' files (Gemma 3 270M's) have none.
    pub chat_template: Option<String>,
    pub context_length: Option<usize>,
    /// Whether the model expects a BOS in front of a plain text.
    pub add_bos: bool,
}

impl GgufChat {
    /// The file's chat template with its BOS and EOS texts, if it has one.
    pub fn template(&self) -> Option<ChatTemplate> {
        let text = |id: Option<u32>| id.and_then(|i| self.tokenizer.id_to_token(i));
        let source = self.chat_template.as_ref()?;
        Some(ChatTemplate::new(
            source.clone(),
            text(self.bos),
            text(self.eos.first().copied()),
        ))
    }
}

/// llama.cpp's token types (`tokenizer.ggml.token_type`).
const CONTROL: i64 = 3;
const USER_DEFINED: i64 = 4;

/// Texts of control tokens that close a chat turn; llama.cpp stops generation on these
/// even where the file names only the end-of-text token as EOS (Gemma's `<eos>`).
const END_OF_TURN: &[&str] = &["<end_of_turn>", "<|im_end|>", "<|eot_id|>", "<|end|>"];

/// Reads the metadata of the GGUF file at `path` and builds its chat side.
pub fn chat_from_gguf_file(path: &Path) -> Result<GgufChat, EngineError> {
    crate::candle::gguf::prescan::check(path)?;
    let mut file = std::fs::File::open(path).map_err(|source| EngineError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let content = Content::read(&mut file).map_err(|e| EngineError::BadFile {
        what: "GGUF file",
        path: path.to_path_buf(),
        message: crate::without_backtrace(e).to_string(),
    })?;
    chat_from_gguf(&content, path)
}

/// The tokenizer, special ids, chat template and context length `content` describes;
/// `path` only names the file in errors.
pub fn chat_from_gguf(content: &Content, path: &Path) -> Result<GgufChat, EngineError> {
    let meta = Meta {
        map: &content.metadata,
        path,
    };
    let model = meta.string("tokenizer.ggml.model")?;
    let architecture = meta.opt_string("general.architecture")?;
    let tokens = meta.strings("tokenizer.ggml.tokens")?;
    if tokens.is_empty() {
        return Err(meta.bad("tokenizer.ggml.tokens", "the vocabulary is empty".into()));
    }
    let token_types = match meta.get("tokenizer.ggml.token_type") {
        Some(_) => meta.integers("tokenizer.ggml.token_type", tokens.len())?,
        None => Vec::new(),
    };
    let id = |key: &str| -> Result<Option<u32>, EngineError> {
        let Some(i) = meta.opt_u32(key)? else {
            return Ok(None);
        };
        if i as usize >= tokens.len() {
            return Err(meta.bad(
                key,
                format!("id {i} is outside the vocabulary of {}", tokens.len()),
            ));
        }
        Ok(Some(i))
    };
    let bos = id("tokenizer.ggml.bos_token_id")?;
    let eos_id = id("tokenizer.ggml.eos_token_id")?;
    let unk = id("tokenizer.ggml.unknown_token_id")?;
    let pad = id("tokenizer.ggml.padding_token_id")?;
    let add_space_prefix = meta.opt_bool("tokenizer.ggml.add_space_prefix")?;

    let vocab = match model.as_str() {
        "gpt2" => byte_level(&meta, &tokens, add_space_prefix.unwrap_or(false))?,
        "llama" => sentencepiece(
            &meta,
            &tokens,
            unk,
            architecture.as_deref(),
            add_space_prefix.unwrap_or(true),
        )?,
        other => {
            return Err(meta.bad(
                "tokenizer.ggml.model",
                format!("tokenizer {other:?} is not supported (gpt2 and llama are)"),
            ))
        }
    };
    let mut tokenizer = vocab.tokenizer;
    add_added_tokens(
        &mut tokenizer,
        &tokens,
        &token_types,
        &vocab.ids,
        model == "gpt2",
        [bos, eos_id, unk, pad],
    )
    .map_err(|e| meta.bad("tokenizer.ggml.tokens", e.to_string()))?;

    let mut eos: Vec<u32> = Vec::new();
    for key in [
        "tokenizer.ggml.eos_token_id",
        "tokenizer.ggml.eot_token_id",
        "tokenizer.ggml.eom_token_id",
    ] {
        if let Some(i) = id(key)? {
            eos.push(i);
        }
    }
    for (i, (token, kind)) in tokens.iter().zip(&token_types).enumerate() {
        if *kind == CONTROL && END_OF_TURN.contains(&token.as_str()) {
            eos.push(i as u32);
        }
    }
    let mut seen = std::collections::HashSet::new();
    eos.retain(|i| seen.insert(*i));

    let context_length = match &architecture {
        Some(arch) => meta
            .opt_u64(&format!("{arch}.context_length"))?
            .map(|n| n as usize),
        None => None,
    };
    let chat_template = meta.opt_string("tokenizer.chat_template")?;
    let max = crate::candle::chat_template::MAX_TEMPLATE_BYTES;
    if let Some(n) = chat_template.as_ref().map(String::len).filter(|&n| n > max) {
        let m = format!(
            "the template is {n} bytes, over the bound of {} MiB",
            max >> 20
        );
        return Err(meta.bad("tokenizer.chat_template", m));
    }
    Ok(GgufChat {
        tokenizer,
        bos,
        eos,
        chat_template,
        context_length,
        // llama.cpp adds a BOS to a SentencePiece vocabulary whose file does not say.
        add_bos: meta
            .opt_bool("tokenizer.ggml.add_bos_token")?
            .unwrap_or(model == "llama"),
    })
}

/// A tokenizer before the added tokens, and the vocabulary it was built on.
struct Vocab {
    tokenizer: Tokenizer,
    ids: HashMap<String, u32>,
}

fn bpe_vocab(ids: &HashMap<String, u32>) -> BpeVocab {
    ids.iter().map(|(t, i)| (t.clone(), *i)).collect()
}

/// Byte-level BPE: the file spells tokens in GPT-2's byte alphabet and lists the merges.
fn byte_level(
    meta: &Meta,
    tokens: &[String],
    add_prefix_space: bool,
) -> Result<Vocab, EngineError> {
    let alphabet = ByteLevel::alphabet();
    let mut ids = HashMap::with_capacity(tokens.len());
    for (i, token) in tokens.iter().enumerate() {
        // A token outside the byte alphabet is a raw text (some converters write added
        // tokens so); the BPE model only sees byte-alphabet spellings.
        let spelled = if token.chars().all(|c| alphabet.contains(&c)) {
            token.clone()
        } else {
            let mut n = NormalizedString::from(token.as_str());
            ByteLevelNormalizer::new()
                .normalize(&mut n)
                .map_err(|e| meta.bad("tokenizer.ggml.tokens", e.to_string()))?;
            n.get().to_string()
        };
        ids.insert(spelled, i as u32);
    }
    let Some(_) = meta.get("tokenizer.ggml.merges") else {
        return Err(meta.bad(
            "tokenizer.ggml.merges",
            "missing: a gpt2 tokenizer needs its merges".into(),
        ));
    };
    let merges = meta
        .strings("tokenizer.ggml.merges")?
        .into_iter()
        .enumerate()
        .map(|(n, m)| match m.split_once(' ') {
            Some((a, b)) => Ok((a.to_string(), b.to_string())),
            None => Err(meta.bad(
                "tokenizer.ggml.merges",
                format!("merge {n} ({m:?}) is not two tokens split by a space"),
            )),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let bpe = BpeBuilder::new()
        .vocab_and_merges(bpe_vocab(&ids), merges)
        .continuing_subword_prefix(String::new())
        .end_of_word_suffix(String::new())
        .build()
        .map_err(|e| meta.bad("tokenizer.ggml.merges", e.to_string()))?;
    let mut tokenizer = Tokenizer::new(bpe);
    let byte_level = ByteLevel::new(add_prefix_space, true, true);
    let pre: PreTokenizerWrapper = match meta.opt_string("tokenizer.ggml.pre")?.as_deref() {
        Some(pre) => match split_regex(pre) {
            Some(regex) => {
                let split = Split::new(
                    SplitPattern::Regex(regex.into()),
                    SplitDelimiterBehavior::Isolated,
                    false,
                )
                .map_err(|e| meta.bad("tokenizer.ggml.pre", e.to_string()))?;
                PreSequence::new(vec![split.into(), byte_level.use_regex(false).into()]).into()
            }
            None => byte_level.into(),
        },
        None => byte_level.into(),
    };
    tokenizer.with_pre_tokenizer(Some(pre));
    tokenizer.with_decoder(Some(ByteLevelDecoder::default()));
    Ok(Vocab { tokenizer, ids })
}

/// The split before byte-level BPE for a `tokenizer.ggml.pre` whose vocabulary was not
/// learned on GPT-2's; `None` keeps GPT-2's (SmolLM's `smollm`, `gpt2`, `default`, and
/// names not listed here, as transformers does).
fn split_regex(pre: &str) -> Option<&'static str> {
    const LLAMA3: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
    const QWEN2: &str = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
    match pre {
        "llama3" | "llama-v3" | "llama-bpe" | "smaug-bpe" | "dbrx" | "falcon3" => Some(LLAMA3),
        "qwen2" | "deepseek-r1-qwen" => Some(QWEN2),
        _ => None,
    }
}

/// Whether `architecture` is a Gemma, whose SentencePiece vocabulary is kept in merge
/// order but whose scores do not follow it, and whose spaces come from a normalizer.
fn is_gemma(architecture: Option<&str>) -> bool {
    matches!(architecture, Some("gemma" | "gemma2" | "gemma3"))
}

/// SentencePiece BPE: tokens with scores and `<0xNN>` byte tokens, merges (when the file
/// has none) recovered from the vocabulary, best merge first.
fn sentencepiece(
    meta: &Meta,
    tokens: &[String],
    unk: Option<u32>,
    architecture: Option<&str>,
    add_space_prefix: bool,
) -> Result<Vocab, EngineError> {
    let gemma = is_gemma(architecture);
    // Gemma's files store the runs of spaces as spaces; the model text has them as `▁`.
    let spelled: Vec<String> = tokens
        .iter()
        .map(|t| {
            if gemma && !t.is_empty() && t.chars().all(|c| c == ' ') {
                "\u{2581}".repeat(t.chars().count())
            } else {
                t.clone()
            }
        })
        .collect();
    let mut ids: HashMap<String, u32> = HashMap::with_capacity(tokens.len());
    for (i, t) in spelled.iter().enumerate() {
        ids.insert(t.clone(), i as u32);
    }
    let merges = match meta.get("tokenizer.ggml.merges") {
        Some(_) => meta
            .strings("tokenizer.ggml.merges")?
            .into_iter()
            .map(|m| match m.split_once(' ') {
                Some((a, b)) => Ok((a.to_string(), b.to_string())),
                None => Err(meta.bad("tokenizer.ggml.merges", format!("bad merge {m:?}"))),
            })
            .collect::<Result<Vec<_>, _>>()?,
        None => {
            let rank: Vec<f64> = if gemma {
                (0..spelled.len()).map(|i| -(i as f64)).collect()
            } else {
                let scores = meta.floats("tokenizer.ggml.scores", tokens.len())?;
                scores.into_iter().map(f64::from).collect()
            };
            merges_from_vocab(&spelled, &ids, &rank)
        }
    };
    let mut builder = BpeBuilder::new()
        .vocab_and_merges(bpe_vocab(&ids), merges)
        .fuse_unk(true)
        .byte_fallback(true);
    if let Some(u) = unk {
        builder = builder.unk_token(spelled[u as usize].clone());
    }
    let bpe = builder
        .build()
        .map_err(|e| meta.bad("tokenizer.ggml.tokens", e.to_string()))?;
    let mut tokenizer = Tokenizer::new(bpe);
    let mut decoders: Vec<DecoderWrapper> = vec![
        Replace::new("\u{2581}", " ")
            .map_err(|e| meta.bad("tokenizer.ggml.model", e.to_string()))?
            .into(),
        ByteFallback::new().into(),
        Fuse::new().into(),
    ];
    if gemma {
        let replace = Replace::new(" ", "\u{2581}")
            .map_err(|e| meta.bad("tokenizer.ggml.model", e.to_string()))?;
        tokenizer
            .with_normalizer(Some(replace))
            .map_err(|e| meta.bad("tokenizer.ggml.model", e.to_string()))?;
        let split = Split::new(" ", SplitDelimiterBehavior::MergedWithPrevious, false)
            .map_err(|e| meta.bad("tokenizer.ggml.model", e.to_string()))?;
        tokenizer.with_pre_tokenizer(Some(split));
    } else {
        let scheme = if add_space_prefix {
            PrependScheme::First
        } else {
            PrependScheme::Never
        };
        tokenizer.with_pre_tokenizer(Some(Metaspace::new('\u{2581}', scheme, false)));
        if add_space_prefix {
            decoders.push(Strip::new(' ', 1, 0).into());
        }
    }
    tokenizer.with_decoder(Some(DecoderSequence::new(decoders)));
    Ok(Vocab { tokenizer, ids })
}

/// Every split of a token into two tokens is a merge, ranked by the merged token's `rank`
/// (higher first), then by the longer left and right pieces; ties keep vocabulary order,
/// and one token's splits are ordered by their pieces' ids (transformers' order, which a
/// BPE model with these merges reproduces SentencePiece's choices with).
fn merges_from_vocab(
    tokens: &[String],
    ids: &HashMap<String, u32>,
    rank: &[f64],
) -> Vec<(String, String)> {
    struct Merge<'a> {
        rank: f64,
        left: &'a str,
        right: &'a str,
        order: usize,
    }
    let mut merges: Vec<Merge> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (t, token) in tokens.iter().enumerate() {
        // A repeated token's splits count once, at its first place.
        if !seen.insert(token.as_str()) {
            continue;
        }
        let mut local: Vec<(u32, u32, &str, &str)> = token
            .char_indices()
            .skip(1)
            .filter_map(|(at, _)| {
                let (l, r) = token.split_at(at);
                Some((*ids.get(l)?, *ids.get(r)?, l, r))
            })
            .collect();
        local.sort_by_key(|&(l, r, _, _)| (l, r));
        for (_, _, left, right) in local {
            merges.push(Merge {
                rank: rank[t],
                left,
                right,
                order: merges.len(),
            });
        }
    }
    merges.sort_by(|a, b| {
        b.rank
            .total_cmp(&a.rank)
            .then(b.left.chars().count().cmp(&a.left.chars().count()))
            .then(b.right.chars().count().cmp(&a.right.chars().count()))
            .then(a.order.cmp(&b.order))
    });
    merges
        .into_iter()
        .map(|m| (m.left.to_string(), m.right.to_string()))
        .collect()
}

/// Control tokens (`<|im_start|>`, `<start_of_turn>`) as special tokens and user-defined
/// ones as plain added tokens, so that a text holding them encodes each as one id.
fn add_added_tokens(
    tokenizer: &mut Tokenizer,
    tokens: &[String],
    types: &[i64],
    ids: &HashMap<String, u32>,
    byte_level: bool,
    special_ids: [Option<u32>; 4],
) -> tokenizers::Result<()> {
    let alphabet = ByteLevel::alphabet();
    let mut special: Vec<AddedToken> = Vec::new();
    let mut plain: Vec<AddedToken> = Vec::new();
    for (token, kind) in tokens.iter().zip(types) {
        match *kind {
            // A byte-level control token outside the byte alphabet is a mislabel of
            // llama.cpp's converter, not a token of the model's text.
            CONTROL if !byte_level || token.chars().all(|c| alphabet.contains(&c)) => {
                special.push(AddedToken::from(token.clone(), true));
            }
            USER_DEFINED if ids.contains_key(token) => {
                plain.push(AddedToken::from(token.clone(), false).normalized(false));
            }
            _ => {}
        }
    }
    for id in special_ids.into_iter().flatten() {
        special.push(AddedToken::from(tokens[id as usize].clone(), true));
    }
    tokenizer.add_special_tokens(special)?;
    tokenizer.add_tokens(plain)?;
    Ok(())
}

/// Typed access to the metadata, with errors that name the file and the key.
struct Meta<'a> {
    map: &'a HashMap<String, Value>,
    path: &'a Path,
}

impl Meta<'_> {
    fn bad(&self, key: &str, message: String) -> EngineError {
        EngineError::BadFile {
            what: "GGUF tokenizer metadata",
            path: PathBuf::from(self.path),
            message: format!("{key}: {message}"),
        }
    }

    fn wrong_type(&self, key: &str, want: &str, got: &Value) -> EngineError {
        self.bad(
            key,
            format!("expected {want}, found {:?}", got.value_type()),
        )
    }

    fn get(&self, key: &str) -> Option<&Value> {
        self.map.get(key)
    }

    fn require(&self, key: &str) -> Result<&Value, EngineError> {
        self.get(key).ok_or_else(|| self.bad(key, "missing".into()))
    }

    fn string(&self, key: &str) -> Result<String, EngineError> {
        self.opt_string(key)?
            .ok_or_else(|| self.bad(key, "missing".into()))
    }

    fn opt_string(&self, key: &str) -> Result<Option<String>, EngineError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(v) => Err(self.wrong_type(key, "a string", v)),
        }
    }

    fn opt_bool(&self, key: &str) -> Result<Option<bool>, EngineError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(v) => Err(self.wrong_type(key, "a bool", v)),
        }
    }

    fn opt_u64(&self, key: &str) -> Result<Option<u64>, EngineError> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::U64(n)) => Ok(Some(*n)),
            Some(v) => match integer(v) {
                Some(n) if n >= 0 => Ok(Some(n as u64)),
                _ => Err(self.wrong_type(key, "a non-negative integer", v)),
            },
        }
    }

    fn opt_u32(&self, key: &str) -> Result<Option<u32>, EngineError> {
        match self.opt_u64(key)? {
            None => Ok(None),
            Some(n) => u32::try_from(n)
                .map(Some)
                .map_err(|_| self.bad(key, format!("{n} is not a token id"))),
        }
    }

    fn array(&self, key: &str) -> Result<&[Value], EngineError> {
        match self.require(key)? {
            Value::Array(items) => Ok(items),
            v => Err(self.wrong_type(key, "an array", v)),
        }
    }

    fn strings(&self, key: &str) -> Result<Vec<String>, EngineError> {
        self.array(key)?
            .iter()
            .map(|v| match v {
                Value::String(s) => Ok(s.clone()),
                v => Err(self.wrong_type(key, "an array of strings", v)),
            })
            .collect()
    }

    /// An array of integers with one entry per token.
    fn integers(&self, key: &str, len: usize) -> Result<Vec<i64>, EngineError> {
        let items = self.array(key)?;
        self.check_len(key, items.len(), len)?;
        items
            .iter()
            .map(|v| integer(v).ok_or_else(|| self.wrong_type(key, "an array of integers", v)))
            .collect()
    }

    /// An array of floats with one entry per token.
    fn floats(&self, key: &str, len: usize) -> Result<Vec<f32>, EngineError> {
        let items = self.array(key)?;
        self.check_len(key, items.len(), len)?;
        items
            .iter()
            .map(|v| match v {
                Value::F32(x) => Ok(*x),
                Value::F64(x) => Ok(*x as f32),
                v => Err(self.wrong_type(key, "an array of floats", v)),
            })
            .collect()
    }

    fn check_len(&self, key: &str, got: usize, want: usize) -> Result<(), EngineError> {
        if got == want {
            Ok(())
        } else {
            Err(self.bad(
                key,
                format!("{got} entries for the {want} tokens of tokenizer.ggml.tokens"),
            ))
        }
    }
}

/// Any integer-typed value, widened.
fn integer(v: &Value) -> Option<i64> {
    Some(match v {
        Value::U8(x) => i64::from(*x),
        Value::I8(x) => i64::from(*x),
        Value::U16(x) => i64::from(*x),
        Value::I16(x) => i64::from(*x),
        Value::U32(x) => i64::from(*x),
        Value::I32(x) => i64::from(*x),
        Value::U64(x) => i64::try_from(*x).ok()?,
        Value::I64(x) => *x,
        _ => return None,
    })
}

#[cfg(test)]
mod tests;
