//! The scheduler: continuous batching ([`crate::candle::runtime::continuous`]) within the row and KV
//! limits, or (as the benchmark's baseline only) static groups that decode until their
//! longest row is done; each prompt is prefilled once and forked per seed, and the batch
//! shrinks on out-of-memory errors.

use crate::candle::choice::sampler::StreamKey;
use crate::candle::choice::step;
use crate::candle::runtime::kv_cache::KvCache;
use crate::candle::runtime::phases::{timed, PhaseTimes};
use crate::candle::{Engine, RowDraw};
use crate::{Backend, BatchStats, EngineError, FinishReason, Request, RequestId, Sample, Timings};
use candle_core::Tensor;
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::Instant;

/// How much work one forward pass may take on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchLimits {
    /// Sequences decoded together (seeds count separately).
    pub max_rows: usize,
    /// Prompt tokens (padded rows x longest prompt) in one prefill pass; bounds the
    /// attention score tensor of prefill.
    pub prefill_tokens: usize,
    /// Bytes the KV cache of one group of rows may take: rows x (longest prompt + new
    /// tokens) x the model's KV bytes per token. Measured at load time from the free
    /// memory of the device.
    pub kv_budget_bytes: usize,
}

/// How requests share the decode batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Scheduler {
    /// A finished row's place goes to the next waiting prompt at once.
    #[default]
    Continuous,
    /// Groups decode until their longest row is done: the benchmark's baseline.
    Static,
}

impl std::str::FromStr for Scheduler {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "continuous" => Ok(Scheduler::Continuous),
            "static" => Ok(Scheduler::Static),
            _ => Err(format!("unknown scheduler {s:?} (continuous, static)")),
        }
    }
}

/// What becomes of a finished row's place in the batch's KV cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Refill {
    /// The place stays in the batch, empty, until a newcomer is written into it (a copy
    /// of that one row). A step costs a little more with places kept empty, but no
    /// copy of the whole cache is made when rows finish: on a GPU at hundreds of rows,
    /// where rows finish at nearly every step, such copies would cost more than the
    /// steps themselves (see BUDGET.md, section 5).
    #[default]
    InPlace,
    /// The place is dropped at once (one copy of the rows kept, unless newcomers join
    /// in the same step, which copies the batch once anyway): the engine's way before,
    /// kept for `runner bench` to compare and for the invariance tests.
    Compact,
}

impl std::str::FromStr for Refill {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "compact" => Ok(Refill::Compact),
            "in-place" => Ok(Refill::InPlace),
            _ => Err(format!("unknown refill {s:?} (compact, in-place)")),
        }
    }
}

/// Rows decoded together at most, whatever the KV budget allows: the logits of a step
/// (rows x vocabulary in f32) must fit beside the cache too.
pub const ROW_CAP: usize = 1024;

impl Default for BatchLimits {
    fn default() -> Self {
        BatchLimits {
            max_rows: ROW_CAP,
            prefill_tokens: 4096,
            kv_budget_bytes: usize::MAX,
        }
    }
}

/// Digests of logits bits per (request, seed) and step, for batch-invariance tests.
#[derive(Debug, Default)]
pub struct LogitTrace(Mutex<HashMap<(String, u64), Vec<u64>>>);

impl LogitTrace {
    /// Records the logits a row's token number `step` is chosen from; a row decoded again
    /// (after an out-of-memory retry) overwrites its earlier record.
    pub(crate) fn record(&self, id: &RequestId, seed: u64, step: usize, logits: &[f32]) {
        // FNV-1a over the bits: any change of any bit changes the digest.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for x in logits {
            h = (h ^ u64::from(x.to_bits())).wrapping_mul(0x0100_0000_01b3);
        }
        let mut map = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let v = map.entry((id.to_string(), seed)).or_default();
        v.truncate(step);
        v.push(h);
    }

    pub(crate) fn snapshot(&self) -> HashMap<(String, u64), Vec<u64>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl Engine {
    /// A finished row as the sample handed over.
    pub(crate) fn finished_sample(
        &self,
        request: &Request,
        seed: u64,
        tokens: Vec<u32>,
        prompt_tokens: usize,
        reason: FinishReason,
        timings: Timings,
    ) -> Result<Sample, EngineError> {
        Ok(Sample {
            request_id: request.id.clone(),
            seed,
            text: self.decode(&tokens)?,
            prompt_tokens,
            token_ids: tokens,
            reported_tokens: None,
            finish_reason: reason,
            timings,
        })
    }

    /// Prefills prompts in groups that respect the token budget and joins their caches;
    /// the logits (prompts, vocab) stay on the device.
    pub(crate) fn prefill(&self, prompts: &[Vec<u32>]) -> Result<(Tensor, KvCache), EngineError> {
        let mut logits = Vec::with_capacity(prompts.len());
        let mut caches = Vec::new();
        let mut start = 0;
        while start < prompts.len() {
            let mut end = start + 1;
            let mut longest = prompts[start].len();
            while end < prompts.len() {
                let l = longest.max(prompts[end].len());
                if l * (end + 1 - start) > self.limits.prefill_tokens {
                    break;
                }
                longest = l;
                end += 1;
            }
            let group = &prompts[start..end];
            let pad: Vec<usize> = group.iter().map(|p| longest - p.len()).collect();
            let mut ids = Vec::with_capacity(group.len() * longest);
            for (p, &k) in group.iter().zip(&pad) {
                // Padding slots are masked out; any valid id will do.
                ids.extend(std::iter::repeat_n(0u32, k));
                ids.extend_from_slice(p);
            }
            let tokens = Tensor::from_vec(ids, (group.len(), longest), &self.device)?;
            let mut cache = KvCache::new(self.model.layers(), pad);
            let out = self.model.forward(&tokens, &mut cache)?;
            logits.push(out);
            caches.push(cache);
            start = end;
        }
        let cache = if caches.len() == 1 {
            caches.pop().expect("one cache")
        } else {
            KvCache::join(caches)?
        };
        let logits = if logits.len() == 1 {
            logits.pop().expect("one part")
        } else {
            Tensor::cat(&logits, 0)?
        };
        Ok((logits, cache))
    }

    /// Decodes a group of requests that fits the row limit together.
    fn run_group(
        &self,
        group: &[&Request],
        prompts: &[Vec<u32>],
        waiting_rows: usize,
        batch: &mut BatchStats,
        times: &mut PhaseTimes,
        on_sample: &mut dyn FnMut(Sample),
    ) -> Result<(), EngineError> {
        struct Row<'a> {
            request: &'a Request,
            seed: u64,
            key: StreamKey,
            tokens: Vec<u32>,
            decode_s: f64,
        }
        let t0 = Instant::now();
        let (prompt_logits, mut cache) = self.prefill(prompts)?;
        // Kernels run asynchronously on a GPU: the prefill ends when they do.
        self.device.synchronize()?;
        let prefill_s = t0.elapsed().as_secs_f64();
        times.prefill_s += prefill_s;

        // Fork: one cache row and one logits row per (request, seed).
        let mut fork = Vec::new();
        let mut rows = Vec::new();
        for (i, r) in group.iter().enumerate() {
            for &seed in &r.seeds {
                fork.push(i);
                rows.push(Row {
                    request: r,
                    seed,
                    key: StreamKey::new(seed, &r.id),
                    tokens: Vec::new(),
                    decode_s: 0.0,
                });
            }
        }
        let fork_ids: Vec<u32> = fork.iter().map(|&i| i as u32).collect();
        let mut logits =
            prompt_logits.index_select(&Tensor::new(fork_ids.as_slice(), &self.device)?, 0)?;
        let group_rows = fork.len();
        let longest = group.iter().map(|r| r.max_new_tokens).max().unwrap_or(0);
        timed(&mut times.cache_s, || {
            cache.select(&fork)?;
            cache.reserve(cache.slots() + longest)
        })?;

        // A step runs from its forward pass until its tokens are chosen: on a GPU the
        // forward pass only queues kernels, and the wait falls in the logits transfer.
        let mut step_start: Option<Instant> = None;
        loop {
            let draws: Vec<RowDraw> = rows
                .iter()
                .map(|row| RowDraw {
                    request: row.request,
                    seed: row.seed,
                    key: &row.key,
                    generated: row.tokens.len(),
                })
                .collect();
            let next = self.choose_tokens(&logits, &draws, batch, times)?;
            if let Some(t) = step_start.take() {
                let dt = t.elapsed().as_secs_f64();
                rows.iter_mut().for_each(|r| r.decode_s += dt);
            }
            batch.generated_tokens += rows.len();
            let mut keep = Vec::new();
            let mut kept_rows = Vec::new();
            let t = Instant::now();
            for (i, (mut row, tok)) in rows.into_iter().zip(next).enumerate() {
                match step::advance(&mut row.tokens, tok, &self.eos, row.request.max_new_tokens) {
                    Some(reason) => on_sample(self.finished_sample(
                        row.request,
                        row.seed,
                        row.tokens,
                        prompts[fork[i]].len(),
                        reason,
                        Timings {
                            prefill_s,
                            decode_s: row.decode_s,
                        },
                    )?),
                    None => {
                        keep.push(i);
                        kept_rows.push(row);
                    }
                }
            }
            times.hand_over_s += t.elapsed().as_secs_f64();
            if kept_rows.is_empty() {
                return Ok(());
            }
            if keep.len() < fork.len() {
                timed(&mut times.cache_s, || cache.select(&keep))?;
                fork = keep.iter().map(|&i| fork[i]).collect();
            }
            rows = kept_rows;
            if self
                .simulated_oom_above
                .is_some_and(|limit| group_rows > limit)
            {
                return Err(EngineError::Tensor(candle_core::Error::Msg(
                    "CUDA_ERROR_OUT_OF_MEMORY: out of memory (simulated)".into(),
                )));
            }
            batch.steps += 1;
            batch.rows_decoded += rows.len();
            batch.row_steps += self.limits.max_rows.min(rows.len() + waiting_rows);
            step_start = Some(Instant::now());
            let last: Vec<u32> = rows
                .iter()
                .map(|r| *r.tokens.last().expect("a token was pushed"))
                .collect();
            let tokens = Tensor::from_vec(last, (rows.len(), 1), &self.device)?;
            logits = timed(&mut times.forward_s, || {
                self.model.forward(&tokens, &mut cache)
            })?;
        }
    }
}

impl Backend for Engine {
    fn describe(&self) -> String {
        self.label.clone()
    }

    /// A few batches' worth at the row limit of prompts of 2,048 tokens, so that the
    /// scheduler has prompts waiting when rows finish.
    fn preferred_batch(&self) -> usize {
        (2 * self.row_limit(2048)).clamp(64, 2048)
    }

    fn batch_stats(&self) -> Option<BatchStats> {
        Some(self.batch_stats)
    }

    fn generate_each(
        &mut self,
        requests: &[Request],
        on_sample: &mut dyn FnMut(Sample),
    ) -> Result<(), EngineError> {
        let mut pending: Vec<(Request, Vec<u32>)> = Vec::new();
        for r in requests {
            if r.seeds.is_empty() {
                continue;
            }
            if r.max_new_tokens == 0 {
                return Err(EngineError::InvalidRequest {
                    id: r.id.to_string(),
                    message: "max_new_tokens must be at least 1".into(),
                });
            }
            let ids = self.encode(&r.prompt)?;
            if ids.is_empty() {
                return Err(EngineError::InvalidRequest {
                    id: r.id.to_string(),
                    message: "the prompt encodes to no tokens".into(),
                });
            }
            pending.push((r.clone(), ids));
        }
        match self.scheduler {
            Scheduler::Continuous => self.continuous_with_retry(pending, on_sample),
            Scheduler::Static => self.static_groups(pending, on_sample),
        }
    }
}

impl Engine {
    /// Continuous batching; after an out-of-memory error the row limit halves and the
    /// samples not yet handed over are decoded again (identically: rows are
    /// batch-invariant, and a sample's randomness is keyed on its request and seed).
    fn continuous_with_retry(
        &mut self,
        mut pending: Vec<(Request, Vec<u32>)>,
        on_sample: &mut dyn FnMut(Sample),
    ) -> Result<(), EngineError> {
        let mut emitted: HashSet<(RequestId, u64)> = HashSet::new();
        loop {
            let refs: Vec<(&Request, Vec<u32>)> =
                pending.iter().map(|(r, p)| (r, p.clone())).collect();
            let mut stats = self.batch_stats;
            let mut times = self.phase_times;
            let mut peak = 0;
            let result = self.run_continuous(
                &refs,
                &mut stats,
                &mut times,
                &mut peak,
                &mut |s: Sample| {
                    if emitted.insert((s.request_id.clone(), s.seed)) {
                        on_sample(s)
                    }
                },
            );
            self.batch_stats = stats;
            self.phase_times = times;
            match result {
                Err(e)
                    if is_out_of_memory(&e) && peak / 2 >= 1 && peak / 2 < self.limits.max_rows =>
                {
                    eprintln!(
                        "warning: out of memory decoding {peak} rows together; retrying with at most {}",
                        peak / 2
                    );
                    self.limits.max_rows = peak / 2;
                    for (r, _) in &mut pending {
                        r.seeds
                            .retain(|&seed| !emitted.contains(&(r.id.clone(), seed)));
                    }
                    pending.retain(|(r, _)| !r.seeds.is_empty());
                }
                other => return other,
            }
        }
    }

    /// Static groups: the benchmark's baseline for continuous batching.
    fn static_groups(
        &mut self,
        pending: Vec<(Request, Vec<u32>)>,
        on_sample: &mut dyn FnMut(Sample),
    ) -> Result<(), EngineError> {
        let pending: Vec<(&Request, Vec<u32>)> =
            pending.iter().map(|(r, p)| (r, p.clone())).collect();
        // Samples already handed over: a group retried after an out-of-memory error
        // decodes them again (identically) and they are not handed over twice.
        let mut emitted: HashSet<(RequestId, u64)> = HashSet::new();
        let mut start = 0;
        while start < pending.len() {
            let end = self.group_end(&pending, start);
            let rows: usize = pending[start..end].iter().map(|(r, _)| r.seeds.len()).sum();
            let waiting: usize = pending[end..].iter().map(|(r, _)| r.seeds.len()).sum();
            let group: Vec<&Request> = pending[start..end].iter().map(|(r, _)| *r).collect();
            let prompts: Vec<Vec<u32>> =
                pending[start..end].iter().map(|(_, p)| p.clone()).collect();
            let mut stats = self.batch_stats;
            let mut times = self.phase_times;
            let result = self.run_group(
                &group,
                &prompts,
                waiting,
                &mut stats,
                &mut times,
                &mut |s: Sample| {
                    if emitted.insert((s.request_id.clone(), s.seed)) {
                        on_sample(s)
                    }
                },
            );
            self.batch_stats = stats;
            self.phase_times = times;
            match result {
                Err(e) if is_out_of_memory(&e) && end - start > 1 => {
                    let shrunk: usize = pending[start..start + (end - start) / 2]
                        .iter()
                        .map(|(r, _)| r.seeds.len())
                        .sum();
                    eprintln!(
                        "warning: out of memory decoding {rows} rows together; retrying with at most {shrunk}"
                    );
                    self.limits.max_rows = shrunk.max(1);
                }
                Err(e) => return Err(e),
                Ok(()) => start = end,
            }
        }
        Ok(())
    }
}

/// Whether an engine error is the device running out of memory (worth a smaller batch).
fn is_out_of_memory(e: &EngineError) -> bool {
    let text = e.to_string().to_ascii_lowercase();
    text.contains("out of memory") || text.contains("out_of_memory")
}

impl Engine {
    /// The end of the group that starts at `start`: requests are added while their
    /// rows fit `max_rows` and the group's KV cache (rows x (longest prompt + longest
    /// budget of new tokens)) fits the KV budget; the first request always goes in.
    fn group_end(&self, pending: &[(&Request, Vec<u32>)], start: usize) -> usize {
        let (mut rows, mut longest_prompt, mut longest_new) = (0, 0, 0);
        let mut end = start;
        while end < pending.len() {
            let (r, p) = &pending[end];
            let rows2 = rows + r.seeds.len();
            let prompt2 = longest_prompt.max(p.len());
            let new2 = longest_new.max(r.max_new_tokens);
            let kv = rows2
                .saturating_mul(prompt2 + new2)
                .saturating_mul(self.kv_bytes_per_token);
            if end > start && (rows2 > self.limits.max_rows || kv > self.limits.kv_budget_bytes) {
                break;
            }
            (rows, longest_prompt, longest_new) = (rows2, prompt2, new2);
            end += 1;
        }
        end
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::candle::{fixture, load::hub::ModelFiles};
    use crate::{Prompt, Sampling};
    use candle_core::Device;

    #[test]
    fn decoding_stops_before_any_declared_end_token() {
        let dir = std::env::temp_dir().join(format!("engine-stop-{}", std::process::id()));
        fixture::write_fixture(fixture::Arch::Qwen2, fixture::Size::Tiny, &dir).unwrap();
        let mut e =
            Engine::load(&ModelFiles::from_dir(&dir).unwrap(), Device::Cpu, "stop").unwrap();
        let req = Request {
            id: RequestId::new("stop"),
            prompt: Prompt::Raw("the river is north".into()),
            seeds: vec![0],
            max_new_tokens: 6,
            sampling: Sampling::Greedy,
        };
        let free = e.generate(std::slice::from_ref(&req)).unwrap().remove(0);
        assert_eq!(free.finish_reason, FinishReason::Length);
        assert_eq!(free.token_ids.len(), 6);
        let end = free.token_ids[2];
        e.eos.push(end);
        let stopped = e.generate(std::slice::from_ref(&req)).unwrap().remove(0);
        let cut = free.token_ids.iter().position(|&t| t == end).unwrap();
        assert_eq!(stopped.finish_reason, FinishReason::Stop);
        assert_eq!(stopped.token_ids, free.token_ids[..cut]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
