//! Deterministic random-weight models in the Hugging Face layout, so that tests and
//! benchmarks run the real loading path without a model hub.
//!
//! A fixture is a folder with config.json, generation_config.json, model.safetensors
//! (f32), tokenizer.json (the model family's real tokenizer pipeline with a BPE vocabulary
//! trained here on a built-in corpus, see fixture_tokenizer.rs) and tokenizer_config.json
//! carrying the real model family's tokenizer class, chat template and special tokens. The same arguments always give byte-identical files.

use super::fixture_config;
use super::fixture_tokenizer::{tokenizer_config, train_tokenizer};
use super::fixture_weights::{write_bf16, Spec};
use super::registry::{GateUpNames, QkvNames};
use crate::engine::EngineError;
use candle_core::{Device, Tensor};
use serde_json::json;
use std::collections::HashMap;
use std::path::Path;

pub use super::registry::Arch;

/// `Tiny` keeps tests fast; `Small` is big enough for attention to dominate decode
/// cost at long prompts, which is what the benchmark measures. `Qwen7bShape` has the
/// layer sizes and vocabulary of Qwen2.5-7B (random bf16 weights, 15 GB) for GPU
/// throughput checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Size {
    Tiny,
    Small,
    Qwen7bShape,
}

impl std::str::FromStr for Size {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "tiny" => Ok(Size::Tiny),
            "small" => Ok(Size::Small),
            "qwen7b-shape" => Ok(Size::Qwen7bShape),
            _ => Err(format!(
                "unknown fixture size {s:?} (tiny, small, qwen7b-shape)"
            )),
        }
    }
}

struct Shape {
    hidden: usize,
    inner: usize,
    layers: usize,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
    vocab_target: usize,
    /// Gemma 3 only: tokens a local layer sees.
    window: usize,
    /// The standard deviation of a row's logits.
    logit_spread: f32,
}

fn shape(size: Size) -> Shape {
    match size {
        Size::Tiny => Shape {
            hidden: 64,
            inner: 128,
            layers: 2,
            heads: 4,
            kv_heads: 2,
            head_dim: 16,
            vocab_target: 512,
            window: 16,
            logit_spread: SMALL_VOCAB_SPREAD,
        },
        Size::Small => Shape {
            hidden: 256,
            inner: 704,
            layers: 4,
            heads: 8,
            kv_heads: 2,
            head_dim: 32,
            vocab_target: 2048,
            window: 512,
            logit_spread: SMALL_VOCAB_SPREAD,
        },
        Size::Qwen7bShape => Shape {
            hidden: 3584,
            inner: 18944,
            layers: 28,
            heads: 28,
            kv_heads: 4,
            head_dim: 128,
            vocab_target: 8192,
            window: 4096,
            logit_spread: FULL_VOCAB_SPREAD,
        },
    }
}

/// Logits with a spread of about 0.3: over a vocabulary of a few hundred tokens, at the
/// protocol's temperature (0.2) a few dozen tokens share the nucleus and seeds lead
/// apart. (The transformers references of the tests were made with these weights.)
const SMALL_VOCAB_SPREAD: f32 = 0.3;

/// Over 152k tokens a spread of 0.3 is flat at temperature 0.2: the nucleus would hold
/// tens of thousands of tokens, and top-p sampling would sort all of them (milliseconds
/// per row on the host), where a trained model's nucleus holds a few. With a spread of
/// 5 the top token stands about one logit above the next (a weight ratio near e^-5 at
/// 0.2), and a few dozen tokens lie within 5 logits of it, so the GPU check times token
/// choice at about what a trained model costs.
const FULL_VOCAB_SPREAD: f32 = 5.0;

/// Qwen2.5-7B's embedding rows: more than its tokenizer has, as in the real model.
const QWEN7B_ROWS: usize = 152_064;

const WORDS: &[&str] = &[
    "the",
    "model",
    "reads",
    "a",
    "belief",
    "about",
    "evidence",
    "and",
    "updates",
    "its",
    "estimate",
    "when",
    "new",
    "observations",
    "arrive",
    "probability",
    "of",
    "rain",
    "is",
    "high",
    "low",
    "scenario",
    "agent",
    "answer",
    "question",
    "because",
    "therefore",
    "but",
    "not",
    "likely",
    "unlikely",
    "report",
    "says",
    "witness",
    "saw",
    "red",
    "blue",
    "car",
    "door",
    "key",
    "house",
    "river",
    "north",
    "south",
    "before",
    "after",
    "three",
    "seven",
    "percent",
    "odds",
    "ratio",
    "prior",
    "posterior",
    "signal",
    "noise",
    "test",
    "positive",
    "negative",
    "result",
    "coin",
    "fair",
    "biased",
    "heads",
    "tails",
    "we",
    "you",
    "they",
    "should",
    "would",
    "could",
    "must",
    "every",
    "some",
    "none",
    "final",
    "label",
    "action",
    "wait",
    "act",
    "stop",
    "JSON",
    "{",
    "}",
    ":",
    ",",
    ".",
    "\"",
    "0.25",
    "0.5",
    "0.75",
    "1",
];

/// A deterministic corpus of word salad with punctuation and numbers.
fn corpus() -> Vec<String> {
    let mut rng = Rng(0x5eed);
    (0..3000)
        .map(|_| {
            let n = 4 + (rng.next() % 12) as usize;
            let words: Vec<&str> = (0..n)
                .map(|_| WORDS[(rng.next() % WORDS.len() as u64) as usize])
                .collect();
            words.join(" ")
        })
        .collect()
}

/// SplitMix64: a tiny, stable generator; the fixture must not change when a random
/// number crate changes its algorithm.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn uniform(&mut self) -> f64 {
        ((self.next() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    /// Standard normal by Box-Muller.
    fn normal(&mut self) -> f32 {
        let (u, v) = (self.uniform(), self.uniform());
        ((-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()) as f32
    }
}

struct Weights {
    rng: Rng,
    tensors: HashMap<String, Tensor>,
    /// Full-size shapes: tensors are only described here and drawn while writing.
    streamed: Option<Vec<Spec>>,
}

impl Weights {
    fn normal(
        &mut self,
        name: &str,
        shape: &[usize],
        mean: f32,
        std: f32,
    ) -> Result<(), EngineError> {
        if let Some(specs) = &mut self.streamed {
            let (name, shape) = (name.to_string(), shape.to_vec());
            specs.push(Spec {
                name,
                shape,
                mean,
                std,
            });
            return Ok(());
        }
        let n: usize = shape.iter().product();
        let data: Vec<f32> = (0..n).map(|_| mean + std * self.rng.normal()).collect();
        let t = Tensor::from_vec(data, shape, &Device::Cpu)?;
        self.tensors.insert(name.to_string(), t);
        Ok(())
    }

    /// A projection with Kaiming-like scale, so activations neither vanish nor explode
    /// through the layers and logits are not all ties.
    fn linear(&mut self, name: &str, out: usize, inp: usize) -> Result<(), EngineError> {
        self.normal(
            &format!("{name}.weight"),
            &[out, inp],
            0.0,
            1.0 / (inp as f32).sqrt(),
        )
    }
}

/// Writes the fixture model into `out` (created if missing).
pub fn write_fixture(arch: Arch, size: Size, out: &Path) -> Result<(), EngineError> {
    write_fixture_with(arch, size, out, None)
}

/// A fixture whose tokenizer is trained on `corpus` to `vocab` tokens instead of the
/// built-in word list: trained on the suite's own prompts, a small model sees prompts
/// of the length a real tokenizer gives them (a few thousand tokens, not ten thousand
/// byte-level pieces), which keeps a CPU smoke run of the real plan short.
pub fn write_fixture_with(
    arch: Arch,
    size: Size,
    out: &Path,
    tokenizer_corpus: Option<(Vec<String>, usize)>,
) -> Result<(), EngineError> {
    write_shape(arch, size, shape(size), out, tokenizer_corpus)
}

/// [`write_fixture_with`] for `size` with the layer sizes of `s`.
fn write_shape(
    arch: Arch,
    size: Size,
    mut s: Shape,
    out: &Path,
    tokenizer_corpus: Option<(Vec<String>, usize)>,
) -> Result<(), EngineError> {
    let corpus = match tokenizer_corpus {
        Some((texts, vocab)) => {
            s.vocab_target = vocab;
            texts
        }
        None => corpus(),
    };
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| EngineError::Io { path, source }
    };
    std::fs::create_dir_all(out).map_err(io(out))?;

    let tokenizer = train_tokenizer(arch, s.vocab_target, corpus)?;
    let full_size = size == Size::Qwen7bShape;
    let vocab = match full_size {
        true => QWEN7B_ROWS.max(tokenizer.get_vocab_size(true)),
        false => tokenizer.get_vocab_size(true),
    };
    let id = |t: &str| tokenizer.token_to_id(t).expect("special token was added");
    let facts = &arch.row().fixture;
    let (bos, eos) = (facts.bos, facts.eos);
    let eos_ids: Vec<u32> = eos.iter().map(|t| id(t)).collect();
    let tok_path = out.join("tokenizer.json");
    tokenizer
        .save(&tok_path, false)
        .map_err(|e| EngineError::Tokenizer(e.to_string()))?;

    let tied = facts.tied[match size {
        Size::Tiny => 0,
        Size::Small | Size::Qwen7bShape => 1,
    }];
    let mut w = Weights {
        rng: Rng(facts.seed),
        tensors: HashMap::new(),
        streamed: full_size.then(Vec::new),
    };
    let (h, d) = (s.hidden, s.head_dim);
    // Gemma stores norm weights as offsets from 1; the others store the scale itself.
    let norm_mean = if facts.gemma_norms { 0.0 } else { 1.0 };
    // The final norm gives hidden states of about unit scale, so an output row of this
    // scale gives logits of the shape's spread. A tied embedding keeps the small scale:
    // it is also the input, whose scale the layers were set for.
    let out_std = SMALL_VOCAB_SPREAD / (h as f32).sqrt();
    let head_std = s.logit_spread / (h as f32).sqrt();
    w.normal("model.embed_tokens.weight", &[vocab, h], 0.0, out_std)?;
    for l in 0..s.layers {
        let p = format!("model.layers.{l}");
        w.normal(&format!("{p}.input_layernorm.weight"), &[h], norm_mean, 0.1)?;
        w.normal(
            &format!("{p}.post_attention_layernorm.weight"),
            &[h],
            norm_mean,
            0.1,
        )?;
        // (name, rows) of the attention input projections, in the checkpoint's layout.
        let (q, kv) = (s.heads * d, s.kv_heads * d);
        let qkv: Vec<(&str, usize)> = match &arch.row().tensors.qkv {
            QkvNames::Separate(names) => names.iter().copied().zip([q, kv, kv]).collect(),
            QkvNames::Fused(n) => vec![(n, q + 2 * kv)],
        };
        for &(n, out) in &qkv {
            w.linear(&format!("{p}.self_attn.{n}"), out, h)?;
        }
        w.linear(&format!("{p}.self_attn.o_proj"), h, s.heads * d)?;
        match arch.row().tensors.gate_up {
            GateUpNames::Separate(names) => {
                for n in names {
                    w.linear(&format!("{p}.mlp.{n}"), s.inner, h)?;
                }
            }
            GateUpNames::Fused(n) => w.linear(&format!("{p}.mlp.{n}"), 2 * s.inner, h)?,
        }
        w.linear(&format!("{p}.mlp.down_proj"), h, s.inner)?;
        // After all weights, so that adding biases changed no other weight's values.
        if facts.qkv_bias {
            for &(n, out) in &qkv {
                w.normal(&format!("{p}.self_attn.{n}.bias"), &[out], 0.0, 0.1)?;
            }
        }
        if facts.gemma_norms {
            w.normal(
                &format!("{p}.pre_feedforward_layernorm.weight"),
                &[h],
                0.0,
                0.1,
            )?;
            w.normal(
                &format!("{p}.post_feedforward_layernorm.weight"),
                &[h],
                0.0,
                0.1,
            )?;
            w.normal(&format!("{p}.self_attn.q_norm.weight"), &[d], 0.0, 0.1)?;
            w.normal(&format!("{p}.self_attn.k_norm.weight"), &[d], 0.0, 0.1)?;
        }
    }
    w.normal("model.norm.weight", &[h], norm_mean, 0.1)?;
    if !tied {
        w.normal("lm_head.weight", &[vocab, h], 0.0, head_std)?;
    }
    let weights_path = out.join("model.safetensors");
    match &w.streamed {
        Some(specs) => write_bf16(specs, w.rng.next(), &weights_path)?,
        None => candle_core::safetensors::save(&w.tensors, &weights_path)?,
    }

    let bos_id = bos.map(id);
    let dims = fixture_config::Dims {
        hidden: h,
        inner: s.inner,
        layers: s.layers,
        heads: s.heads,
        kv_heads: s.kv_heads,
        head_dim: d,
        window: s.window,
        vocab,
        tied,
    };
    let config = (facts.config)(&dims, &id);
    let generation = json!({
        "bos_token_id": bos_id,
        "eos_token_id": eos_ids,
        "do_sample": true,
        "temperature": 0.7,
        "top_p": 0.8,
        "top_k": 20,
    });
    let tokenizer_config = tokenizer_config(arch, &tokenizer, facts.template);
    for (name, value) in [
        ("config.json", config),
        ("generation_config.json", generation),
        ("tokenizer_config.json", tokenizer_config),
    ] {
        let path = out.join(name);
        let text = serde_json::to_string_pretty(&value).expect("json values serialise");
        std::fs::write(&path, text + "\n").map_err(io(&path))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::candle::loader::ModelFiles;
    use crate::engine::candle::Engine;

    /// The standard deviation of the logits of a few prompts' last tokens.
    fn spread(dir: &Path) -> f32 {
        let engine = Engine::load(&ModelFiles::from_dir(dir).unwrap(), Device::Cpu, "f").unwrap();
        let prompts: Vec<Vec<u32>> = ["the model reads a", "evidence of rain is 0.84"]
            .iter()
            .map(|t| {
                engine
                    .encode(&crate::engine::Prompt::Raw(t.to_string()))
                    .unwrap()
            })
            .collect();
        let logits: Vec<f32> = engine.prompt_logits(&prompts).unwrap().concat();
        let mean = logits.iter().sum::<f32>() / logits.len() as f32;
        let var = logits.iter().map(|l| (l - mean).powi(2)).sum::<f32>() / logits.len() as f32;
        var.sqrt()
    }

    #[test]
    fn logits_have_the_spread_their_shape_asks_for() {
        // The full-size fixture's spread, on the small shape: the output scale gives it
        // through the real layers and final norm, whatever the hidden size.
        for (tag, logit_spread) in [("small", SMALL_VOCAB_SPREAD), ("full", FULL_VOCAB_SPREAD)] {
            let dir =
                std::env::temp_dir().join(format!("fixture-spread-{tag}-{}", std::process::id()));
            let s = Shape {
                logit_spread,
                ..shape(Size::Small)
            };
            write_shape(Arch::Qwen2, Size::Small, s, &dir, None).unwrap();
            let got = spread(&dir);
            assert!(
                got > logit_spread * 0.6 && got < logit_spread * 1.6,
                "{tag}: logits spread {got} for {logit_spread}"
            );
            std::fs::remove_dir_all(&dir).unwrap();
        }
    }
}
