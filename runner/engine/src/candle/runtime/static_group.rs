//! One static group, the benchmark's baseline for continuous batching: its prompts are
//! prefilled together and forked per seed, and it decodes until its longest row is done.

use crate::candle::runtime::kv_cache::KvCache;
use crate::candle::runtime::model_runner::{ModelRunner, RowDraw};
use crate::candle::runtime::phases::PhaseTimes;
use crate::candle::runtime::rows::{self, Row};
use crate::candle::Engine;
use crate::{BatchStats, EngineError, Request, Sample};
use candle_core::Tensor;
use std::time::Instant;

/// Decodes `group` (requests with their `prompts`), which fits the row limit together;
/// `waiting_rows` are the rows of the groups after it.
pub(crate) fn run(
    engine: &Engine,
    group: &[&Request],
    prompts: &[Vec<u32>],
    waiting_rows: usize,
    batch: &mut BatchStats,
    times: &mut PhaseTimes,
    on_sample: &mut dyn FnMut(Sample),
) -> Result<(), EngineError> {
    let runner = ModelRunner::new(engine);
    let (mut rows, mut logits, mut cache) = start(engine, &runner, group, prompts, times)?;
    let group_rows = rows.len();
    let mut step_start: Option<Instant> = None;
    loop {
        let draws: Vec<RowDraw> = rows.iter().map(Row::draw).collect();
        let next = runner.choose(&logits, &draws, batch, times)?;
        if let Some(t) = step_start.take() {
            let dt = t.elapsed().as_secs_f64();
            rows.iter_mut().for_each(|r| r.decode_s += dt);
        }
        batch.generated_tokens += rows.len();
        engine.activity.generated(rows.len());
        let before = rows.len();
        let mut keep = Vec::new();
        let mut kept_rows = Vec::new();
        for (i, (row, token)) in rows.into_iter().zip(next).enumerate() {
            if let Some(row) = rows::advance(engine, row, token, times, on_sample)? {
                keep.push(i);
                kept_rows.push(row);
            }
        }
        if kept_rows.is_empty() {
            return Ok(());
        }
        if keep.len() < before {
            runner.gather(&mut cache, &keep, times)?;
        }
        rows = kept_rows;
        runner.simulated_out_of_memory(group_rows)?;
        engine.activity.decoding(rows.len());
        batch.steps += 1;
        batch.rows_decoded += rows.len();
        batch.row_steps += engine.limits.max_rows.min(rows.len() + waiting_rows);
        step_start = Some(Instant::now());
        let last: Vec<u32> = rows.iter().map(Row::last_token).collect();
        logits = runner.decode_step(last, &mut cache, times)?;
    }
}

/// Prefills the group's prompts and forks them: one row, cache row and logits row per
/// (request, seed), with room in the cache for the longest answer.
fn start<'a>(
    engine: &Engine,
    runner: &ModelRunner,
    group: &[&'a Request],
    prompts: &[Vec<u32>],
    times: &mut PhaseTimes,
) -> Result<(Vec<Row<'a>>, Tensor, KvCache), EngineError> {
    let t0 = Instant::now();
    let total = prompts.iter().map(Vec::len).sum();
    engine.activity.prefilling(0, total);
    let (prompt_logits, mut cache) = engine.prefill(prompts, 0)?;
    engine.activity.prefilling(total, total);
    // Kernels run asynchronously on a GPU: the prefill ends when they do.
    runner.synchronize()?;
    let prefill_s = t0.elapsed().as_secs_f64();
    times.prefill_s += prefill_s;

    let mut fork = Vec::new();
    let mut rows = Vec::new();
    for (i, r) in group.iter().enumerate() {
        for &seed in &r.seeds {
            fork.push(i);
            rows.push(Row::new(r, seed, prompts[i].len(), prefill_s));
        }
    }
    let longest = group.iter().map(|r| r.max_new_tokens).max().unwrap_or(0);
    let logits = runner.fork(&prompt_logits, &mut cache, &fork, longest, times)?;
    Ok((rows, logits, cache))
}
