//! Continuous batching: a row that finishes frees its place at once, and the next
//! waiting prompt takes it without waiting for the rest of the batch.
//!
//! Newcomers are prefilled one prompt at a time in their own cache, in chunks of a
//! token budget per step, so that the running rows keep decoding between chunks. A
//! fully prefilled prompt is forked per seed and joined to the running batch by one
//! copy of the batch's cache ([`KvCache::join_rows`], left-padding the shorter rows),
//! in which the rows that finished in the same step are left out; without newcomers,
//! finished rows are dropped by a gather of the slots in use. A slot table that needs
//! no compaction would save those copies, but attention would then read (and the
//! kernels mask) the dead slots at every step, which on the CPU costs more than the
//! copies; the copies are counted in [`BatchStats::joins`].
//!
//! Batch invariance holds by construction on the CPU: a chunk boundary falls on a
//! multiple of [`PREFILL_ALIGN`] real positions, which is a multiple of the fused
//! attention kernel's query block, so a chunked prompt runs exactly the blocks a whole
//! one does; every other op computes a token from its own row alone.

use super::kv_cache::KvCache;
use super::phases::{timed, PhaseTimes};
use super::sampler::StreamKey;
use super::{step, Engine};
use crate::engine::{BatchStats, EngineError, Request, Sample, Sampling, Timings};
use candle_core::Tensor;
use std::collections::VecDeque;
use std::time::Instant;

/// Prefill chunks are whole multiples of this many tokens (the last one excepted).
pub const PREFILL_ALIGN: usize = 128;

/// A prompt being prefilled, not yet in the batch.
struct Incoming<'a> {
    request: &'a Request,
    prompt: &'a [u32],
    cache: KvCache,
    logits: Option<Tensor>,
    prefill_s: f64,
}

impl Incoming<'_> {
    fn rows(&self) -> usize {
        self.request.seeds.len()
    }
}

/// A (request, seed) being decoded.
struct Row<'a> {
    request: &'a Request,
    seed: u64,
    key: StreamKey,
    tokens: Vec<u32>,
    prompt_tokens: usize,
    prefill_s: f64,
    decode_s: f64,
}

impl Row<'_> {
    /// Prompt and new tokens: the cache the row may come to need.
    fn extent(&self) -> usize {
        self.prompt_tokens + self.request.max_new_tokens
    }
}

impl Engine {
    /// Tokens of one prefill chunk: the step's token budget rounded down to the
    /// alignment that keeps chunked prefill bit-identical to whole prefill.
    fn prefill_chunk(&self) -> usize {
        (self.limits.prefill_tokens / PREFILL_ALIGN).max(1) * PREFILL_ALIGN
    }

    /// Whether `rows` more rows reaching `extent` tokens fit the row limit and the KV
    /// budget beside the rows already taken; the first rows always go in.
    fn fits(&self, taken: usize, taken_extent: usize, rows: usize, extent: usize) -> bool {
        if taken == 0 {
            return true;
        }
        let total = taken + rows;
        let kv = total
            .saturating_mul(taken_extent.max(extent))
            .saturating_mul(self.kv_bytes_per_token);
        total <= self.limits.max_rows && kv <= self.limits.kv_budget_bytes
    }

    /// Decodes `pending` (request, prompt ids) with continuous batching, handing over
    /// each sample as it finishes.
    ///
    /// Each step: the running rows choose their tokens and the finished ones are handed
    /// over; waiting prompts take the freed places and are prefilled within the step's
    /// token budget; newcomers whose prompts are in choose their first token; then one
    /// copy of the cache drops the finished rows and adds the newcomers, and one forward
    /// pass decodes every row.
    pub(super) fn run_continuous(
        &self,
        pending: &[(&Request, Vec<u32>)],
        stats: &mut BatchStats,
        times: &mut PhaseTimes,
        peak: &mut usize,
        on_sample: &mut dyn FnMut(Sample),
    ) -> Result<(), EngineError> {
        let mut queue: VecDeque<usize> = (0..pending.len()).collect();
        let mut waiting_rows: usize = pending.iter().map(|(r, _)| r.seeds.len()).sum();
        let mut incoming: Vec<Incoming> = Vec::new();
        let mut rows: Vec<Row> = Vec::new();
        let mut cache: Option<KvCache> = None;
        let mut logits: Option<Tensor> = None;
        let chunk = self.prefill_chunk();
        let mut step_start: Option<Instant> = None;
        loop {
            // The running rows' next tokens, from the last forward pass.
            let mut chosen = 0;
            let mut keep: Vec<usize> = Vec::new();
            if let Some(step_logits) = logits.take() {
                let next = self.choose(&step_logits, &rows, times)?;
                if let Some(t) = step_start.take() {
                    let dt = t.elapsed().as_secs_f64();
                    rows.iter_mut().for_each(|r| r.decode_s += dt);
                }
                chosen += rows.len();
                let running = std::mem::take(&mut rows);
                for (i, row) in running.into_iter().enumerate() {
                    if let Some(row) = self.advance(row, next[i], times, on_sample)? {
                        keep.push(i);
                        rows.push(row);
                    }
                }
            }

            // Admit waiting prompts while their rows fit beside the running ones.
            while let Some(&next) = queue.front() {
                let (request, prompt) = &pending[next];
                let taken = rows.len() + incoming.iter().map(Incoming::rows).sum::<usize>();
                let extent = rows
                    .iter()
                    .map(Row::extent)
                    .chain(
                        incoming
                            .iter()
                            .map(|i| i.prompt.len() + i.request.max_new_tokens),
                    )
                    .max()
                    .unwrap_or(0);
                let need = prompt.len() + request.max_new_tokens;
                if !self.fits(taken, extent, request.seeds.len(), need) {
                    break;
                }
                queue.pop_front();
                let mut c = KvCache::new(self.model.layers(), vec![0]);
                c.reserve(prompt.len())?;
                incoming.push(Incoming {
                    request,
                    prompt,
                    cache: c,
                    logits: None,
                    prefill_s: 0.0,
                });
            }

            // Rows on the device, for the retry after an out-of-memory error.
            *peak = (*peak).max(rows.len() + incoming.iter().map(Incoming::rows).sum::<usize>());

            // One step's prefill budget, spent on the newcomers in order.
            let mut budget = self.limits.prefill_tokens.max(chunk);
            for inc in incoming.iter_mut().filter(|i| i.logits.is_none()) {
                while budget > 0 && inc.logits.is_none() {
                    let t = Instant::now();
                    let done = inc.cache.slots();
                    let len = chunk.min(inc.prompt.len() - done);
                    let ids = &inc.prompt[done..done + len];
                    let tokens = Tensor::from_slice(ids, (1, len), &self.device)?;
                    let out = self.model.forward(&tokens, &mut inc.cache)?;
                    if inc.cache.slots() == inc.prompt.len() {
                        inc.logits = Some(out);
                        self.device.synchronize()?;
                    }
                    let dt = t.elapsed().as_secs_f64();
                    inc.prefill_s += dt;
                    times.prefill_s += dt;
                    budget = budget.saturating_sub(len);
                }
            }

            // Newcomers whose prompts are in choose their first token, one row per seed.
            let (ready, still): (Vec<Incoming>, Vec<Incoming>) =
                incoming.into_iter().partition(|i| i.logits.is_some());
            incoming = still;
            let mut joining: Vec<(&Incoming, Vec<usize>)> = Vec::new();
            if !ready.is_empty() {
                let mut new_rows = Vec::new();
                let mut forks = Vec::new();
                for inc in &ready {
                    waiting_rows -= inc.rows();
                    let l = inc.logits.as_ref().expect("ready newcomers have logits");
                    forks.push(l.broadcast_as((inc.rows(), l.dim(1)?))?.contiguous()?);
                    for &seed in &inc.request.seeds {
                        new_rows.push(Row {
                            request: inc.request,
                            seed,
                            key: StreamKey::new(seed, &inc.request.id),
                            tokens: Vec::new(),
                            prompt_tokens: inc.prompt.len(),
                            prefill_s: inc.prefill_s,
                            decode_s: 0.0,
                        });
                    }
                }
                let first = if forks.len() == 1 {
                    forks.remove(0)
                } else {
                    Tensor::cat(&forks, 0)?
                };
                let next = self.choose(&first, &new_rows, times)?;
                chosen += new_rows.len();
                let mut new_rows = new_rows.into_iter().zip(next);
                for inc in &ready {
                    let mut survivors = 0;
                    for (row, token) in new_rows.by_ref().take(inc.rows()) {
                        if let Some(row) = self.advance(row, token, times, on_sample)? {
                            rows.push(row);
                            survivors += 1;
                        }
                    }
                    if survivors > 0 {
                        joining.push((inc, vec![0; survivors]));
                    }
                }
            }
            stats.generated_tokens += chosen;

            // One copy of the cache drops the finished rows and adds the newcomers.
            let running = cache.take().filter(|_| !keep.is_empty());
            let mut c = if !joining.is_empty() {
                let mut parts: Vec<(&KvCache, &[usize])> = Vec::new();
                if let Some(c) = &running {
                    parts.push((c, &keep));
                }
                parts.extend(
                    joining
                        .iter()
                        .map(|(inc, fork)| (&inc.cache, fork.as_slice())),
                );
                // Room for the longest row to finish without regrowing, within the
                // extent the KV budget was checked against.
                let extent = rows.iter().map(Row::extent).max().unwrap_or(0);
                stats.joins += 1;
                timed(&mut times.cache_s, || KvCache::join_rows(&parts, extent))?
            } else if let Some(mut c) = running {
                if keep.len() < c.rows() {
                    timed(&mut times.cache_s, || c.select(&keep))?;
                }
                c
            } else {
                if queue.is_empty() && incoming.is_empty() {
                    return Ok(());
                }
                continue;
            };
            // The newcomers' own caches are copied in: free them before the forward pass.
            drop(ready);

            if self
                .simulated_oom_above
                .is_some_and(|limit| rows.len() > limit)
            {
                return Err(EngineError::Tensor(candle_core::Error::Msg(
                    "CUDA_ERROR_OUT_OF_MEMORY: out of memory (simulated)".into(),
                )));
            }
            stats.steps += 1;
            stats.rows_decoded += rows.len();
            stats.row_steps += self.limits.max_rows.min(rows.len() + waiting_rows);
            step_start = Some(Instant::now());
            let last: Vec<u32> = rows
                .iter()
                .map(|r| *r.tokens.last().expect("a running row has a token"))
                .collect();
            let tokens = Tensor::from_vec(last, (rows.len(), 1), &self.device)?;
            logits = Some(timed(&mut times.forward_s, || {
                self.model.forward(&tokens, &mut c)
            })?);
            cache = Some(c);
        }
    }

    /// The next token of each row from `logits` (rows, vocab), in the rows' order.
    fn choose(
        &self,
        logits: &Tensor,
        rows: &[Row],
        times: &mut PhaseTimes,
    ) -> Result<Vec<u32>, EngineError> {
        if let Some(trace) = &self.logit_trace {
            let all: Vec<Vec<f32>> = logits.to_vec2()?;
            for (row, l) in rows.iter().zip(&all) {
                trace.record(&row.request.id, row.seed, row.tokens.len(), l);
            }
        }
        let draws: Vec<(Sampling, f64)> = rows
            .iter()
            .map(|row| (row.request.sampling, row.key.uniform(row.tokens.len())))
            .collect();
        let mut choice = step::ChoiceStats::default();
        Ok(timed(&mut times.choose_s, || {
            step::next_tokens(logits, &draws, &mut choice)
        })?)
    }

    /// Adds `token` to `row`; a row that this finishes is handed over (None back).
    fn advance<'a>(
        &self,
        mut row: Row<'a>,
        token: u32,
        times: &mut PhaseTimes,
        on_sample: &mut dyn FnMut(Sample),
    ) -> Result<Option<Row<'a>>, EngineError> {
        let max_new = row.request.max_new_tokens;
        let Some(reason) = step::advance(&mut row.tokens, token, &self.eos, max_new) else {
            return Ok(Some(row));
        };
        let t = Instant::now();
        on_sample(self.finished_sample(
            row.request,
            row.seed,
            row.tokens,
            row.prompt_tokens,
            reason,
            Timings {
                prefill_s: row.prefill_s,
                decode_s: row.decode_s,
            },
        )?);
        times.hand_over_s += t.elapsed().as_secs_f64();
        Ok(None)
    }
}
