//! Continuous batching on fixtures: finished rows are refilled at once (the
//! batch stays full while work waits), samples are handed over as they finish, and the
//! samples equal those of static groups and of a one-row-at-a-time run.

use runner_engine::candle::bench::mixed::mixed_workload;
use runner_engine::candle::fixture::{write_fixture, Arch, Size};
use runner_engine::candle::load::hub::ModelFiles;
use runner_engine::candle::{BatchLimits, Batching, Engine, Refill};
use runner_engine::{Backend, Request, Sample, Sampling};
use std::path::Path;

fn engine(dir: &Path, max_rows: usize, prefill_tokens: usize) -> Engine {
    let files = ModelFiles::from_dir(dir).unwrap();
    Engine::load(&files, crate::test_device(), "fixture")
        .unwrap()
        .with_limits(BatchLimits {
            max_rows,
            prefill_tokens,
            kv_budget_bytes: usize::MAX,
        })
}

fn sorted(mut s: Vec<Sample>) -> Vec<(String, u64, Vec<u32>)> {
    s.sort_by(|a, b| a.request_id.as_str().cmp(b.request_id.as_str()));
    s.into_iter()
        .map(|s| (s.request_id.to_string(), s.seed, s.token_ids))
        .collect()
}

/// Length caps of 16 to 256 new tokens: static groups wait for their longest row.
fn workload() -> Vec<Request> {
    let reqs = mixed_workload(24, 256, 3);
    let caps: Vec<usize> = reqs.iter().map(|r| r.max_new_tokens).collect();
    assert!(
        caps.iter().min() < Some(&40) && caps.iter().max() > Some(&100),
        "{caps:?}"
    );
    reqs
}

#[test]
fn finished_rows_are_refilled_at_once_and_samples_match_static_groups() {
    let dir = std::env::temp_dir().join(format!("engine-continuous-{}", std::process::id()));
    write_fixture(Arch::Qwen2, Size::Tiny, &dir).unwrap();
    let reqs = workload();

    let mut cont = engine(&dir, 6, 4096);
    let mut order = Vec::new();
    cont.generate_each(&reqs, &mut |s| order.push(s)).unwrap();
    let c = cont.batch_stats().unwrap();
    let mut stat = engine(&dir, 6, 4096).with_batching(Batching::Static);
    let static_samples = stat.generate(&reqs).unwrap();
    let s = stat.batch_stats().unwrap();
    let mut single = engine(&dir, 1, 4096);
    let single_samples = single.generate(&reqs).unwrap();

    assert_eq!(
        sorted(order.clone()),
        sorted(static_samples),
        "same samples as static groups"
    );
    assert_eq!(
        sorted(order.clone()),
        sorted(single_samples),
        "same samples one row at a time"
    );
    let tokens: usize = order.iter().map(|s| s.token_ids.len()).sum();
    assert!(c.generated_tokens >= tokens && c.generated_tokens <= tokens + order.len());
    assert_eq!(c.generated_tokens, s.generated_tokens, "the same work");
    // Every prompt here fits one prefill chunk, so a freed row is refilled before the
    // next token choice: no row-step is left empty while prompts wait.
    assert_eq!(c.utilization(), Some(1.0), "{c:?}");
    assert!(
        s.utilization().unwrap() < 0.8,
        "static groups leave rows empty: {s:?}"
    );
    assert!(c.steps < s.steps, "{} steps against {}", c.steps, s.steps);
    // Handed over as they finish: the longest of the first six rows admitted comes out
    // after samples of requests that took the places of shorter ones.
    let longest = reqs[..6].iter().max_by_key(|r| r.max_new_tokens).unwrap();
    let at = order
        .iter()
        .position(|s| s.request_id == longest.id)
        .unwrap();
    let later: Vec<&str> = reqs[6..].iter().map(|r| r.id.as_str()).collect();
    assert!(
        order[..at]
            .iter()
            .any(|s| later.contains(&s.request_id.as_str())),
        "no later request finished before {}",
        longest.id
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn newcomers_written_over_finished_rows_give_the_samples_of_a_compacted_batch() {
    let dir = std::env::temp_dir().join(format!("engine-refill-{}", std::process::id()));
    write_fixture(Arch::Qwen2, Size::Tiny, &dir).unwrap();
    let reqs = workload();
    let mut compact = engine(&dir, 6, 4096).with_refill(Refill::Compact);
    let want = compact.generate(&reqs).unwrap();
    let c = compact.batch_stats().unwrap();
    let mut in_place = engine(&dir, 6, 4096).with_refill(Refill::InPlace);
    let got = in_place.generate(&reqs).unwrap();
    let p = in_place.batch_stats().unwrap();
    assert_eq!(sorted(got), sorted(want));
    assert_eq!(c.refills, 0, "compacting copies the batch: {c:?}");
    // Each request here has one seed and a prompt shorter than the running rows' slots,
    // so most newcomers take a place without copying the batch.
    assert!(
        p.refills >= reqs.len() / 2 && p.joins < c.joins,
        "in place: {p:?}; compacting: {c:?}"
    );
    assert_eq!(p.generated_tokens, c.generated_tokens, "the same work");
    assert_eq!(p.utilization(), Some(1.0), "{p:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_prompt_longer_than_the_prefill_budget_is_prefilled_in_chunks_between_decode_steps() {
    // The small fixture, as in the invariance tests: on the tiny one (hidden size 64,
    // head size 16) a row's logit bits were seen to change with the batch's shape
    // while its tokens did not; those shapes are outside what invariance is built for.
    let dir = std::env::temp_dir().join(format!("engine-chunked-{}", std::process::id()));
    write_fixture(Arch::Llama, Size::Small, &dir).unwrap();
    let mut reqs = workload();
    reqs.truncate(6);
    for r in &mut reqs {
        r.max_new_tokens = r.max_new_tokens.min(24);
    }
    // The longest prompt is several chunks of 128 tokens.
    let e = engine(&dir, 4, 128);
    let longest = reqs
        .iter()
        .map(|r| e.encode(&r.prompt).unwrap().len())
        .max()
        .unwrap();
    assert!(longest > 3 * 128, "{longest} prompt tokens");
    let mut chunked = e.trace_logits();
    let got = chunked.generate(&reqs).unwrap();
    let mut whole = engine(&dir, 4, 8192).trace_logits();
    let want = whole.generate(&reqs).unwrap();
    assert_eq!(sorted(got), sorted(want));
    assert_eq!(chunked.logit_digests(), whole.logit_digests(), "logit bits");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn tokens_chosen_from_block_reads_are_the_in_place_samplers() {
    // The device's way of reading logits (block maxima, then the blocks that can hold a
    // row's token), run on the CPU: the same samples as the sampler reading every logit.
    // Three samplings take its three paths: the protocol's (the fixture's logits are
    // flat at its temperature, so whole rows are read), greedy (the block holding the
    // maximum), and a temperature so low that only the top few tokens are candidates.
    let dir = std::env::temp_dir().join(format!("engine-block-reads-{}", std::process::id()));
    write_fixture(Arch::Qwen2, Size::Small, &dir).unwrap();
    let samplings = [
        runner_core::protocol::SAMPLING,
        Sampling::Greedy,
        Sampling::TopP {
            temperature: 0.001,
            top_p: 0.9,
        },
    ];
    let mut reqs = workload();
    reqs.truncate(12);
    for (i, r) in reqs.iter_mut().enumerate() {
        r.max_new_tokens = r.max_new_tokens.min(64);
        r.sampling = samplings[i % 3];
    }
    let mut whole = engine(&dir, 6, 4096);
    let want = whole.generate(&reqs).unwrap();
    let w = whole.batch_stats().unwrap();
    let mut blocks = engine(&dir, 6, 4096).read_logits_in_blocks();
    let got = blocks.generate(&reqs).unwrap();
    let b = blocks.batch_stats().unwrap();
    assert_eq!(sorted(got), sorted(want));
    assert_eq!(w.logits_read_bytes, 0, "the CPU reads logits in place");
    // Two thirds of the rows read one block of the six (and the maxima), not their row.
    let whole_rows = b.generated_tokens * blocks.vocab_size() * 4;
    assert!(
        b.logits_read_bytes * 4 < whole_rows * 3,
        "{} bytes read in blocks against {whole_rows} in whole rows",
        b.logits_read_bytes
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The scheduler admits a request's rows together: a request of more seeds than the row
/// limit (or than the KV budget holds) is split into parts that fit, each prefilled on
/// its own, so that `--max-batch` bounds the rows (and the memory) of a run of many
/// seeds, with the samples of an unbounded run.
#[test]
fn a_request_of_more_seeds_than_the_row_limit_never_decodes_more_rows_than_it() {
    let dir = crate::common::scratch_dir("many-seeds");
    write_fixture(Arch::Qwen2, Size::Small, &dir).unwrap();
    let reqs = vec![
        Request {
            id: runner_engine::RequestId::new("many"),
            prompt: runner_engine::Prompt::Raw(
                "the sensor reads 0.84 and the door is open ".repeat(60),
            ),
            seeds: (40..50).collect(),
            max_new_tokens: 128,
            sampling: runner_core::protocol::SAMPLING,
        },
        Request {
            id: runner_engine::RequestId::new("few"),
            prompt: runner_engine::Prompt::Raw("a late report supersedes the camera".into()),
            seeds: vec![1, 2],
            max_new_tokens: 128,
            sampling: runner_core::protocol::SAMPLING,
        },
    ];
    let mut wide = engine(&dir, 32, 4096);
    let want = sorted(wide.generate(&reqs).unwrap());
    assert_eq!(want.len(), 12);
    for scheduler in [Batching::Continuous, Batching::Static] {
        let mut narrow = engine(&dir, 4, 4096).with_batching(scheduler);
        let got = sorted(narrow.generate(&reqs).unwrap());
        let stats = narrow.batch_stats().unwrap();
        assert!(
            stats.rows_decoded <= stats.row_steps && stats.row_steps <= 4 * stats.steps,
            "{scheduler:?}: {} rows decoded in {} steps of at most 4 ({} offered)",
            stats.rows_decoded,
            stats.steps,
            stats.row_steps
        );
        assert_eq!(got, want, "{scheduler:?}");
    }
    // A KV budget that holds three rows of the long request splits it in threes.
    let budget = engine(&dir, 32, 4096);
    let prompt = budget.encode(&reqs[0].prompt).unwrap().len();
    let three_rows = 3 * (prompt + 128) * budget.kv_bytes_per_token();
    let mut budget = budget.with_limits(BatchLimits {
        max_rows: 32,
        prefill_tokens: 4096,
        kv_budget_bytes: three_rows + three_rows / 4,
    });
    let got = sorted(budget.generate(&reqs[..1]).unwrap());
    let stats = budget.batch_stats().unwrap();
    assert!(
        stats.rows_decoded <= 3 * stats.steps,
        "{} rows decoded in {} steps under a budget of three rows",
        stats.rows_decoded,
        stats.steps
    );
    let many: Vec<_> = want.iter().filter(|s| s.0 == "many").cloned().collect();
    assert_eq!(got, many);
    std::fs::remove_dir_all(&dir).unwrap();
}
