//! A model too large for the machine is refused before its weights are read, with the
//! figures and the ways out, not killed by the kernel minutes into loading. The model
//! is the tiny fixture's config and tokenizer beside a weights file whose header
//! declares 1.6 TB of f32 values, all of them the embedding table: the table stays in
//! the file on the CPU, but the fixture's output head is tied to it and is held. The
//! file is sparse on disk, so the test costs nothing, and the head is larger than any
//! machine the tests run on.

use crate::cgroup::{Limit, TestCgroup};
use crate::common::{runner, runner_exe, s, scratch_dir, text};
use runner_engine::candle::fixture::{write_fixture, Arch, Size};
use std::io::Write;

/// `dir/model.safetensors` declaring one (vocab, hidden) f32 table of `elements` values,
/// and the config's vocab_size set to agree with it (the tiny fixture's hidden size is 64).
fn huge_weights(dir: &std::path::Path, elements: u64) {
    let header = serde_json::json!({
        "model.embed_tokens.weight": {
            "dtype": "F32",
            "shape": [elements / HIDDEN, HIDDEN],
            "data_offsets": [0, elements * 4],
        }
    })
    .to_string();
    let path = dir.join("model.safetensors");
    let mut f = std::fs::File::create(&path).unwrap();
    f.write_all(&(header.len() as u64).to_le_bytes()).unwrap();
    f.write_all(header.as_bytes()).unwrap();
    f.set_len(8 + header.len() as u64 + elements * 4).unwrap();
    let config = dir.join("config.json");
    let mut c: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&config).unwrap()).unwrap();
    assert_eq!(c["hidden_size"], HIDDEN, "the fixture's hidden size");
    c["vocab_size"] = (elements / HIDDEN).into();
    std::fs::write(&config, c.to_string()).unwrap();
}

const HIDDEN: u64 = 64;

#[test]
fn a_model_that_cannot_fit_is_refused_before_loading_with_the_figures() {
    let dir = scratch_dir("huge");
    write_fixture(Arch::Qwen2, Size::Tiny, &dir).unwrap();
    huge_weights(&dir, 400_000_000_000);
    let args = [
        "generate",
        "--model",
        s(&dir),
        "--prompt",
        "hi",
        "--device",
        "cpu",
        "--dtype",
        "f32",
    ];
    let out = runner(&args);
    assert!(!out.status.success(), "a 1.6 TB model loaded");
    let err = text(&out.stderr);
    for part in [
        "does not fit in memory",
        "f32 weights take 1600.0 GB",
        "available",
        "--quantization q8_0 (weights about 425.0 GB)",
        "--dtype bf16",
    ] {
        assert!(err.contains(part), "{part:?} missing from: {err}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Prompts and new tokens that overflow the context are refused before the weights
/// load: the 1.6 TB model would be refused for its size if loading came first.
#[test]
fn the_context_is_checked_before_the_weights_load() {
    let dir = scratch_dir("context");
    write_fixture(Arch::Qwen2, Size::Tiny, &dir).unwrap();
    huge_weights(&dir, 400_000_000_000);
    let out_dir = dir.join("out");
    for args in [
        vec![
            "generate",
            "--model",
            s(&dir),
            "--prompt",
            "hi",
            "--device",
            "cpu",
        ],
        vec![
            "run",
            "--model",
            s(&dir),
            "--limit",
            "1",
            "--condition",
            "canonical_json",
            "--tasks",
            "belief",
            "--seeds",
            "42",
            "--device",
            "cpu",
            "--out",
            s(&out_dir),
        ],
    ] {
        let mut args = args.clone();
        args.extend(["--max-new-tokens", "100000"]);
        let out = runner(&args);
        assert!(!out.status.success(), "{args:?} ran");
        let err = text(&out.stderr);
        assert!(
            err.contains("does not fit the model's context"),
            "{args:?}: {err}"
        );
        assert!(
            !err.contains("does not fit in memory"),
            "{args:?} loaded first: {err}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A run starts by saying what bounds its memory: the KV cache's budget, its cost per
/// token, and the row limit `--max-batch` set.
#[test]
fn a_run_states_its_kv_budget_and_row_limit_as_it_starts() {
    let dir = scratch_dir("kv-line");
    let model = dir.join("model");
    super::common::write_suite_fixture(&model);
    let o = runner(&[
        "run",
        "--model",
        s(&model),
        "--condition",
        "canonical_json",
        "--tasks",
        "belief",
        "--limit",
        "1",
        "--shard",
        "0/23",
        "--seeds",
        "42",
        "--max-new-tokens",
        "2",
        "--max-batch",
        "3",
        "--device",
        "cpu",
        "--out",
        s(&dir.join("out")),
    ]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let err = text(&o.stderr);
    let line = err
        .lines()
        .find(|l| l.starts_with("KV cache up to "))
        .unwrap_or_else(|| panic!("no KV line in:\n{err}"));
    assert!(
        line.contains("at most 3 rows decode together (--max-batch)"),
        "{line}"
    );
    assert!(line.contains(" KB a token, "), "{line}");
    // The figure moves with the free memory: the line says what bounds it.
    assert!(
        line.contains("GB, half the memory available when the model loaded"),
        "{line}"
    );
}

/// The GB figure of the run's "KV cache up to X GB" line.
fn kv_budget_gb(stderr: &str) -> f64 {
    let line = stderr
        .lines()
        .find_map(|l| l.strip_prefix("KV cache up to "))
        .unwrap_or_else(|| panic!("no KV line in:\n{stderr}"));
    line.split(' ').next().unwrap().parse().unwrap()
}

/// Inside a memory cgroup (a Slurm job's), the KV cache is sized by what the group
/// leaves, not by the host's free memory: sized by the host, a run in a small group is
/// killed by the kernel with nothing journaled.
#[test]
fn a_run_inside_a_memory_cgroup_sizes_its_kv_cache_by_the_groups_limit() {
    let limit: u64 = 256 << 20;
    let group = match TestCgroup::create("creg-kv", Limit::Memory(limit)) {
        Ok(g) => g,
        Err(why) => {
            eprintln!("skipped: no memory cgroup can be made here ({why})");
            return;
        }
    };
    let dir = scratch_dir("kv-cgroup");
    let model = dir.join("model");
    super::common::write_suite_fixture(&model);
    let args = [
        "run",
        "--model",
        s(&model),
        "--condition",
        "canonical_json",
        "--tasks",
        "belief",
        "--limit",
        "1",
        "--shard",
        "0/23",
        "--seeds",
        "42",
        "--max-new-tokens",
        "2",
        "--device",
        "cpu",
    ];
    let inside_out = dir.join("inside");
    let mut inside = args.to_vec();
    inside.extend(["--out", s(&inside_out)]);
    let o = group.command(&runner_exe(), &inside).output().unwrap();
    let err = text(&o.stderr);
    assert!(o.status.success(), "{err}");
    let budget = kv_budget_gb(&err);
    assert!(
        budget * 1e9 <= limit as f64 / 2.0,
        "a {limit}-byte group got a KV budget of {budget} GB:\n{err}"
    );

    let outside_out = dir.join("outside");
    let mut outside = args.to_vec();
    outside.extend(["--out", s(&outside_out)]);
    let o = runner(&outside);
    let host_budget = kv_budget_gb(&text(&o.stderr));
    assert!(
        host_budget > budget,
        "the host's budget {host_budget} GB is not above the group's {budget} GB"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
