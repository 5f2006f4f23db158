//! The mixed-length serving workload of `runner bench --workload mixed`: continuous
//! batching against static groups on the same requests, same engine, alternated.

use crate::candle::choice::sampler::StreamKey;
use crate::candle::runtime::phases::PhaseTimes;
use crate::candle::{Batching, Engine, Refill};
use crate::{Backend, EngineError, Prompt, Request, RequestId};
use serde::Serialize;
use std::time::Instant;

/// One pass of a workload under one scheduler.
#[derive(Debug, Clone, Serialize)]
pub struct WorkloadRun {
    pub scheduler: Batching,
    /// How finished rows' places were refilled (continuous batching only).
    pub refill: Option<Refill>,
    /// Rows decoded together at most (the KV budget may allow fewer).
    pub max_rows: usize,
    pub requests: usize,
    pub samples: usize,
    pub generated_tokens: usize,
    pub seconds: f64,
    pub samples_per_s: f64,
    pub tokens_per_s: f64,
    /// Rows decoded per row-step offered (see [`crate::BatchStats`]).
    pub utilization: f64,
    pub steps: usize,
    pub row_steps: usize,
    /// Times newcomers joined a running batch (each a copy of the batch's KV cache).
    pub joins: usize,
    /// Newcomers written over a finished row's place (each a copy of that row alone).
    pub refills: usize,
    /// Logits read back to the host per decode step (none on the CPU).
    pub logits_read_kib_per_step: f64,
    /// Where the seconds went.
    #[serde(flatten)]
    pub phases: PhaseTimes,
}

const WORDS: [&str; 16] = [
    "the",
    "witness",
    "saw",
    "a",
    "red",
    "car",
    "probability",
    "of",
    "rain",
    "is",
    "0.84",
    "because",
    "evidence",
    "belief",
    "prior",
    "agent",
];

/// `requests` single-seed requests with prompts of 40 to 400 words and length caps
/// drawn from a lognormal with median `longest / 4` new tokens, clamped to
/// 16..=`longest` (256: median 64; the protocol's 512: median 128), as answers of a
/// real suite vary; `seed` fixes the draw, and the same draw scales with `longest`.
pub fn mixed_workload(requests: usize, longest: usize, seed: u64) -> Vec<Request> {
    let longest = longest.max(16) as f64;
    let key = StreamKey::new(seed, &RequestId::new("mixed-workload"));
    let mut n = 0usize;
    let mut uniform = || {
        n += 1;
        key.uniform(n)
    };
    (0..requests)
        .map(|i| {
            // Irwin-Hall: the sum of 12 uniforms less 6 is close to a standard normal.
            let normal: f64 = (0..12).map(|_| uniform()).sum::<f64>() - 6.0;
            let cap = ((longest / 4.0).ln() + 0.8 * normal)
                .exp()
                .round()
                .clamp(16.0, longest) as usize;
            let words = 40 + (uniform() * 360.0) as usize;
            let text: Vec<&str> = (0..words)
                .map(|_| WORDS[(uniform() * WORDS.len() as f64) as usize % WORDS.len()])
                .collect();
            Request {
                id: RequestId::new(format!("mixed-{i}")),
                prompt: Prompt::Raw(text.join(" ")),
                seeds: vec![1],
                max_new_tokens: cap,
                sampling: super::PROTOCOL_SAMPLING,
            }
        })
        .collect()
}

impl Engine {
    /// Decodes `requests` under `scheduler` (refilling as `refill` says, or as the
    /// engine does) and reports throughput and batch fill.
    pub fn bench_workload(
        &mut self,
        requests: &[Request],
        scheduler: Batching,
        refill: Option<Refill>,
    ) -> Result<WorkloadRun, EngineError> {
        let saved = (self.batching, self.refill);
        self.batching = scheduler;
        self.refill = refill.unwrap_or(self.refill);
        let used = (scheduler == Batching::Continuous).then_some(self.refill);
        let before = self.batch_stats;
        let times_before = self.phase_times;
        let (mut samples, mut tokens) = (0, 0);
        let t = Instant::now();
        let result = self.generate_each(requests, &mut |s| {
            samples += 1;
            tokens += s.generated_tokens();
        });
        let seconds = t.elapsed().as_secs_f64();
        (self.batching, self.refill) = saved;
        result?;
        let stats = self.batch_stats.since(&before);
        Ok(WorkloadRun {
            scheduler,
            refill: used,
            max_rows: self.limits.max_rows,
            requests: requests.len(),
            samples,
            generated_tokens: tokens,
            seconds,
            samples_per_s: samples as f64 / seconds,
            tokens_per_s: tokens as f64 / seconds,
            utilization: stats.utilization().unwrap_or(0.0),
            steps: stats.steps,
            row_steps: stats.row_steps,
            joins: stats.joins,
            refills: stats.refills,
            logits_read_kib_per_step: stats.logits_read_bytes as f64
                / 1024.0
                / stats.steps.max(1) as f64,
            phases: self.phase_times.since(&times_before),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::mixed_workload;

    fn caps(longest: usize) -> Vec<usize> {
        let mut c: Vec<usize> = mixed_workload(400, longest, 7)
            .iter()
            .map(|r| r.max_new_tokens)
            .collect();
        c.sort_unstable();
        c
    }

    #[test]
    fn length_caps_spread_from_a_few_dozen_tokens_to_the_longest_cap() {
        for longest in [256, 512] {
            let c = caps(longest);
            let median = c[c.len() / 2];
            assert!(
                c[0] >= 16 && *c.last().unwrap() <= longest,
                "{longest}: {c:?}"
            );
            assert!(
                (longest / 5..=longest / 3).contains(&median),
                "median {median} for longest {longest}"
            );
            assert!(
                c.iter().filter(|&&x| x < 48).count() >= 20,
                "{longest}: {c:?}"
            );
            assert!(
                c.iter().filter(|&&x| x == longest).count() >= 2,
                "{longest}: {c:?}"
            );
        }
        // The same draw, scaled: a longer longest cap lengthens every request's cap.
        let (short, long) = (caps(256), caps(512));
        assert!(short.iter().zip(&long).all(|(s, l)| l >= s));
    }
}
