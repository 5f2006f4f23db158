//! Batch independence on a fixture model in f32: the same requests decoded at batch
//! sizes 1, 3 and 8 (left padding, forks, rows leaving the batch, prefill groups joined)
//! give identical tokens.

use runner_engine::candle::fixture::{write_fixture, Arch, Size};
use runner_engine::candle::load::hub::ModelFiles;
use runner_engine::candle::{BatchLimits, Engine};
use runner_engine::{Backend, Message, Prompt, Request, RequestId, Role, Sample, Sampling};
use std::path::{Path, PathBuf};

fn fixture(arch: Arch, tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("engine-batching-{tag}-{}", std::process::id()));
    write_fixture(arch, Size::Tiny, &dir).unwrap();
    dir
}

fn engine(dir: &Path, limits: BatchLimits) -> Engine {
    let files = ModelFiles::from_dir(dir).unwrap();
    Engine::load(&files, crate::test_device(), "fixture")
        .unwrap()
        .with_limits(limits)
}

const QUESTIONS: [&str; 8] = [
    "the witness saw a red car",
    "odds",
    "the probability of rain is high because the report says so and the river is north",
    "coin heads tails",
    "prior posterior",
    "should the agent wait or act after three positive test results",
    "key",
    "the model reads a belief about evidence",
];

fn requests(sampling: Sampling, seeds: &[u64]) -> Vec<Request> {
    QUESTIONS
        .iter()
        .enumerate()
        .map(|(i, q)| Request {
            id: RequestId::new(format!("req-{i}")),
            prompt: Prompt::Chat(vec![
                Message {
                    role: Role::System,
                    content: "answer in JSON".into(),
                },
                Message {
                    role: Role::User,
                    content: (*q).into(),
                },
            ]),
            seeds: seeds.to_vec(),
            // Different lengths make rows leave the batch at different steps.
            max_new_tokens: 6 + 3 * (i % 4),
            sampling,
        })
        .collect()
}

fn tokens(samples: &[Sample]) -> Vec<(String, u64, Vec<u32>)> {
    samples
        .iter()
        .map(|s| (s.request_id.to_string(), s.seed, s.token_ids.clone()))
        .collect()
}

#[test]
fn tokens_do_not_depend_on_batch_size_padding_or_forks() {
    for (arch, tag) in [
        (Arch::Qwen2, "qwen2"),
        (Arch::Llama, "llama"),
        (Arch::Gemma3, "gemma3"),
    ] {
        let dir = fixture(arch, tag);
        for sampling in [Sampling::PROTOCOL, Sampling::Greedy] {
            let reqs = requests(sampling, &[11, 12, 13]);
            let mut reference = None;
            for (rows, prefill_tokens) in [(1, 4096), (3, 64), (8, 4096), (24, 100)] {
                let mut e = engine(
                    &dir,
                    BatchLimits {
                        max_rows: rows,
                        prefill_tokens,
                        kv_budget_bytes: usize::MAX,
                    },
                );
                let out = e.generate(&reqs).unwrap();
                assert_eq!(out.len(), 24);
                let got = tokens(&out);
                match &reference {
                    None => reference = Some(got),
                    Some(r) => assert_eq!(
                        &got, r,
                        "{tag}: rows {rows}, prefill budget {prefill_tokens}"
                    ),
                }
            }
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}

#[test]
fn seeds_fork_one_prefill_into_distinct_samples_that_match_single_seed_runs() {
    let dir = fixture(Arch::Qwen2, "fork");
    let mut e = engine(&dir, BatchLimits::default());
    let forked = e
        .generate(&requests(Sampling::PROTOCOL, &[1, 2, 3]))
        .unwrap();
    for seed in [1u64, 2, 3] {
        let single = e.generate(&requests(Sampling::PROTOCOL, &[seed])).unwrap();
        for s in &single {
            let f = forked
                .iter()
                .find(|f| f.request_id == s.request_id && f.seed == seed)
                .unwrap();
            assert_eq!(f.token_ids, s.token_ids);
            assert_eq!(f.text, s.text);
        }
    }
    // Different seeds of one prompt do diverge somewhere across the set.
    let differ = QUESTIONS.iter().enumerate().any(|(i, _)| {
        let id = format!("req-{i}");
        let a = forked
            .iter()
            .find(|s| s.request_id.as_str() == id && s.seed == 1)
            .unwrap();
        let b = forked
            .iter()
            .find(|s| s.request_id.as_str() == id && s.seed == 2)
            .unwrap();
        a.token_ids != b.token_ids
    });
    assert!(differ);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn padded_prefill_logits_match_unpadded_ones() {
    let dir = fixture(Arch::Qwen2, "logits");
    let e = engine(&dir, BatchLimits::default());
    let prompts: Vec<Vec<u32>> = QUESTIONS
        .iter()
        .map(|q| e.encode(&Prompt::Raw((*q).into())).unwrap())
        .collect();
    let together = e.prompt_logits(&prompts).unwrap();
    for (p, t) in prompts.iter().zip(&together) {
        let alone = &e.prompt_logits(std::slice::from_ref(p)).unwrap()[0];
        assert!(t.iter().all(|x| x.is_finite()));
        let diff = alone
            .iter()
            .zip(t)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(diff < 1e-4, "max logit difference {diff}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

fn unlimited(rows: usize) -> BatchLimits {
    BatchLimits {
        max_rows: rows,
        prefill_tokens: 4096,
        kv_budget_bytes: usize::MAX,
    }
}

#[test]
fn an_out_of_memory_shrinks_the_batch_and_retries_without_losing_or_repeating_a_sample() {
    let dir = fixture(Arch::Qwen2, "oom");
    let mut reqs = requests(Sampling::PROTOCOL, &[5, 6, 7]);
    // Rows that finish after one token are handed over before the failure, so the
    // retry decodes them again and must not hand them over twice.
    for r in reqs.iter_mut().step_by(2) {
        r.max_new_tokens = 1;
    }
    let reference = tokens(&engine(&dir, unlimited(24)).generate(&reqs).unwrap());
    let mut failing = engine(&dir, unlimited(24)).simulate_out_of_memory_above(6);
    let mut seen = Vec::new();
    failing
        .generate_each(&reqs, &mut |s| seen.push(s))
        .expect("the out-of-memory error is absorbed by smaller batches");
    assert_eq!(seen.len(), 24, "every sample once");
    let mut got = tokens(&seen);
    got.sort();
    let mut want = reference.clone();
    want.sort();
    assert_eq!(got, want, "identical samples after the retry");
    assert!(failing.limits().max_rows <= 6, "the batch shrank");

    // One request alone that still does not fit is an error, not a loop.
    let mut single = engine(&dir, unlimited(24)).simulate_out_of_memory_above(2);
    let err = single.generate(&reqs[1..2]).unwrap_err().to_string();
    assert!(err.contains("out of memory"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_kv_budget_bounds_the_rows_decoded_together() {
    let dir = fixture(Arch::Qwen2, "budget");
    let reqs = requests(Sampling::PROTOCOL, &[5, 6, 7]);
    let e = engine(&dir, unlimited(24));
    let longest = reqs
        .iter()
        .map(|r| e.encode(&r.prompt).unwrap().len())
        .max()
        .unwrap();
    let per_row = (longest + 15) * e.kv_bytes_per_token();
    assert!(e.kv_bytes_per_token() > 0);
    // Room for the KV cache of 3 rows: groups of one request (3 seeds) each. A group
    // of more than 3 rows would hit the simulated out-of-memory and shrink max_rows.
    let mut e = e
        .with_limits(BatchLimits {
            kv_budget_bytes: 3 * per_row,
            ..unlimited(24)
        })
        .simulate_out_of_memory_above(3);
    let out = e.generate(&reqs).unwrap();
    assert_eq!(out.len(), 24);
    assert_eq!(e.limits().max_rows, 24, "no group exceeded the budget");
    std::fs::remove_dir_all(&dir).unwrap();
}
