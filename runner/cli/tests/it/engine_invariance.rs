//! Batch invariance at realistic sizes on the CPU: fixtures of hidden size 256, prompts
//! of 1,000+ tokens (and shorter ones), 128 new tokens with early stops. Each row's
//! tokens and the bits of its logits at every step must not depend on the rows beside
//! it: continuous batching at row limits of 1, 2, 3, 7 and 32, prompts prefilled whole
//! or in chunks (joining the batch while other rows decode), the requests in another
//! order, and a resume that decodes half of the requests in one call and the rest in
//! another. For every weight format: f32, bf16 and q8_0 through the packed products,
//! q4_K through candle's quantized ones; and with an f16 key/value cache.

use runner_engine::candle::fixture::{write_fixture, Arch, Size};
use runner_engine::candle::load::hub::ModelFiles;
use runner_engine::candle::weights::{DTypeChoice, KvCacheFormat, LoadOptions, Quantization};
use runner_engine::candle::{BatchLimits, Engine, Refill};
use runner_engine::{Backend, FinishReason, Prompt, Request, RequestId, Sample, Sampling};
use std::collections::HashMap;
use std::path::Path;

const WORDS: [&str; 24] = [
    "the",
    "witness",
    "saw",
    "a",
    "red",
    "car",
    "near",
    "river",
    "probability",
    "of",
    "rain",
    "is",
    "0.84",
    "because",
    "report",
    "says",
    "so",
    "evidence",
    "belief",
    "prior",
    "posterior",
    "should",
    "agent",
    "wait",
];

/// A prompt of `words` words drawn from a fixed list by a small generator.
pub(crate) fn text(seed: u64, words: usize) -> String {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..words)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            WORDS[(x % WORDS.len() as u64) as usize]
        })
        .collect::<Vec<_>>()
        .join(" ")
}

const SAMPLING: Sampling = Sampling::TopP {
    temperature: 1.0,
    top_p: 0.95,
};

/// Two prompts of 1,000+ tokens and three shorter ones; 32 rows in all (seeds count).
fn requests(e: &Engine) -> Vec<Request> {
    // Seeds sit mostly on the short prompts: the long ones set the prompt size, and
    // their prefill and attention are the cost of each configuration.
    let plan: [(usize, &[u64]); 5] = [
        (1150, &[1]),
        (1100, &[1, 2]),
        (300, &[1]),
        (200, &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14]),
        (80, &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14]),
    ];
    let reqs: Vec<Request> = plan
        .iter()
        .enumerate()
        .map(|(i, (words, seeds))| Request {
            id: RequestId::new(format!("req-{i}")),
            prompt: Prompt::Raw(text(i as u64 + 1, *words)),
            seeds: seeds.to_vec(),
            max_new_tokens: 128,
            sampling: if i == 2 { Sampling::Greedy } else { SAMPLING },
        })
        .collect();
    let lens: Vec<usize> = reqs
        .iter()
        .map(|r| e.encode(&r.prompt).unwrap().len())
        .collect();
    assert!(lens[0] >= 1000 && lens[1] >= 1000, "prompt tokens {lens:?}");
    reqs
}

fn engine(
    (dir, load): (&Path, LoadOptions),
    max_rows: usize,
    prefill_tokens: usize,
    eos: &[u32],
) -> Engine {
    let files = ModelFiles::from_dir(dir).unwrap();
    Engine::load_with(&files, candle_core::Device::Cpu, "fixture", load)
        .unwrap()
        .with_limits(BatchLimits {
            max_rows,
            prefill_tokens,
            kv_budget_bytes: usize::MAX,
        })
        .declare_eos(eos)
        .trace_logits()
}

type Outcome = HashMap<(String, u64), (Vec<u32>, FinishReason, Vec<u64>)>;

fn outcome(e: &Engine, samples: &[Sample]) -> Outcome {
    let digests = e.logit_digests();
    samples
        .iter()
        .map(|s| {
            let key = (s.request_id.to_string(), s.seed);
            let d = digests[&key].clone();
            (key, (s.token_ids.clone(), s.finish_reason, d))
        })
        .collect()
}

/// A token that a free run produces often, declared as an end token so that rows stop
/// early at different steps.
fn frequent_token(model: (&Path, LoadOptions)) -> u32 {
    let mut e = engine(model, 32, 4096, &[]);
    let probe = Request {
        id: RequestId::new("probe"),
        prompt: Prompt::Raw(text(99, 60)),
        seeds: vec![1, 2, 3, 4],
        max_new_tokens: 48,
        sampling: SAMPLING,
    };
    let mut counts: HashMap<u32, usize> = HashMap::new();
    for s in e.generate(&[probe]).unwrap() {
        for t in s.token_ids {
            *counts.entry(t).or_default() += 1;
        }
    }
    let mut by_count: Vec<(usize, u32)> = counts.into_iter().map(|(t, c)| (c, t)).collect();
    by_count.sort_unstable_by(|a, b| b.cmp(a));
    // Not the most frequent: a model that repeats one token would stop at once.
    by_count[by_count.len().min(3) - 1].1
}

fn check(arch: Arch, size: Size, tag: &str) {
    check_format(arch, size, tag, LoadOptions::default())
}

fn check_format(arch: Arch, size: Size, tag: &str, load: LoadOptions) {
    let dir = std::env::temp_dir().join(format!("engine-invariance-{tag}-{}", std::process::id()));
    write_fixture(arch, size, &dir).unwrap();
    let model = (dir.as_path(), load);
    let eos = [frequent_token(model)];
    let mut e = engine(model, 32, 8192, &eos);
    let reqs = requests(&e);
    let samples = e.generate(&reqs).unwrap();
    let reference = outcome(&e, &samples);
    assert_eq!(reference.len(), 32);
    let stops = reference
        .values()
        .filter(|o| o.1 == FinishReason::Stop)
        .count();
    let full = reference.values().filter(|o| o.0.len() == 128).count();
    assert!(
        stops > 0 && full > 0,
        "{tag}: {stops} early stops, {full} rows at 128 tokens"
    );
    // Continuous batching at row limits of 1 to 32, the long prompts prefilled whole or
    // in chunks of 256, 640 or 1,024 tokens while other rows decode, in both orders;
    // finished rows' places taken in place by newcomers (which leaves stale values in a
    // newcomer's padding) or dropped from the cache at once.
    let mut refills = 0;
    for (max_rows, prefill_tokens, reversed, refill) in [
        (1, 4096, false, Refill::Compact),
        (2, 256, true, Refill::Compact),
        (3, 640, false, Refill::InPlace),
        (7, 1024, true, Refill::InPlace),
    ] {
        let mut order = reqs.clone();
        if reversed {
            order.reverse();
        }
        let mut e = engine(model, max_rows, prefill_tokens, &eos).with_refill(refill);
        let samples = e.generate(&order).unwrap();
        refills += e.batch_stats().unwrap().refills;
        let got = outcome(&e, &samples);
        for (key, want) in &reference {
            let have = &got[key];
            assert_eq!(have.0, want.0, "{tag}: tokens of {key:?}, {max_rows} rows");
            assert_eq!(have.1, want.1, "{tag}: finish of {key:?}, {max_rows} rows");
            assert_eq!(
                have.2, want.2,
                "{tag}: logit bits of {key:?}, {max_rows} rows"
            );
        }
    }
    assert!(
        refills > 0,
        "{tag}: no newcomer took a finished row's place"
    );
    // A resume: the first half of the requests, then the rest in a new call.
    let mut e = engine(model, 32, 8192, &eos);
    let mut samples = e.generate(&reqs[..2]).unwrap();
    samples.extend(e.generate(&reqs[2..]).unwrap());
    assert_eq!(outcome(&e, &samples), reference, "{tag}: resumed");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn qwen2_rows_are_bit_identical_across_groupings_orders_and_resumes() {
    check(Arch::Qwen2, Size::Small, "qwen2");
}

#[test]
fn llama_rows_are_bit_identical_across_groupings_orders_and_resumes() {
    check(Arch::Llama, Size::Small, "llama");
}

#[test]
fn gemma3_rows_are_bit_identical_across_groupings_orders_and_resumes() {
    check(Arch::Gemma3, Size::Small, "gemma3");
}

/// The tiny fixture's layers are narrow (32 to 128 outputs, one or two panels, partial
/// panel groups).
#[test]
fn tiny_llama_rows_are_bit_identical_across_groupings_orders_and_resumes() {
    check(Arch::Llama, Size::Tiny, "tiny-llama");
}

#[test]
fn qwen2_bf16_rows_are_bit_identical_across_groupings_orders_and_resumes() {
    let bf16 = LoadOptions {
        dtype: DTypeChoice::Bf16,
        quantization: None,
        ..Default::default()
    };
    check_format(Arch::Qwen2, Size::Small, "qwen2-bf16", bf16);
}

#[test]
fn llama_q8_0_rows_are_bit_identical_across_groupings_orders_and_resumes() {
    let q8 = LoadOptions {
        dtype: DTypeChoice::Auto,
        quantization: Some(Quantization::Q8_0),
        ..Default::default()
    };
    check_format(Arch::Llama, Size::Small, "llama-q8_0", q8);
}

#[test]
fn gemma3_q4k_rows_are_bit_identical_across_groupings_orders_and_resumes() {
    let q4k = LoadOptions {
        dtype: DTypeChoice::Auto,
        quantization: Some(Quantization::Q4K),
        ..Default::default()
    };
    check_format(Arch::Gemma3, Size::Small, "gemma3-q4k", q4k);
}

#[test]
fn gemma3_f16_cache_rows_are_bit_identical_across_groupings_orders_and_resumes() {
    let f16 = LoadOptions {
        kv_cache: KvCacheFormat::F16,
        ..Default::default()
    };
    check_format(Arch::Gemma3, Size::Small, "gemma3-f16-cache", f16);
}

#[test]
fn an_f16_cache_is_in_the_runs_identity_and_the_engines_description() {
    use runner_engine::candle::load::open::{open, LocalOptions};
    use runner_engine::candle::DeviceChoice;
    let dir = std::env::temp_dir().join(format!("engine-kv-identity-{}", std::process::id()));
    write_fixture(Arch::Llama, Size::Tiny, &dir).unwrap();
    let panel =
        runner_engine::panel::Panel::load(&crate::common::repo_root().join("models.toml")).unwrap();
    let loaded = |kv_cache| {
        let opts = LocalOptions {
            device: DeviceChoice::Cpu,
            load: LoadOptions {
                kv_cache,
                ..Default::default()
            },
            max_batch: None,
            panel: &panel,
            chat_template: None,
        };
        open(dir.to_str().unwrap(), &[], 4, &opts)
            .unwrap()
            .expect("a model folder")
    };
    let f32 = loaded(KvCacheFormat::Auto);
    assert!(f32.identity.get("kv_cache").is_none(), "{}", f32.identity);
    let f16 = loaded(KvCacheFormat::F16);
    assert_eq!(f16.identity["kv_cache"], "f16");
    let backend = f16.context["backend"].as_str().unwrap().to_string();
    assert!(backend.contains("f16 key/value cache"), "{backend}");
    std::fs::remove_dir_all(&dir).unwrap();
}
