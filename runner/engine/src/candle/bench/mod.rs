//! Fixed-shape runs for `runner bench`: prefill and decode times, and the host-side
//! parts of a decode step (token choice, logits transfer, cache maintenance) measured
//! on any device.

pub mod mixed;

use crate::alloc_count::{self, AllocCount};
use crate::candle::choice::nucleus;
use crate::candle::choice::sampler::{self, StreamKey};
use crate::candle::choice::step::{self, ChoiceStats, Reads};
use crate::candle::runtime::workers;
use crate::candle::Engine;
use crate::peak_rss;
use crate::{EngineError, RequestId, Sampling};

/// The sampling `runner bench --sampling protocol` measures: the benchmark protocol's
/// (`runner_core::protocol::SAMPLING`, which the engine does not name; the binary's
/// tests check that the two agree).
pub const PROTOCOL_SAMPLING: Sampling = Sampling::TopP {
    temperature: 0.2,
    top_p: 0.9,
};
use candle_core::Tensor;
use rayon::prelude::*;
use std::time::Instant;

/// Wall-clock seconds of a benchmark run, the KV cache it ended with, and where the
/// decode steps spent their time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BenchTimes {
    pub prefill_s: f64,
    pub decode_s: f64,
    pub kv_bytes: usize,
    /// The process's peak resident bytes over the prefill and decode (where the kernel
    /// lets the mark be reset at the run's start; else since the process started), not
    /// counting the cache maintenance measured after them.
    pub peak_rss_bytes: Option<u64>,
    pub breakdown: BenchBreakdown,
}

/// The parts of the decode steps of one run.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct BenchBreakdown {
    /// Seconds inside the model's forward calls. On the CPU that is the computation; on
    /// a GPU it is the host's time to queue the kernels (the kernels' own time shows up
    /// in the transfer that waits for them).
    pub forward_s: f64,
    /// Token choice: transfers from the device and the sampler on the host.
    pub choice: ChoiceStats,
    /// Cache maintenance measured once at the end: keeping every other row, as when
    /// half of the rows have finished, with the used-slot gather and with the previous
    /// method (every buffer copied whole, then copied again to drop shared padding).
    pub select_s: f64,
    pub select_bytes: usize,
    pub select_whole_s: f64,
    /// Host heap allocations of the decode steps, from every thread (the forward
    /// calls' rayon workers included); `None` when the process does not count them.
    pub decode_allocs: Option<AllocCount>,
}

impl Engine {
    /// Prefills `prompts` together (within the prefill budget), then runs exactly
    /// `new_tokens` steps for every row with `sampling`, ignoring stop tokens so that
    /// every configuration does the same work.
    pub fn bench_run(
        &self,
        prompts: &[Vec<u32>],
        new_tokens: usize,
        sampling: Sampling,
    ) -> Result<BenchTimes, EngineError> {
        // Where a run decodes (`runtime::workers`).
        workers::on_worker(&self.device, || {
            self.bench_run_here(prompts, new_tokens, sampling)
        })
    }

    fn bench_run_here(
        &self,
        prompts: &[Vec<u32>],
        new_tokens: usize,
        sampling: Sampling,
    ) -> Result<BenchTimes, EngineError> {
        peak_rss::reset();
        let t0 = Instant::now();
        let (mut logits, mut cache) = self.prefill(prompts, new_tokens)?;
        self.device.synchronize()?;
        let prefill_s = t0.elapsed().as_secs_f64();
        let keys: Vec<StreamKey> = (0..prompts.len())
            .map(|r| StreamKey::new(r as u64, &RequestId::new("bench")))
            .collect();
        let mut breakdown = BenchBreakdown::default();
        let allocs_before = alloc_count::snapshot();
        let t1 = Instant::now();
        for position in 0..new_tokens {
            let draws: Vec<(Sampling, f64)> = keys
                .iter()
                .map(|k| (sampling, k.uniform(position)))
                .collect();
            let next = step::next_tokens(&logits, &draws, &mut breakdown.choice)?;
            if position + 1 == new_tokens {
                break;
            }
            let t = Instant::now();
            let tokens = Tensor::from_vec(next, (prompts.len(), 1), &self.device)?;
            logits = self.model.forward(&tokens, &mut cache)?;
            breakdown.forward_s += t.elapsed().as_secs_f64();
        }
        let decode_s = t1.elapsed().as_secs_f64();
        breakdown.decode_allocs = allocs_before
            .zip(alloc_count::snapshot())
            .map(|(before, after)| after.since(before));
        let kv_bytes = cache.bytes();
        let peak_rss_bytes = peak_rss::read();
        let half: Vec<usize> = (0..cache.rows()).step_by(2).collect();
        let mut gathered = cache.clone();
        let t = Instant::now();
        gathered.select(&half)?;
        self.device.synchronize()?;
        breakdown.select_s = t.elapsed().as_secs_f64();
        breakdown.select_bytes = gathered.selected_bytes();
        drop(gathered);
        let t = Instant::now();
        cache.select_copying_whole_buffers(&half)?;
        self.device.synchronize()?;
        breakdown.select_whole_s = t.elapsed().as_secs_f64();
        Ok(BenchTimes {
            prefill_s,
            decode_s,
            kv_bytes,
            peak_rss_bytes,
            breakdown,
        })
    }
}

/// Seconds per step of top-p token choice for `rows` rows of `vocab` synthetic logits,
/// by the full-vocabulary reference and by candidate sets on the host, then
/// from logits held by `device` read whole or in blocks, measured in alternating
/// rounds; and the share of draws the candidate set decided without the reference. Rows
/// run in parallel, as in the engine.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SamplerTimes {
    pub reference_s: f64,
    pub candidates_s: f64,
    pub decided: f64,
    /// Token choice from logits held by the bench's device: every row read whole (one
    /// copy from a device, in place on the CPU), against block reads
    /// ([`crate::candle::choice::readback`]): the whole of it, the host's part alone (on a GPU the block
    /// maxima and the gather are device work; on the CPU they are CPU work) and the
    /// bytes read back per step.
    pub whole_s: f64,
    pub blocks_s: f64,
    pub blocks_host_s: f64,
    pub blocks_bytes: usize,
}

/// Language-model-like logits: a broad body with the given spread and a few strong
/// tokens on top (real logits are more peaked still, which favours the candidate set).
pub fn synthetic_logits(rows: usize, vocab: usize, seed: u64) -> Vec<f32> {
    let key = StreamKey::new(seed, &RequestId::new("synthetic-logits"));
    let mut n = 0usize;
    let mut next = || {
        n += 1;
        key.uniform(n)
    };
    let mut out = Vec::with_capacity(rows * vocab);
    for r in 0..rows {
        let spread = 1.0 + (r % 4) as f64;
        let start = out.len();
        for _ in 0..vocab {
            let normal = (0..4).map(|_| next()).sum::<f64>() - 2.0;
            out.push((normal * spread) as f32);
        }
        for _ in 0..8 {
            let i = (next() * vocab as f64) as usize;
            out[start + i] = (12.0 + (next() - 0.5) * 6.0) as f32;
        }
    }
    out
}

pub fn sampler_bench(
    rows: usize,
    vocab: usize,
    steps: usize,
    sampling: Sampling,
    device: &candle_core::Device,
) -> Result<SamplerTimes, EngineError> {
    let logits = synthetic_logits(rows, vocab, 7);
    let on_device = Tensor::from_slice(&logits, (rows, vocab), device)?;
    device.synchronize()?;
    let key = StreamKey::new(3, &RequestId::new("sampler-bench"));
    let mut rounds = SamplerRounds::default();
    for step in 0..steps {
        let u = |r: usize| key.uniform(step * rows + r);
        rounds.run(&logits, &on_device, vocab, sampling, u)?;
    }
    if rounds.disagreed {
        return Err(EngineError::Model(
            "a way of choosing tokens disagreed with the reference sampler".into(),
        ));
    }
    Ok(SamplerTimes {
        reference_s: median(rounds.reference_s),
        candidates_s: median(rounds.candidates_s),
        decided: decided_share(&logits, (rows, vocab), sampling, &key),
        whole_s: median(rounds.whole_s),
        blocks_s: median(rounds.blocks_s),
        blocks_host_s: median(rounds.blocks_host_s),
        blocks_bytes: rounds.blocks_bytes,
    })
}

/// Seconds of each round of [`sampler_bench`] per way of choosing tokens, and whether
/// any way chose other tokens than the reference.
#[derive(Default)]
struct SamplerRounds {
    reference_s: Vec<f64>,
    candidates_s: Vec<f64>,
    whole_s: Vec<f64>,
    blocks_s: Vec<f64>,
    blocks_host_s: Vec<f64>,
    blocks_bytes: usize,
    disagreed: bool,
}

impl SamplerRounds {
    /// One round: every way chooses a token for each row of `logits` (held on the host,
    /// and as `on_device`) with row `r`'s draw `u(r)`.
    fn run(
        &mut self,
        logits: &[f32],
        on_device: &Tensor,
        vocab: usize,
        sampling: Sampling,
        u: impl Fn(usize) -> f64 + Sync,
    ) -> Result<(), EngineError> {
        let t = Instant::now();
        let a: Vec<u32> = logits
            .par_chunks(vocab)
            .enumerate()
            .map(|(r, l)| sampler::choose_reference(l, sampling, u(r)))
            .collect();
        self.reference_s.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let b: Vec<u32> = logits
            .par_chunks(vocab)
            .enumerate()
            .map(|(r, l)| sampler::choose(l, sampling, u(r)))
            .collect();
        self.candidates_s.push(t.elapsed().as_secs_f64());
        let draws: Vec<(Sampling, f64)> = (0..a.len()).map(|r| (sampling, u(r))).collect();
        let t = Instant::now();
        let c = step::choose_tokens(on_device, &draws, Reads::Whole, &mut ChoiceStats::default())?;
        self.whole_s.push(t.elapsed().as_secs_f64());
        let mut choice = ChoiceStats::default();
        let t = Instant::now();
        let d = step::choose_tokens(on_device, &draws, Reads::Blocks, &mut choice)?;
        self.blocks_s.push(t.elapsed().as_secs_f64());
        self.blocks_host_s.push(choice.sampler_s);
        self.blocks_bytes = self.blocks_bytes.max(choice.transfer_bytes);
        self.disagreed |= !(a == b && a == c && a == d);
        Ok(())
    }
}

/// The share of the rows of `logits` (rows, vocab) whose top-p draw the candidate set
/// decides without the reference (all of them when greedy).
fn decided_share(
    logits: &[f32],
    (rows, vocab): (usize, usize),
    sampling: Sampling,
    key: &StreamKey,
) -> f64 {
    let Sampling::TopP { temperature, top_p } = sampling else {
        return 1.0;
    };
    let hits = logits
        .chunks(vocab)
        .enumerate()
        .filter(|(r, l)| {
            nucleus::top_p_draw(l, temperature as f64, top_p as f64, key.uniform(*r))
                != nucleus::Draw::Reference
        })
        .count();
    hits as f64 / rows as f64
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}
