//! The model runner: prefill, forward steps, token choice and the KV cache's copies, the
//! tensor work that carries out what the scheduler decides, for both batching loops.

use crate::candle::choice::sampler::StreamKey;
use crate::candle::choice::step;
use crate::candle::runtime::kv_cache::{JoinPart, KvCache};
use crate::candle::runtime::phases::{timed, PhaseTimes};
use crate::candle::{CausalLm, Engine};
use crate::{BatchStats, EngineError, Request, RequestId, Sampling};
use candle_core::{DType, Device, Tensor};
use std::collections::HashMap;
use std::ops::Range;
use std::sync::Mutex;

/// A row whose next token a step chooses: its request and seed, its random stream, and
/// the tokens it has generated so far (the position of the draw).
pub(crate) struct RowDraw<'a> {
    pub request: &'a Request,
    pub seed: u64,
    pub key: &'a StreamKey,
    pub generated: usize,
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

/// An engine's model on its device, with the test hooks that change how it runs.
pub(crate) struct ModelRunner<'e> {
    model: &'e dyn CausalLm,
    device: &'e Device,
    /// What the caches it makes hold keys and values in.
    kv_dtype: DType,
    /// The model as the engine names it, for errors about what it computes.
    label: &'e str,
    logit_trace: Option<&'e LogitTrace>,
    reads: step::Reads,
    simulated_oom_above: Option<usize>,
}

impl<'e> ModelRunner<'e> {
    pub fn new(engine: &'e Engine) -> Self {
        ModelRunner {
            model: engine.model.as_ref(),
            device: &engine.device,
            kv_dtype: engine.kv_dtype,
            label: &engine.label,
            logit_trace: engine.logit_trace.as_ref(),
            reads: match engine.block_reads {
                true => step::Reads::Blocks,
                false => step::Reads::Auto,
            },
            simulated_oom_above: engine.simulated_oom_above,
        }
    }

    /// Waits for the kernels queued on the device (a GPU runs them asynchronously).
    pub fn synchronize(&self) -> Result<(), EngineError> {
        Ok(self.device.synchronize()?)
    }

    /// Prefills `prompts` group by group (`groups` ranges of them, left-padded to the
    /// group's longest) and joins the groups' caches, with room for `room` more slots
    /// after the longest prompt (made as the cache is first written or joined, not by
    /// regrowing it after); the logits of each prompt's last token (prompts, vocab) stay
    /// on the device.
    pub fn prefill(
        &self,
        prompts: &[Vec<u32>],
        groups: &[Range<usize>],
        room: usize,
    ) -> Result<(Tensor, KvCache), EngineError> {
        let slots = prompts.iter().map(Vec::len).max().unwrap_or(0) + room;
        let mut logits = Vec::with_capacity(prompts.len());
        let mut caches = Vec::new();
        for range in groups {
            let group = &prompts[range.clone()];
            let longest = group.iter().map(Vec::len).max().unwrap_or(0);
            let pad: Vec<usize> = group.iter().map(|p| longest - p.len()).collect();
            let mut ids = Vec::with_capacity(group.len() * longest);
            for (p, &k) in group.iter().zip(&pad) {
                // Padding slots are masked out; any valid id will do.
                ids.extend(std::iter::repeat_n(0u32, k));
                ids.extend_from_slice(p);
            }
            let tokens = Tensor::from_vec(ids, (group.len(), longest), self.device)?;
            let mut cache = KvCache::new(self.model.layers(), pad).storing(self.kv_dtype);
            if groups.len() == 1 {
                cache.reserve(slots)?;
            }
            logits.push(self.model.forward(&tokens, &mut cache)?);
            caches.push(cache);
            if groups.len() > 1 {
                // A group's activations (tens of MB a layer) are freed into the heap,
                // where the next groups' caches land among them; kept resident, the
                // holes they leave add to the batch's peak.
                crate::process::return_freed_memory();
            }
        }
        let cache = match caches.len() {
            1 => caches.pop().expect("one cache"),
            _ => KvCache::join(caches, slots)?,
        };
        let logits = match logits.len() {
            1 => logits.pop().expect("one part"),
            _ => Tensor::cat(&logits, 0)?,
        };
        Ok((logits, cache))
    }

    /// Forks a prefilled group per seed: row `k` of the cache and logits becomes a copy
    /// of prompt `fork[k]`'s, with room for `new_tokens` more slots.
    pub fn fork(
        &self,
        logits: &Tensor,
        cache: &mut KvCache,
        fork: &[usize],
        new_tokens: usize,
        times: &mut PhaseTimes,
    ) -> Result<Tensor, EngineError> {
        let ids: Vec<u32> = fork.iter().map(|&i| i as u32).collect();
        let logits = logits.index_select(&Tensor::new(ids.as_slice(), self.device)?, 0)?;
        timed(&mut times.cache_s, || {
            cache.select(fork)?;
            cache.reserve(cache.slots() + new_tokens)
        })?;
        Ok(logits)
    }

    /// An empty cache for one prompt of `len` tokens, to be prefilled in chunks.
    pub fn prompt_cache(&self, len: usize) -> Result<KvCache, EngineError> {
        let mut cache = KvCache::new(self.model.layers(), vec![0]).storing(self.kv_dtype);
        cache.reserve(len)?;
        Ok(cache)
    }

    /// Runs the next `len` tokens of `prompt` into its own `cache`. Once the prompt is
    /// all in, the logits of its last token (the device synchronised, so that the
    /// prefill's time includes its kernels); None before.
    pub fn prefill_chunk(
        &self,
        prompt: &[u32],
        cache: &mut KvCache,
        len: usize,
    ) -> Result<Option<Tensor>, EngineError> {
        let done = cache.slots();
        let ids = &prompt[done..done + len];
        let tokens = Tensor::from_slice(ids, (1, len), self.device)?;
        let out = self.model.forward(&tokens, cache)?;
        if cache.slots() < prompt.len() {
            return Ok(None);
        }
        self.device.synchronize()?;
        Ok(Some(out))
    }

    /// The first logits of each newcomer's rows: its prompt's logits repeated for each
    /// of its `rows`, newcomers in order.
    pub fn fork_logits(&self, prompts: &[(&Tensor, usize)]) -> Result<Tensor, EngineError> {
        let mut forks = Vec::with_capacity(prompts.len());
        for &(l, rows) in prompts {
            forks.push(l.broadcast_as((rows, l.dim(1)?))?.contiguous()?);
        }
        Ok(match forks.len() {
            1 => forks.remove(0),
            _ => Tensor::cat(&forks, 0)?,
        })
    }

    /// The rows `live` of a step's `logits`, which has `total` rows (the logits
    /// themselves when every row is live).
    pub fn rows_of(
        &self,
        logits: Tensor,
        live: &[usize],
        total: usize,
    ) -> Result<Tensor, EngineError> {
        if live.len() == total {
            return Ok(logits);
        }
        let idx: Vec<u32> = live.iter().map(|&i| i as u32).collect();
        Ok(logits.index_select(&Tensor::new(idx.as_slice(), self.device)?, 0)?)
    }

    /// The next token of each of a step's `rows` from its row of `logits` (see
    /// [`step::choose_tokens`]), traced, timed and counted here for both loops.
    pub fn choose(
        &self,
        logits: &Tensor,
        rows: &[RowDraw],
        batch: &mut BatchStats,
        times: &mut PhaseTimes,
    ) -> Result<Vec<u32>, EngineError> {
        if let Some(trace) = self.logit_trace {
            let all: Vec<Vec<f32>> = logits.to_vec2()?;
            for (row, l) in rows.iter().zip(&all) {
                trace.record(&row.request.id, row.seed, row.generated, l);
            }
        }
        // NaN or infinite weights make NaN logits, from which the sampler still picks a
        // token (id 0): the answers would be noise scored as answers.
        if let Some(r) = timed(&mut times.choose_s, || non_finite_row(logits))? {
            let id = rows.get(r).map(|row| row.request.id.to_string());
            return Err(EngineError::Model(format!(
                "{} computed logits that are not finite (NaN or infinite) for request {}: \
                 its weights or config.json hold values it cannot run with; nothing of this \
                 step was kept",
                self.label,
                id.unwrap_or_default()
            )));
        }
        let draws: Vec<(Sampling, f64)> = rows
            .iter()
            .map(|row| (row.request.sampling, row.key.uniform(row.generated)))
            .collect();
        let mut choice = step::ChoiceStats::default();
        let next = timed(&mut times.choose_s, || {
            step::choose_tokens(logits, &draws, self.reads, &mut choice)
        })?;
        batch.logits_read_bytes += choice.transfer_bytes;
        Ok(next)
    }

    /// Test hook: a step of more than the hook's rows fails as a GPU out of memory
    /// does, so that the shrink-and-retry path runs on the CPU.
    pub fn simulated_out_of_memory(&self, rows: usize) -> Result<(), EngineError> {
        if self.simulated_oom_above.is_some_and(|limit| rows > limit) {
            return Err(EngineError::Tensor(candle_core::Error::Msg(
                "CUDA_ERROR_OUT_OF_MEMORY: out of memory (simulated)".into(),
            )));
        }
        Ok(())
    }

    /// One decode step: every row's `last` token after what `cache` holds; the logits
    /// (rows, vocab) stay on the device.
    pub fn decode_step(
        &self,
        last: Vec<u32>,
        cache: &mut KvCache,
        times: &mut PhaseTimes,
    ) -> Result<Tensor, EngineError> {
        let rows = last.len();
        let tokens = Tensor::from_vec(last, (rows, 1), self.device)?;
        Ok(timed(&mut times.forward_s, || {
            self.model.forward(&tokens, cache)
        })?)
    }

    /// Keeps only `rows` of the cache, in order.
    pub fn gather(
        &self,
        cache: &mut KvCache,
        rows: &[usize],
        times: &mut PhaseTimes,
    ) -> Result<(), EngineError> {
        Ok(timed(&mut times.cache_s, || cache.select(rows))?)
    }

    /// Writes a newcomer's prefilled cache over the finished row `at`; one refill.
    pub fn place(
        &self,
        cache: &mut KvCache,
        at: usize,
        newcomer: &KvCache,
        stats: &mut BatchStats,
        times: &mut PhaseTimes,
    ) -> Result<(), EngineError> {
        timed(&mut times.cache_s, || cache.place(at, newcomer, 0))?;
        stats.refills += 1;
        Ok(())
    }

    /// One copy of the rows `keep` of `running` and of each newcomer's prefilled cache,
    /// forked to its rows, into a new cache with room for `capacity` slots; one join.
    /// `running` is freed layer by layer as it is copied.
    pub fn join(
        &self,
        running: Option<(KvCache, &[usize])>,
        newcomers: &[(&KvCache, usize)],
        capacity: usize,
        stats: &mut BatchStats,
        times: &mut PhaseTimes,
    ) -> Result<KvCache, EngineError> {
        let forks: Vec<Vec<usize>> = newcomers.iter().map(|&(_, rows)| vec![0; rows]).collect();
        let mut parts: Vec<(JoinPart, &[usize])> = running
            .into_iter()
            .map(|(c, rows)| (JoinPart::Owned(c), rows))
            .collect();
        parts.extend(
            newcomers
                .iter()
                .zip(&forks)
                .map(|(&(c, _), f)| (JoinPart::Shared(c), f.as_slice())),
        );
        stats.joins += 1;
        Ok(timed(&mut times.cache_s, || {
            KvCache::join_rows(parts, capacity)
        })?)
    }
}

/// The first row of `logits` (rows, vocab) holding a NaN or an infinity: scanned in
/// place on the CPU; on a device reduced there (0 * x is 0 for a finite x and NaN
/// otherwise), one value per row crossing.
fn non_finite_row(logits: &Tensor) -> Result<Option<usize>, EngineError> {
    let (rows, vocab) = logits.dims2()?;
    let logits = logits.to_dtype(candle_core::DType::F32)?.contiguous()?;
    {
        let (storage, layout) = logits.storage_and_layout();
        if let candle_core::Storage::Cpu(cpu) = &*storage {
            let data = &cpu.as_slice::<f32>()?[layout.start_offset()..][..rows * vocab];
            return Ok(data
                .chunks(vocab.max(1))
                .position(|r| r.iter().any(|x| !x.is_finite())));
        }
    }
    let flags: Vec<f32> = logits
        .affine(0.0, 0.0)?
        .sum_keepdim(1)?
        .flatten_all()?
        .to_vec1()?;
    Ok(flags.iter().position(|x| !x.is_finite()))
}
