//! Where a scheduler's wall time goes, summed over a run: the breakdown that
//! `runner bench --workload mixed` prints beside throughput.

use serde::Serialize;
use std::time::Instant;

/// Seconds per phase of decoding. On an asynchronous device (CUDA) a forward pass only
/// queues kernels: the wait for them falls in `choose_s`, where the logits are read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct PhaseTimes {
    /// Prompt forward passes.
    pub prefill_s: f64,
    /// Decode forward passes.
    pub forward_s: f64,
    /// Token choice: logits to the host and the sampler.
    pub choose_s: f64,
    /// KV cache copies: forks per seed, newcomers joining, finished rows leaving.
    pub cache_s: f64,
    /// Finished samples: detokenizing and handing them over.
    pub hand_over_s: f64,
}

impl PhaseTimes {
    /// The time spent between two readings of running totals.
    pub fn since(&self, earlier: &PhaseTimes) -> PhaseTimes {
        PhaseTimes {
            prefill_s: self.prefill_s - earlier.prefill_s,
            forward_s: self.forward_s - earlier.forward_s,
            choose_s: self.choose_s - earlier.choose_s,
            cache_s: self.cache_s - earlier.cache_s,
            hand_over_s: self.hand_over_s - earlier.hand_over_s,
        }
    }
}

/// Runs `f` and adds its wall time to `slot`.
pub(crate) fn timed<T>(slot: &mut f64, f: impl FnOnce() -> T) -> T {
    let t = Instant::now();
    let out = f();
    *slot += t.elapsed().as_secs_f64();
    out
}
