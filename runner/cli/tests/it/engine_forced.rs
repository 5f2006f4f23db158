//! Teacher forcing (`Engine::teacher_forced`, `runner generate --teacher-forced`): the
//! greedy choice at each position of a given continuation, each weight format seeing
//! the same context at every position. At the sizes runs use: prompts of 1,000+
//! tokens, 128 positions, the fixtures' real tokenizer pipelines.

use crate::engine_invariance::text;
use runner_engine::candle::fixture::{write_fixture, Arch, Size};
use runner_engine::candle::load::hub::ModelFiles;
use runner_engine::candle::weights::{DTypeChoice, LoadOptions, Quantization};
use runner_engine::candle::Engine;
use runner_engine::{Backend, Prompt, Request, RequestId, Sampling};

fn load(files: &ModelFiles, quantization: Option<Quantization>) -> Engine {
    let options = LoadOptions {
        dtype: DTypeChoice::F32,
        quantization,
        ..Default::default()
    };
    Engine::load_with(files, candle_core::Device::Cpu, "fixture", options).unwrap()
}

/// The prompt's ids and the engine's greedy continuation of up to 128 tokens.
fn greedy(e: &mut Engine, words: usize, seed: u64) -> (Vec<u32>, Vec<u32>) {
    let prompt = Prompt::Raw(text(seed, words));
    let ids = e.encode(&prompt).unwrap();
    let sample = e
        .generate(&[Request {
            id: RequestId::new(format!("forced-{seed}")),
            prompt,
            seeds: vec![0],
            max_new_tokens: 128,
            sampling: Sampling::Greedy,
        }])
        .unwrap()
        .remove(0);
    (ids, sample.token_ids)
}

/// A small fixture in a scratch folder, removed when the returned guard drops.
fn fixture(arch: Arch, tag: &str) -> (Scratch, ModelFiles) {
    let dir = crate::common::scratch(tag);
    write_fixture(arch, Size::Small, &dir).unwrap();
    let files = ModelFiles::from_dir(&dir).unwrap();
    (Scratch(dir), files)
}

struct Scratch(std::path::PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn teacher_forcing_gives_back_the_engines_own_greedy_continuation() {
    for (arch, tag, quantization) in [
        (Arch::Qwen2, "own-qwen2", None),
        (Arch::Llama, "own-llama-q8_0", Some(Quantization::Q8_0)),
    ] {
        let (_dir, files) = fixture(arch, tag);
        let mut e = load(&files, quantization);
        for (words, seed) in [(1100, 3), (40, 4)] {
            let (ids, continuation) = greedy(&mut e, words, seed);
            assert!(!continuation.is_empty(), "{tag}: nothing generated");
            let at = e.teacher_forced(&ids, &continuation).unwrap();
            assert_eq!(at, continuation, "{tag}: prompt of {} tokens", ids.len());
        }
    }
}

/// q8_0 rounds the weights to int8 and, at each product, every input row too (per
/// block of 32, as llama.cpp's q8_0 product does), so near-ties of f32's logits turn.
/// On 1,000+-token prompts the greedy token matches f32's at 92.9-99.8% of forced
/// positions by fixture (phi3's random weights have the most near-ties; qwen2 97.2%,
/// llama 95.4%, gemma3 99.8%), where llama.cpp's own q8_0 agrees with its f32 at
/// 93.6-94.8% on the llama and qwen2 fixtures (docs/engine.md). The bar is 90%, below
/// every fixture's figure; q4_K's coarser weights agree at about half of the positions
/// and would fail it. (Before the integer product, which kept activations in f32, the
/// figures were 94-100% and the bar 93%.)
#[test]
fn q8_0_picks_f32s_greedy_token_at_nearly_every_forced_position_on_long_prompts() {
    for (arch, tag) in [
        (Arch::Qwen2, "qwen2"),
        (Arch::Llama, "llama"),
        (Arch::Gemma3, "gemma3"),
        (Arch::Phi3, "phi3"),
    ] {
        let (_dir, files) = fixture(arch, &format!("q8-{tag}"));
        let mut f32 = load(&files, None);
        let q8 = load(&files, Some(Quantization::Q8_0));
        let (mut same, mut total) = (0, 0);
        for seed in 10..18 {
            let (ids, continuation) = greedy(&mut f32, 1050, seed);
            assert!(ids.len() >= 1000, "{tag}: prompt of {} tokens", ids.len());
            let at = q8.teacher_forced(&ids, &continuation).unwrap();
            same += at.iter().zip(&continuation).filter(|(a, b)| a == b).count();
            total += continuation.len();
        }
        let share = same as f64 / total as f64;
        eprintln!("{tag}: q8_0 agrees with f32 at {same}/{total} forced positions");
        assert!(total >= 800, "{tag}: only {total} positions");
        assert!(share >= 0.90, "{tag}: q8_0 agrees at {same}/{total}");
    }
}
