//! `runner bench`: prefill and decode throughput of the engine at several batch sizes,
//! with the host-side parts of a decode step, on fixed synthetic prompts.

use crate::alloc_count::AllocCount;
use crate::bench::{median, row, BenchError, BenchSampling};
use crate::candle::bench::mixed::mixed_workload;
use crate::candle::bench::BenchTimes;
use crate::candle::fixture::{write_fixture, Arch, Size};
use crate::candle::load::hub::ModelFiles;
use crate::candle::memory_plan::bench_row_limit;
use crate::candle::{select_device, BatchLimits, Batching, DeviceChoice, Engine, Refill};
use crate::Backend;
use serde::Serialize;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The model a bench loads.
#[derive(Debug, Clone, PartialEq)]
pub enum BenchModel {
    /// A folder in the Hugging Face layout.
    Folder(PathBuf),
    /// A random-weight fixture, written to a temporary folder and removed afterwards.
    Fixture { arch: Arch, size: Size },
}

/// What `runner bench` measures: the workload, the device and how often.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineBench {
    pub model: BenchModel,
    pub device: DeviceChoice,
    /// The weights' format.
    pub load: crate::candle::weights::LoadOptions,
    /// Batch sizes, each measured in turn; 0 stands for the row limit (the rows whose KV
    /// cache of prompt and new tokens fits the device's budget).
    pub batches: Vec<usize>,
    pub prompt_tokens: usize,
    pub new_tokens: usize,
    /// Prompt tokens (rows x longest prompt) per prefill pass.
    pub prefill_tokens: usize,
    /// Runs per batch size; the medians are reported.
    pub repeat: usize,
    pub sampling: BenchSampling,
    /// Where to write the prompts' token ids as JSON, for a side-by-side run elsewhere.
    pub save_prompts: Option<PathBuf>,
    /// Measure the fixed batches (`batches`).
    pub fixed: bool,
    /// A serving workload decoded by each scheduler in turn. With `fixed` too, both run
    /// on one load of the model: the fixed batches, the mixed workload, then the row
    /// limit (batch 0), the longest step, last.
    pub mixed: Option<MixedWorkload>,
}

/// A serving workload of `requests` prompts with length caps of 16 to `longest_cap` new
/// tokens, decoded at a row limit of the largest batch size by each scheduler in
/// alternating rounds (`repeat` of them), so that the schedulers are compared side by side.
#[derive(Debug, Clone, PartialEq)]
pub struct MixedWorkload {
    /// The row limit; none: the largest batch size.
    pub rows: Option<usize>,
    pub requests: usize,
    pub longest_cap: usize,
    pub schedulers: Vec<Batching>,
    /// Ways continuous batching refills finished rows' places, each run in turn; none:
    /// the device's own.
    pub refills: Vec<Refill>,
}

/// Per-step time of each part of a decode step, in milliseconds.
#[derive(Debug, Clone, Serialize)]
pub struct StepMs {
    pub forward: f64,
    pub transfer: f64,
    pub sampler: f64,
}

/// One batch size's figures (medians over the runs). The field order is the table's
/// column order; a field added here is a new column and a new JSON key.
#[derive(Debug, Clone, Serialize)]
pub struct EngineResult {
    pub engine: String,
    pub sampling: &'static str,
    pub batch: usize,
    /// Rows the device's KV budget holds at this prompt and new-token length.
    pub row_limit: usize,
    pub prompt_tokens: usize,
    pub new_tokens: usize,
    pub runs: usize,
    pub prefill_tok_per_s: f64,
    pub decode_tok_per_s: f64,
    pub prefill_s: f64,
    pub decode_s: f64,
    pub kv_cache_mib: f64,
    /// The most resident memory of a run's prefill and decode (the process's high-water
    /// mark, reset at each run's start where the kernel allows), weights included; the
    /// cache maintenance timed after the decode is not in it.
    pub peak_rss_mib: Option<f64>,
    pub step_ms: StepMs,
    pub transfers_per_step: f64,
    pub transfer_bytes_per_step: f64,
    pub select_half_ms: f64,
    pub select_half_whole_buffers_ms: f64,
    pub select_half_copied_mib: f64,
    /// Host heap allocations per decode step (all threads, prefill excluded); `None`
    /// where the process does not count allocations (see `alloc_count`).
    pub allocs_per_step: Option<f64>,
    pub alloc_mib_per_step: Option<f64>,
}

/// Removes a temporary fixture folder however the bench ends.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        std::fs::remove_dir_all(&self.0).ok();
    }
}

/// Runs the bench; `each` sees every result as soon as it is measured (a batch size can
/// take minutes), and all of them come back at the end.
pub fn run(bench: &EngineBench, each: &mut dyn FnMut(&Value)) -> Result<Vec<Value>, BenchError> {
    if bench.batches.is_empty() {
        return Err(BenchError::Workload(
            "no batch size given (0 stands for the row limit)".to_string(),
        ));
    }
    if bench.prompt_tokens == 0 || bench.new_tokens == 0 {
        return Err(BenchError::Workload(
            "--prompt-tokens and --new-tokens must be 1 or more".to_string(),
        ));
    }
    if let Some(mixed) = &bench.mixed {
        if mixed.requests == 0 || mixed.schedulers.is_empty() {
            return Err(BenchError::Workload(
                "the mixed workload needs --requests of 1 or more and a --scheduler".to_string(),
            ));
        }
        if mixed.longest_cap < 16 {
            return Err(BenchError::Workload(format!(
                "--longest-cap {} is below the workload's shortest cap, 16",
                mixed.longest_cap
            )));
        }
    }
    let (device, warning) = select_device(bench.device)?;
    if let Some(w) = warning {
        eprintln!("warning: {w}");
    }
    let (dir, label, _temporary) = match &bench.model {
        BenchModel::Folder(d) => (d.clone(), d.display().to_string(), None),
        BenchModel::Fixture { arch, size } => {
            let d = std::env::temp_dir().join(format!(
                "runner-bench-{arch:?}-{size:?}-{}",
                std::process::id()
            ));
            let guard = TempDir(d.clone());
            write_fixture(*arch, *size, &d)?;
            // The temporary folder's name says nothing; what was written does.
            let label = format!("{arch:?} {size:?} fixture").to_lowercase();
            (d, label, Some(guard))
        }
    };
    let files = if crate::candle::gguf::is_gguf(&dir) && dir.is_file() {
        ModelFiles::from_gguf(&dir)?
    } else {
        ModelFiles::from_dir(&dir)?
    };
    let engine = Engine::load_with(&files, device, &label, bench.load)?;
    // The bench holds a copy of the cache beside it to measure the select: its row
    // limit leaves room for that (see `bench_row_limit`).
    let limits = engine.limits();
    let row_limit = bench_row_limit(
        limits.kv_budget_bytes,
        engine.kv_bytes_per_token(),
        bench.prompt_tokens,
        bench.new_tokens,
        engine.layers(),
        limits.max_rows,
    );
    let batches: Vec<usize> = bench
        .batches
        .iter()
        .map(|&b| if b == 0 { row_limit } else { b })
        .collect();
    let max_batch = batches.iter().copied().max().unwrap_or(1);
    let mut engine = engine.with_limits(BatchLimits {
        max_rows: max_batch,
        prefill_tokens: bench.prefill_tokens,
        ..limits
    });
    let mut results = Vec::new();
    let (first, last): (Vec<usize>, Vec<usize>) = match (&bench.mixed, bench.fixed) {
        (_, false) => (Vec::new(), Vec::new()),
        (None, true) => (batches.clone(), Vec::new()),
        (Some(_), true) => (
            batches
                .iter()
                .copied()
                .filter(|&b| b != row_limit)
                .collect(),
            batches
                .iter()
                .copied()
                .filter(|&b| b == row_limit)
                .collect(),
        ),
    };
    if bench.fixed {
        let prompts = prompts(engine.vocab_size() as u64, max_batch, bench.prompt_tokens);
        if let Some(p) = &bench.save_prompts {
            save(p, &prompts)?;
        }
        // One untimed pass warms allocators and thread pools.
        engine.bench_run(&prompts[..1], 2, bench.sampling.sampling())?;
        let fixed = Fixed {
            bench,
            prompts: &prompts,
            row_limit,
        };
        results.extend(fixed.run(&engine, &first, each)?);
        if let Some(mixed) = &bench.mixed {
            let rows = mixed.rows.unwrap_or(max_batch);
            engine = with_rows(engine, rows);
            results.extend(run_mixed(&mut engine, mixed, bench.repeat, each)?);
            engine = with_rows(engine, max_batch);
        }
        results.extend(fixed.run(&engine, &last, each)?);
        return Ok(results);
    }
    if let Some(mixed) = &bench.mixed {
        if let Some(rows) = mixed.rows {
            engine = with_rows(engine, rows);
        }
        results.extend(run_mixed(&mut engine, mixed, bench.repeat, each)?);
    }
    Ok(results)
}

/// The engine with a row limit of `rows`.
fn with_rows(engine: Engine, rows: usize) -> Engine {
    let limits = engine.limits();
    engine.with_limits(BatchLimits {
        max_rows: rows,
        ..limits
    })
}

/// The fixed batches' prompts and row limit.
struct Fixed<'a> {
    bench: &'a EngineBench,
    prompts: &'a [Vec<u32>],
    row_limit: usize,
}

impl Fixed<'_> {
    /// Each batch size of `batches` in turn, `repeat` runs each.
    fn run(
        &self,
        engine: &Engine,
        batches: &[usize],
        each: &mut dyn FnMut(&Value),
    ) -> Result<Vec<Value>, BenchError> {
        let bench = self.bench;
        let mut results = Vec::new();
        for &b in batches {
            let runs = (0..bench.repeat.max(1))
                .map(|_| {
                    engine.bench_run(
                        &self.prompts[..b],
                        bench.new_tokens,
                        bench.sampling.sampling(),
                    )
                })
                .collect::<Result<Vec<_>, _>>()?;
            let result = row(&summarize(
                &engine.describe(),
                bench,
                b,
                self.row_limit,
                &runs,
            ));
            each(&result);
            results.push(result);
        }
        Ok(results)
    }
}

/// The mixed workload, each scheduler in turn within each round: alternating keeps a
/// noisy machine's drift out of the ratio between them.
fn run_mixed(
    engine: &mut Engine,
    mixed: &MixedWorkload,
    repeat: usize,
    each: &mut dyn FnMut(&Value),
) -> Result<Vec<Value>, BenchError> {
    let requests = mixed_workload(mixed.requests, mixed.longest_cap, 7);
    // One untimed pass warms allocators and thread pools.
    engine.bench_workload(
        &requests[..requests.len().min(4)],
        Batching::Continuous,
        None,
    )?;
    // Refilling only applies to continuous batching; static groups run once per round.
    let refills: Vec<Option<Refill>> = match mixed.refills.as_slice() {
        [] => vec![None],
        r => r.iter().copied().map(Some).collect(),
    };
    let arms: Vec<(Batching, Option<Refill>)> = mixed
        .schedulers
        .iter()
        .flat_map(|&s| match s {
            Batching::Continuous => refills.iter().map(|&r| (s, r)).collect(),
            Batching::Static => vec![(s, None)],
        })
        .collect();
    let mut results = Vec::new();
    for round in 0..repeat.max(1) {
        for &(scheduler, refill) in &arms {
            let run = engine.bench_workload(&requests, scheduler, refill)?;
            let mut result = serde_json::json!({
                "engine": engine.describe(),
                "workload": "mixed",
                "longest_cap": mixed.longest_cap,
                "round": round,
            });
            if let (Some(out), Value::Object(fields)) = (result.as_object_mut(), row(&run)) {
                out.extend(fields);
            }
            each(&result);
            results.push(result);
        }
    }
    Ok(results)
}

/// Deterministic prompts of exactly the requested length; their content does not change
/// the work a forward pass does.
fn prompts(vocab: u64, rows: usize, tokens: usize) -> Vec<Vec<u32>> {
    let mut state = 0x6265_6e63_6820_7031u64;
    let mut next = || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((state >> 33) % vocab.max(1)) as u32
    };
    (0..rows)
        .map(|_| (0..tokens).map(|_| next()).collect())
        .collect()
}

fn save(path: &Path, prompts: &[Vec<u32>]) -> Result<(), BenchError> {
    let text = serde_json::to_string(prompts).unwrap_or_default();
    std::fs::write(path, text).map_err(|source| BenchError::Write {
        path: path.to_path_buf(),
        source,
    })
}

/// The medians of one batch size's runs (`runs` is never empty).
fn summarize(
    engine: &str,
    bench: &EngineBench,
    b: usize,
    row_limit: usize,
    runs: &[BenchTimes],
) -> EngineResult {
    const MIB: f64 = 1024.0 * 1024.0;
    let prefill_s = median(runs.iter().map(|t| t.prefill_s));
    let decode_s = median(runs.iter().map(|t| t.decode_s));
    // The first token comes from the prefill's logits: decode makes the others.
    let decoded = (b * bench.new_tokens.saturating_sub(1)) as f64;
    let steps = bench.new_tokens.max(1) as f64;
    let per_step_ms = |f: &dyn Fn(&BenchTimes) -> f64| median(runs.iter().map(f)) * 1e3 / steps;
    let first = &runs[0];
    let choice = first.breakdown.choice;
    EngineResult {
        engine: engine.to_string(),
        sampling: bench.sampling.name(),
        batch: b,
        row_limit,
        prompt_tokens: bench.prompt_tokens,
        new_tokens: bench.new_tokens,
        runs: runs.len(),
        prefill_tok_per_s: (b * bench.prompt_tokens) as f64 / prefill_s,
        decode_tok_per_s: decoded / decode_s,
        prefill_s,
        decode_s,
        kv_cache_mib: first.kv_bytes as f64 / MIB,
        peak_rss_mib: peak_rss_mib(runs),
        step_ms: StepMs {
            forward: per_step_ms(&|t| t.breakdown.forward_s),
            transfer: per_step_ms(&|t| t.breakdown.choice.transfer_s),
            sampler: per_step_ms(&|t| t.breakdown.choice.sampler_s),
        },
        transfers_per_step: choice.transfers as f64 / steps,
        transfer_bytes_per_step: choice.transfer_bytes as f64 / steps,
        select_half_ms: median(runs.iter().map(|t| t.breakdown.select_s)) * 1e3,
        select_half_whole_buffers_ms: median(runs.iter().map(|t| t.breakdown.select_whole_s)) * 1e3,
        select_half_copied_mib: first.breakdown.select_bytes as f64 / MIB,
        allocs_per_step: per_step_count(runs, steps, |a| a.allocs as f64),
        alloc_mib_per_step: per_step_count(runs, steps, |a| a.bytes as f64 / MIB),
    }
}

/// The most resident memory of any of the runs, in MiB; `None` unless every run read it.
fn peak_rss_mib(runs: &[BenchTimes]) -> Option<f64> {
    let peaks: Option<Vec<u64>> = runs.iter().map(|t| t.peak_rss_bytes).collect();
    Some(peaks?.into_iter().max()? as f64 / (1024.0 * 1024.0))
}

/// The median over the runs of an allocation figure per step; `None` unless every run
/// counted its allocations.
fn per_step_count(
    runs: &[BenchTimes],
    steps: f64,
    figure: impl Fn(&AllocCount) -> f64,
) -> Option<f64> {
    let counts: Option<Vec<f64>> = runs
        .iter()
        .map(|t| t.breakdown.decode_allocs.as_ref().map(&figure))
        .collect();
    counts.map(|c| median(c.into_iter()) / steps)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompts_have_the_asked_shape_and_stay_in_the_vocabulary() {
        let p = prompts(100, 3, 50);
        assert_eq!(p.len(), 3);
        assert!(p
            .iter()
            .all(|r| r.len() == 50 && r.iter().all(|&t| t < 100)));
        assert_ne!(p[0], p[1], "rows differ");
        assert_eq!(p, prompts(100, 3, 50), "deterministic");
    }

    #[test]
    fn an_empty_or_bad_workload_is_refused_before_loading_anything() {
        let mut bench = EngineBench {
            model: BenchModel::Folder(PathBuf::from("/nonexistent")),
            device: DeviceChoice::Cpu,
            load: Default::default(),
            batches: vec![],
            prompt_tokens: 10,
            new_tokens: 4,
            prefill_tokens: 4096,
            repeat: 1,
            sampling: BenchSampling::Greedy,
            save_prompts: None,
            fixed: true,
            mixed: None,
        };
        let err = run(&bench, &mut |_| {}).unwrap_err().to_string();
        assert!(err.contains("no batch size given"), "{err}");
        bench.batches = vec![1];
        bench.new_tokens = 0;
        let err = run(&bench, &mut |_| {}).unwrap_err().to_string();
        assert!(err.contains("--new-tokens"), "{err}");
        bench.new_tokens = 4;
        let mut mixed = MixedWorkload {
            rows: None,
            requests: 0,
            longest_cap: 256,
            schedulers: vec![Batching::Continuous],
            refills: Vec::new(),
        };
        bench.mixed = Some(mixed.clone());
        let err = run(&bench, &mut |_| {}).unwrap_err().to_string();
        assert!(err.contains("--requests"), "{err}");
        mixed.requests = 8;
        mixed.longest_cap = 8;
        bench.mixed = Some(mixed);
        let err = run(&bench, &mut |_| {}).unwrap_err().to_string();
        assert!(err.contains("--longest-cap 8"), "{err}");
    }

    fn counted(allocs: Option<(u64, u64)>) -> BenchTimes {
        BenchTimes {
            prefill_s: 1.0,
            decode_s: 1.0,
            kv_bytes: 0,
            peak_rss_bytes: None,
            breakdown: crate::candle::bench::BenchBreakdown {
                decode_allocs: allocs.map(|(allocs, bytes)| AllocCount { allocs, bytes }),
                ..Default::default()
            },
        }
    }

    #[test]
    fn the_peak_rss_is_the_largest_runs_or_absent_if_a_run_has_none() {
        let with = |peak| BenchTimes {
            peak_rss_bytes: peak,
            ..counted(None)
        };
        let runs = [
            with(Some(3 << 20)),
            with(Some(5 << 20)),
            with(Some(4 << 20)),
        ];
        assert_eq!(peak_rss_mib(&runs), Some(5.0));
        assert_eq!(peak_rss_mib(&[with(Some(1 << 20)), with(None)]), None);
        assert_eq!(peak_rss_mib(&[]), None);
    }

    #[test]
    fn allocations_per_step_are_the_median_run_over_its_steps_or_absent() {
        let runs = [
            counted(Some((300, 3 << 20))),
            counted(Some((100, 1 << 20))),
            counted(Some((200, 2 << 20))),
        ];
        assert_eq!(per_step_count(&runs, 4.0, |a| a.allocs as f64), Some(50.0));
        assert_eq!(
            per_step_count(&runs, 4.0, |a| a.bytes as f64 / (1 << 20) as f64),
            Some(0.5)
        );
        // A run that did not count makes the figure absent, never a partial median.
        let mixed = [counted(Some((100, 1))), counted(None)];
        assert_eq!(per_step_count(&mixed, 4.0, |a| a.allocs as f64), None);
    }
}
