//! Continuous batching: a row that finishes frees its place at once, and the next
//! waiting prompt takes it without waiting for the rest of the batch.
//!
//! Newcomers are prefilled one prompt at a time in their own cache, in chunks of a
//! token budget per step, so that the running rows keep decoding between chunks. A
//! fully prefilled prompt is forked per seed and joined to the running batch by one
//! copy of the batch's cache ([`KvCache::join_rows`], left-padding the shorter rows);
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
use super::sampler::StreamKey;
use super::{step, Engine};
use crate::engine::{BatchStats, EngineError, FinishReason, Request, Sample, Sampling, Timings};
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
    pub(super) fn run_continuous(
        &self,
        pending: &[(&Request, Vec<u32>)],
        stats: &mut BatchStats,
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
                    inc.prefill_s += t.elapsed().as_secs_f64();
                    budget = budget.saturating_sub(len);
                }
            }

            // Newcomers whose prompts are in join the batch, one row per seed.
            let (ready, still): (Vec<Incoming>, Vec<Incoming>) =
                incoming.into_iter().partition(|i| i.logits.is_some());
            incoming = still;
            if !ready.is_empty() {
                let (c, l) = self.admit(cache.take(), logits.take(), &rows, &ready)?;
                for inc in &ready {
                    waiting_rows -= inc.rows();
                    for &seed in &inc.request.seeds {
                        rows.push(Row {
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
                stats.joins += 1;
                (cache, logits) = (Some(c), Some(l));
            }
            let Some(step_logits) = logits.take() else {
                if queue.is_empty() && incoming.is_empty() {
                    return Ok(());
                }
                continue;
            };

            // Choose every running row's next token; hand over the rows that finish.
            let draws: Vec<(Sampling, f64)> = rows
                .iter()
                .map(|row| (row.request.sampling, row.key.uniform(row.tokens.len())))
                .collect();
            if let Some(trace) = &self.logit_trace {
                let all: Vec<Vec<f32>> = step_logits.to_vec2()?;
                for (row, l) in rows.iter().zip(&all) {
                    trace.record(&row.request.id, row.seed, row.tokens.len(), l);
                }
            }
            let mut choice = step::ChoiceStats::default();
            let next = step::next_tokens(&step_logits, &draws, &mut choice)?;
            if let Some(t) = step_start.take() {
                let dt = t.elapsed().as_secs_f64();
                rows.iter_mut().for_each(|r| r.decode_s += dt);
            }
            stats.steps += 1;
            stats.rows_decoded += rows.len();
            stats.generated_tokens += rows.len();
            stats.row_steps += self.limits.max_rows.min(rows.len() + waiting_rows);
            let mut keep = Vec::new();
            let mut kept = Vec::new();
            for (i, (mut row, tok)) in std::mem::take(&mut rows).into_iter().zip(next).enumerate() {
                let finish = if self.eos.contains(&tok) {
                    Some(FinishReason::Stop)
                } else {
                    row.tokens.push(tok);
                    (row.tokens.len() >= row.request.max_new_tokens).then_some(FinishReason::Length)
                };
                match finish {
                    Some(reason) => on_sample(Sample {
                        request_id: row.request.id.clone(),
                        seed: row.seed,
                        text: self.decode(&row.tokens)?,
                        prompt_tokens: row.prompt_tokens,
                        token_ids: row.tokens,
                        reported_tokens: None,
                        finish_reason: reason,
                        timings: Timings {
                            prefill_s: row.prefill_s,
                            decode_s: row.decode_s,
                        },
                    }),
                    None => {
                        keep.push(i);
                        kept.push(row);
                    }
                }
            }
            rows = kept;
            let Some(mut c) = cache.take() else {
                return Err(EngineError::Model("a running batch without a cache".into()));
            };
            if rows.is_empty() {
                continue;
            }
            if keep.len() < c.rows() {
                c.select(&keep)?;
            }
            if self
                .simulated_oom_above
                .is_some_and(|limit| rows.len() > limit)
            {
                return Err(EngineError::Tensor(candle_core::Error::Msg(
                    "CUDA_ERROR_OUT_OF_MEMORY: out of memory (simulated)".into(),
                )));
            }
            step_start = Some(Instant::now());
            let last: Vec<u32> = rows
                .iter()
                .map(|r| *r.tokens.last().expect("a token was pushed"))
                .collect();
            let tokens = Tensor::from_vec(last, (rows.len(), 1), &self.device)?;
            logits = Some(self.model.forward(&tokens, &mut c)?);
            cache = Some(c);
        }
    }

    /// The running batch's cache and logits with the ready newcomers' rows after its
    /// own, one row per seed.
    fn admit(
        &self,
        cache: Option<KvCache>,
        logits: Option<Tensor>,
        rows: &[Row],
        ready: &[Incoming],
    ) -> Result<(KvCache, Tensor), EngineError> {
        let all: Vec<usize> = (0..rows.len()).collect();
        let forks: Vec<Vec<usize>> = ready.iter().map(|i| vec![0; i.rows()]).collect();
        let mut parts: Vec<(&KvCache, &[usize])> = Vec::new();
        let mut out_logits = Vec::new();
        if let (Some(c), Some(l)) = (&cache, &logits) {
            parts.push((c, &all));
            out_logits.push(l.clone());
        }
        for (inc, fork) in ready.iter().zip(&forks) {
            parts.push((&inc.cache, fork));
            let l = inc.logits.as_ref().expect("ready newcomers have logits");
            out_logits.push(l.broadcast_as((fork.len(), l.dim(1)?))?.contiguous()?);
        }
        // Room for the longest row to finish without regrowing, within the extent the
        // KV budget was checked against.
        let extent = rows
            .iter()
            .map(Row::extent)
            .chain(
                ready
                    .iter()
                    .map(|i| i.prompt.len() + i.request.max_new_tokens),
            )
            .max()
            .unwrap_or(0);
        let joined = KvCache::join_rows(&parts, extent)?;
        let logits = if out_logits.len() == 1 {
            out_logits.remove(0)
        } else {
            Tensor::cat(&out_logits, 0)?
        };
        Ok((joined, logits))
    }
}
