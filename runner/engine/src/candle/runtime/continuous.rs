//! Continuous batching: a row that finishes frees its place at once, and the next
//! waiting prompt takes it without waiting for the rest of the batch.
//!
//! Newcomers are prefilled one prompt at a time in their own cache, in chunks of a
//! token budget per step, so that the running rows keep decoding between chunks. A
//! fully prefilled prompt is forked per seed, and each fork is written over a finished
//! row's place ([`KvCache::place`], one row copied); a place stays in the batch,
//! decoding a dummy token, until a newcomer takes it. A copy of the whole cache
//! ([`KvCache::join_rows`], left-padding the shorter rows) is left for when newcomers
//! outnumber the places, a prompt is longer than the batch's slots, or the buffers are
//! full, and a gather of the rows in use ([`KvCache::select`]) for trimming padding and
//! for the end of the work. Dropping finished rows at once instead ([`Refill::Compact`],
//! the engine's way before) copies the cache whenever rows finish, which on a GPU at
//! hundreds of rows is nearly every step and costs more than the step; on the CPU
//! those copies took a quarter of a mixed workload's time at 64 rows (BUDGET.md,
//! section 5).
//!
//! Full copies are counted in [`BatchStats::joins`], rows taken in place in
//! [`BatchStats::refills`].
//!
//! Batch invariance holds by construction on the CPU: a chunk boundary falls on a
//! multiple of [`PREFILL_ALIGN`] real positions, which is a multiple of the fused
//! attention kernel's query block, so a chunked prompt runs exactly the blocks a whole
//! one does; every other op computes a token from its own row alone.

use crate::candle::choice::sampler::StreamKey;
use crate::candle::choice::step;
use crate::candle::runtime::kv_cache::KvCache;
use crate::candle::runtime::phases::{timed, PhaseTimes};
use crate::candle::{Engine, Refill, RowDraw};
use crate::{BatchStats, EngineError, Request, Sample, Timings};
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

    /// Prompt and new tokens: the cache its rows may come to need.
    fn extent(&self) -> usize {
        self.prompt.len() + self.request.max_new_tokens
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
    /// budget beside the rows already taken; the first rows always go in. `headroom` is
    /// what the cache keeps beyond every row's extent (see [`Engine::headroom`]).
    fn fits(
        &self,
        taken: usize,
        taken_extent: usize,
        rows: usize,
        extent: usize,
        headroom: usize,
    ) -> bool {
        if taken == 0 {
            return true;
        }
        let total = taken + rows;
        let kv = total
            .saturating_mul(taken_extent.max(extent) + headroom)
            .saturating_mul(self.kv_bytes_per_token);
        total <= self.limits.max_rows && kv <= self.limits.kv_budget_bytes
    }

    /// Slots a joined cache keeps beyond its rows' extent: none when compacting; in
    /// place, two answers' worth (`max_new` tokens each). A newcomer takes a place only
    /// if its whole answer fits in the buffers, as every row's slots advance together:
    /// two answers' room lets newcomers take places for at least one answer's length of
    /// steps before a join copies the cache again. At the GPU's batch sizes a step reads
    /// every row's cache anyway, so the rows this costs where the KV budget binds cost
    /// little throughput; a copy of the cache at every step would cost much more.
    fn headroom(&self, max_new: usize) -> usize {
        match self.refill {
            Refill::Compact => 0,
            Refill::InPlace => 2 * max_new,
        }
    }

    /// Decodes `pending` (request, prompt ids) with continuous batching, handing over
    /// each sample as it finishes.
    ///
    /// Each step: the running rows choose their tokens and the finished ones are handed
    /// over; waiting prompts take the freed places and are prefilled within the step's
    /// token budget; newcomers whose prompts are in choose their first token; then the
    /// cache makes room for them (see [`Engine::make_room`]), and one forward pass
    /// decodes every row.
    pub(crate) fn run_continuous(
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
        // One entry per row of the cache: a row being decoded, or a finished row's place.
        let mut places: Vec<Option<Row>> = Vec::new();
        let mut cache: Option<KvCache> = None;
        let mut logits: Option<Tensor> = None;
        let chunk = self.prefill_chunk();
        let mut step_start: Option<Instant> = None;
        loop {
            // The running rows' next tokens, from the last forward pass.
            let mut chosen = 0;
            if let Some(step_logits) = logits.take() {
                let live = indices(&places, true);
                let step_logits = if live.len() < places.len() {
                    let idx: Vec<u32> = live.iter().map(|&i| i as u32).collect();
                    step_logits.index_select(&Tensor::new(idx.as_slice(), &self.device)?, 0)?
                } else {
                    step_logits
                };
                let running: Vec<&Row> = places.iter().flatten().collect();
                let next = self.choose(&step_logits, &running, stats, times)?;
                if let Some(t) = step_start.take() {
                    let dt = t.elapsed().as_secs_f64();
                    places.iter_mut().flatten().for_each(|r| r.decode_s += dt);
                }
                chosen += live.len();
                for (&i, token) in live.iter().zip(next) {
                    let row = places[i].take().expect("a live place holds a row");
                    places[i] = self.advance(row, token, times, on_sample)?;
                }
            }

            // Admit waiting prompts while their rows fit beside the running ones: rows
            // taken, the longest extent and the longest answer among them.
            let (mut taken, mut extent, mut answer) = places
                .iter()
                .flatten()
                .map(|r| (1, r.extent(), r.request.max_new_tokens))
                .chain(
                    incoming
                        .iter()
                        .map(|i| (i.rows(), i.extent(), i.request.max_new_tokens)),
                )
                .fold((0, 0, 0), |(t, e, a), (rows, ext, ans)| {
                    (t + rows, e.max(ext), a.max(ans))
                });
            while let Some(&next) = queue.front() {
                let (request, prompt) = &pending[next];
                let need = prompt.len() + request.max_new_tokens;
                let headroom = self.headroom(answer.max(request.max_new_tokens));
                if !self.fits(taken, extent, request.seeds.len(), need, headroom) {
                    break;
                }
                taken += request.seeds.len();
                extent = extent.max(need);
                answer = answer.max(request.max_new_tokens);
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
            *peak = (*peak).max(places.len() + incoming.iter().map(Incoming::rows).sum::<usize>());

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
            let mut joining: Vec<(&Incoming, Vec<Row>)> = Vec::new();
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
                let rows: Vec<&Row> = new_rows.iter().collect();
                let next = self.choose(&first, &rows, stats, times)?;
                chosen += new_rows.len();
                let mut new_rows = new_rows.into_iter().zip(next);
                for inc in &ready {
                    let mut survivors = Vec::new();
                    for (row, token) in new_rows.by_ref().take(inc.rows()) {
                        survivors.extend(self.advance(row, token, times, on_sample)?);
                    }
                    if !survivors.is_empty() {
                        joining.push((inc, survivors));
                    }
                }
            }
            stats.generated_tokens += chosen;

            let waiting = !queue.is_empty() || !incoming.is_empty();
            let Some(mut c) =
                self.make_room(&mut places, cache.take(), joining, waiting, stats, times)?
            else {
                if !waiting {
                    return Ok(());
                }
                continue;
            };
            // The newcomers' own caches are copied in: free them before the forward pass.
            drop(ready);

            if self
                .simulated_oom_above
                .is_some_and(|limit| places.len() > limit)
            {
                return Err(EngineError::Tensor(candle_core::Error::Msg(
                    "CUDA_ERROR_OUT_OF_MEMORY: out of memory (simulated)".into(),
                )));
            }
            let live = places.iter().flatten().count();
            stats.steps += 1;
            stats.rows_decoded += live;
            stats.row_steps += self.limits.max_rows.min(live + waiting_rows);
            step_start = Some(Instant::now());
            // A finished row's place decodes any token until a newcomer takes it.
            let last: Vec<u32> = places
                .iter()
                .map(|p| {
                    p.as_ref()
                        .map_or(0, |r| *r.tokens.last().expect("a running row has a token"))
                })
                .collect();
            let tokens = Tensor::from_vec(last, (places.len(), 1), &self.device)?;
            logits = Some(timed(&mut times.forward_s, || {
                self.model.forward(&tokens, &mut c)
            })?);
            cache = Some(c);
        }
    }

    /// Gives the newcomers rows of the cache and lets go of finished rows' places; None
    /// when no row is left to decode.
    ///
    /// Compacting ([`Refill::Compact`]), or where a newcomer cannot take a place: one
    /// copy of the cache drops the finished rows and adds the newcomers (left-padding
    /// the shorter rows), or without newcomers a gather keeps the rows in use. In place
    /// ([`Refill::InPlace`]): each newcomer is written over a finished row's place (one
    /// row copied), which needs a place for every newcomer and prompts no longer than
    /// the cache's slots; places nobody takes stay until one does. A full copy still
    /// trims the cache when padding that every row skips passes a quarter of its slots
    /// (the rows that set its length have left), and at the end of the work once half
    /// the places are empty.
    fn make_room<'a>(
        &self,
        places: &mut Vec<Option<Row<'a>>>,
        cache: Option<KvCache>,
        joining: Vec<(&Incoming, Vec<Row<'a>>)>,
        waiting: bool,
        stats: &mut BatchStats,
        times: &mut PhaseTimes,
    ) -> Result<Option<KvCache>, EngineError> {
        let live = indices(places, true);
        let cache = cache.filter(|_| !live.is_empty());
        let newcomers: usize = joining.iter().map(|(_, rows)| rows.len()).sum();
        if cache.is_none() && newcomers == 0 {
            places.clear();
            return Ok(None);
        }
        if let Some(mut c) = cache {
            if self.refill == Refill::InPlace {
                let holes = indices(places, false);
                let (slots, capacity) = (c.slots(), c.capacity());
                let fit = newcomers <= holes.len()
                    && joining.iter().all(|(inc, _)| {
                        inc.prompt.len() <= slots && slots + inc.request.max_new_tokens <= capacity
                    });
                if fit {
                    let mut at = holes.into_iter();
                    for (inc, rows) in joining {
                        for row in rows {
                            let i = at.next().expect("a place for every newcomer");
                            timed(&mut times.cache_s, || c.place(i, &inc.cache, 0))?;
                            places[i] = Some(row);
                            stats.refills += 1;
                        }
                    }
                    let live = indices(places, true);
                    let empty = places.len() - live.len();
                    let shared = live.iter().map(|&i| c.pad()[i]).min().unwrap_or(0);
                    if shared * 4 > slots || (!waiting && empty * 2 >= places.len()) {
                        drop_empty_places(&mut c, places, &live, times)?;
                    }
                    return Ok(Some(c));
                }
            }
            if joining.is_empty() {
                if live.len() < places.len() {
                    drop_empty_places(&mut c, places, &live, times)?;
                }
                return Ok(Some(c));
            }
            return self
                .join(places, Some(&c), &live, joining, stats, times)
                .map(Some);
        }
        self.join(places, None, &[], joining, stats, times)
            .map(Some)
    }

    /// One copy of the kept rows of `running` and of the newcomers into a new cache;
    /// `places` becomes the kept rows, then the newcomers.
    fn join<'a>(
        &self,
        places: &mut Vec<Option<Row<'a>>>,
        running: Option<&KvCache>,
        keep: &[usize],
        joining: Vec<(&Incoming, Vec<Row<'a>>)>,
        stats: &mut BatchStats,
        times: &mut PhaseTimes,
    ) -> Result<KvCache, EngineError> {
        places.retain(Option::is_some);
        let forks: Vec<Vec<usize>> = joining
            .iter()
            .map(|(_, rows)| vec![0; rows.len()])
            .collect();
        let mut parts: Vec<(&KvCache, &[usize])> = Vec::new();
        if let Some(c) = running {
            parts.push((c, keep));
        }
        parts.extend(
            joining
                .iter()
                .zip(&forks)
                .map(|((inc, _), f)| (&inc.cache, f.as_slice())),
        );
        // Room for the longest row to finish without regrowing (and the headroom for
        // newcomers to take places), within what the KV budget was checked against.
        let rows = || {
            places
                .iter()
                .flatten()
                .chain(joining.iter().flat_map(|(_, r)| r))
        };
        let extent = rows().map(Row::extent).max().unwrap_or(0);
        let longest_answer = rows().map(|r| r.request.max_new_tokens).max().unwrap_or(0);
        let capacity = extent + self.headroom(longest_answer);
        stats.joins += 1;
        let c = timed(&mut times.cache_s, || KvCache::join_rows(&parts, capacity))?;
        drop(parts);
        for (_, rows) in joining {
            places.extend(rows.into_iter().map(Some));
        }
        Ok(c)
    }

    /// The next token of each row from `logits` (rows, vocab), in the rows' order.
    fn choose(
        &self,
        logits: &Tensor,
        rows: &[&Row],
        stats: &mut BatchStats,
        times: &mut PhaseTimes,
    ) -> Result<Vec<u32>, EngineError> {
        let draws: Vec<RowDraw> = rows
            .iter()
            .map(|row| RowDraw {
                request: row.request,
                seed: row.seed,
                key: &row.key,
                generated: row.tokens.len(),
            })
            .collect();
        self.choose_tokens(logits, &draws, stats, times)
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

/// The positions of the places holding a row (`occupied`), or of the empty ones.
fn indices(places: &[Option<Row>], occupied: bool) -> Vec<usize> {
    (0..places.len())
        .filter(|&i| places[i].is_some() == occupied)
        .collect()
}

/// Keeps only the rows at `live` (the places holding one), in the cache and the table.
fn drop_empty_places(
    cache: &mut KvCache,
    places: &mut Vec<Option<Row>>,
    live: &[usize],
    times: &mut PhaseTimes,
) -> Result<(), EngineError> {
    timed(&mut times.cache_s, || cache.select(live))?;
    places.retain(Option::is_some);
    Ok(())
}
