//! The engine's model files against candle-transformers' stock models at batch size 1,
//! where those are right (one sequence, no padding): same fixture weights, same prompt,
//! the logits after prefill and after each greedy decode step must agree.

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use runner_engine::candle::fixture::{write_fixture, Arch, Size};
use runner_engine::candle::load::hub::ModelFiles;
use runner_engine::candle::Engine;
use runner_engine::{Backend, Prompt, Request, RequestId, Sampling};
use std::path::PathBuf;

fn fixture(arch: Arch, tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("engine-reference-{tag}-{}", std::process::id()));
    write_fixture(arch, Size::Tiny, &dir).unwrap();
    dir
}

const PROMPT: &str = "the witness saw a red car before the rain, so the odds ratio is";

fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// Greedy tokens and per-step logits from a stock model driven one token at a time.
fn stock_greedy(
    prompt: &[u32],
    steps: usize,
    mut forward: impl FnMut(&Tensor, usize) -> Vec<f32>,
) -> (Vec<Vec<f32>>, Vec<u32>) {
    let mut logits = vec![forward(
        &Tensor::new(prompt, &Device::Cpu)
            .unwrap()
            .unsqueeze(0)
            .unwrap(),
        0,
    )];
    let mut tokens = Vec::new();
    for pos in prompt.len()..prompt.len() + steps {
        let last = logits.last().unwrap();
        let next = (0..last.len())
            .max_by(|&a, &b| last[a].total_cmp(&last[b]).then(b.cmp(&a)))
            .unwrap() as u32;
        tokens.push(next);
        logits.push(forward(
            &Tensor::new(&[next], &Device::Cpu)
                .unwrap()
                .unsqueeze(0)
                .unwrap(),
            pos,
        ));
    }
    (logits, tokens)
}

fn check(
    arch: Arch,
    tag: &str,
    mut stock: impl FnMut(&PathBuf) -> Box<dyn FnMut(&Tensor, usize) -> Vec<f32>>,
) {
    let dir = fixture(arch, tag);
    let files = ModelFiles::from_dir(&dir).unwrap();
    let mut engine = Engine::load(&files, Device::Cpu, "fixture").unwrap();
    let prompt = engine.encode(&Prompt::Raw(PROMPT.into())).unwrap();
    let ours = engine.prompt_logits(std::slice::from_ref(&prompt)).unwrap();
    let (theirs, their_tokens) = stock_greedy(&prompt, 8, stock(&dir));
    let d = max_diff(&ours[0], &theirs[0]);
    assert!(d < 1e-4, "{tag}: prefill logits differ by {d}");
    let sample = engine
        .generate(&[Request {
            id: RequestId::new("ref"),
            prompt: Prompt::Raw(PROMPT.into()),
            seeds: vec![0],
            max_new_tokens: 8,
            sampling: Sampling::Greedy,
        }])
        .unwrap();
    let ours: Vec<u32> = sample[0].token_ids.clone();
    assert!(!ours.is_empty(), "{tag}: no tokens to compare");
    // A stop token ends our sample early; the stock loop does not know about stops.
    assert_eq!(ours[..], their_tokens[..ours.len()], "{tag}: greedy tokens");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn qwen2_matches_the_stock_model_at_batch_one() {
    use candle_transformers::models::qwen2;
    check(Arch::Qwen2, "qwen2", |dir| {
        let raw: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("config.json")).unwrap())
                .unwrap();
        let n = |k: &str| raw[k].as_u64().unwrap() as usize;
        let cfg = qwen2::Config {
            vocab_size: n("vocab_size"),
            hidden_size: n("hidden_size"),
            intermediate_size: n("intermediate_size"),
            num_hidden_layers: n("num_hidden_layers"),
            num_attention_heads: n("num_attention_heads"),
            num_key_value_heads: n("num_key_value_heads"),
            max_position_embeddings: n("max_position_embeddings"),
            sliding_window: 4096,
            max_window_layers: n("num_hidden_layers"),
            tie_word_embeddings: raw["tie_word_embeddings"].as_bool().unwrap(),
            rope_theta: raw["rope_theta"].as_f64().unwrap(),
            rms_norm_eps: raw["rms_norm_eps"].as_f64().unwrap(),
            use_sliding_window: false,
            hidden_act: candle_nn::Activation::Silu,
        };
        let vb = unsafe {
            VarBuilder::from_mmaped_safetensors(
                &[dir.join("model.safetensors")],
                DType::F32,
                &Device::Cpu,
            )
            .unwrap()
        };
        let mut m = qwen2::ModelForCausalLM::new(&cfg, vb).unwrap();
        Box::new(move |x, pos| {
            m.forward(x, pos)
                .unwrap()
                .flatten_all()
                .unwrap()
                .to_vec1()
                .unwrap()
        })
    });
}

#[test]
fn llama_matches_the_stock_model_at_batch_one() {
    use candle_transformers::models::llama;
    check(Arch::Llama, "llama", |dir| {
        let cfg: llama::LlamaConfig =
            serde_json::from_str(&std::fs::read_to_string(dir.join("config.json")).unwrap())
                .unwrap();
        let cfg = cfg.into_config(false);
        let vb = unsafe {
            VarBuilder::from_mmaped_safetensors(
                &[dir.join("model.safetensors")],
                DType::F32,
                &Device::Cpu,
            )
            .unwrap()
        };
        let m = llama::Llama::load(vb, &cfg).unwrap();
        let mut cache = llama::Cache::new(true, DType::F32, &cfg, &Device::Cpu).unwrap();
        Box::new(move |x, pos| {
            m.forward(x, pos, &mut cache)
                .unwrap()
                .flatten_all()
                .unwrap()
                .to_vec1()
                .unwrap()
        })
    });
}
