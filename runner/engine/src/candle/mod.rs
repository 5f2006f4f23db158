//! The candle engine: model files per architecture, an engine-owned batched KV cache,
//! a scheduler that prefills each prompt once and forks it per seed, and the sampler.

// `runner bench`'s fixed-shape runs and the GPU check's memory plan: the binary's tools
// (the `tools` feature), compiled for the engine's unit tests too.
#[cfg(any(test, feature = "tools"))]
pub mod bench;
pub mod chat_template;
pub mod checkpoint;
pub mod choice;
/// Public for the kernel benchmarks (`cargo bench -p runner-engine`), not an interface.
#[doc(hidden)]
pub mod cpu;
#[cfg(any(test, feature = "fixture"))]
pub mod fixture;
pub mod gguf;
mod layers;
pub mod load;
#[cfg(any(test, feature = "tools"))]
pub mod memory_plan;
pub mod models;
pub mod runtime;
pub mod weights;

use crate::{BatchStats, EngineError, Prompt};
#[cfg(any(test, feature = "tools"))]
pub use bench::{BenchBreakdown, BenchTimes};
use candle_core::{DType, Device, Tensor};
use chat_template::ChatTemplate;
pub use runtime::device::{select_device, DeviceChoice};
use runtime::kv_cache::KvCache;
pub use runtime::model_runner::LogitTrace;
use runtime::model_runner::ModelRunner;
pub use runtime::phases::PhaseTimes;
use runtime::scheduler::Policy;
pub use runtime::scheduler::{BatchLimits, Batching, Refill, ROW_CAP};

/// A decoder-only model that runs one step over a batch with an external cache.
pub trait CausalLm: Send + Sync {
    fn layers(&self) -> usize;

    /// Feeds `tokens` (rows, new) after what `cache` holds, appends their keys and
    /// values, and returns the logits of each row's last new token (rows, vocab) in f32.
    fn forward(&self, tokens: &Tensor, cache: &mut KvCache) -> candle_core::Result<Tensor>;
}

/// A loaded model with its tokenizer and chat template, ready to decode.
pub struct Engine {
    model: Box<dyn CausalLm>,
    /// Keys and values of one token in every layer.
    kv_bytes_per_token: usize,
    /// Test hook: fail like a GPU out of memory when a group has more rows than this.
    simulated_oom_above: Option<usize>,
    /// Test hook: a digest of every row's logits at every step (see [`LogitTrace`]).
    logit_trace: Option<LogitTrace>,
    /// Test hook: choose tokens as for logits on a device, from block reads.
    block_reads: bool,
    encoder: crate::candle::load::encoder::PromptEncoder,
    eos: Vec<u32>,
    device: Device,
    dtype: DType,
    /// What the key/value cache holds (`--kv-cache`).
    kv_dtype: DType,
    weights: crate::candle::weights::WeightFormat,
    limits: BatchLimits,
    batching: Batching,
    refill: Refill,
    /// Running totals of the decode batch's fill, for [`crate::Backend::batch_stats`].
    batch_stats: BatchStats,
    /// Running totals of where decoding's wall time went, for `runner bench`.
    phase_times: PhaseTimes,
    /// The work in progress, for a progress line between samples.
    activity: std::sync::Arc<crate::activity::Activity>,
    label: String,
}

impl Engine {
    pub fn with_limits(mut self, limits: BatchLimits) -> Self {
        self.limits = limits;
        self
    }

    pub fn limits(&self) -> BatchLimits {
        self.limits
    }

    /// Continuous batching is the engine's way; static groups remain only as the
    /// benchmark's baseline. (The scheduler itself, which decides what runs in each
    /// step, is `runtime::scheduler::Policy`.)
    pub fn with_batching(mut self, batching: Batching) -> Self {
        self.batching = batching;
        self
    }

    pub fn batching(&self) -> Batching {
        self.batching
    }

    /// How finished rows' places are refilled (in place by default). On the CPU both
    /// ways give the same tokens and logit bits (rows are batch-invariant).
    pub fn with_refill(mut self, refill: Refill) -> Self {
        self.refill = refill;
        self
    }

    pub fn refill(&self) -> Refill {
        self.refill
    }

    /// Rows of `tokens_per_row` tokens (prompt and new) decoded together at most: as
    /// many as the KV budget holds, within the row limit (`--max-batch` when given).
    pub fn row_limit(&self, tokens_per_row: usize) -> usize {
        self.policy().row_limit(tokens_per_row)
    }

    /// The model's layers.
    pub fn layers(&self) -> usize {
        self.model.layers()
    }

    pub fn kv_bytes_per_token(&self) -> usize {
        self.kv_bytes_per_token
    }

    /// Test hook: every group of more than `rows` rows fails after its first decode
    /// step as a GPU out of memory does, so that the shrink-and-retry path runs on
    /// the CPU.
    #[doc(hidden)]
    pub fn simulate_out_of_memory_above(mut self, rows: usize) -> Self {
        self.simulated_oom_above = Some(rows);
        self
    }

    /// Test hook: tokens are chosen as they are when the logits are on a device, from
    /// the blocks of logits that can hold them ([`choice::step::Reads::Blocks`]), on any
    /// device.
    #[doc(hidden)]
    pub fn read_logits_in_blocks(mut self) -> Self {
        self.block_reads = true;
        self
    }

    /// Test hook: these tokens end a sequence too (an end token made likely gives the
    /// early stops that tests of batching need).
    #[doc(hidden)]
    pub fn declare_eos(mut self, ids: &[u32]) -> Self {
        self.eos.extend_from_slice(ids);
        self.eos.sort_unstable();
        self.eos.dedup();
        self
    }

    /// Test hook: records a digest of the bits of every row's logits at every decode
    /// step, read back with [`Engine::logit_digests`].
    #[doc(hidden)]
    pub fn trace_logits(mut self) -> Self {
        self.logit_trace = Some(LogitTrace::default());
        self
    }

    /// Per (request, seed): one digest of the logits bits for each token chosen.
    #[doc(hidden)]
    pub fn logit_digests(&self) -> std::collections::HashMap<(String, u64), Vec<u64>> {
        self.logit_trace
            .as_ref()
            .map(LogitTrace::snapshot)
            .unwrap_or_default()
    }

    /// Token ids the tokenizer knows, special tokens included.
    pub fn vocab_size(&self) -> usize {
        self.encoder.vocab_size()
    }

    pub fn eos_ids(&self) -> &[u32] {
        &self.eos
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }

    /// The dtype the key/value cache holds keys and values in.
    pub fn kv_dtype(&self) -> DType {
        self.kv_dtype
    }

    /// The format the linear layers' weights are held in.
    pub fn weight_format(&self) -> crate::candle::weights::WeightFormat {
        self.weights
    }

    pub fn template(&self) -> &ChatTemplate {
        self.encoder.template()
    }

    /// The token ids of a prompt (see [`crate::candle::load::encoder::PromptEncoder`]).
    pub fn encode(&self, prompt: &Prompt) -> Result<Vec<u32>, EngineError> {
        self.encoder.encode(prompt)
    }

    pub fn decode(&self, ids: &[u32]) -> Result<String, EngineError> {
        self.encoder.decode(ids)
    }

    /// Prompts to token ids and back, as this engine encodes them.
    pub fn encoder(&self) -> &crate::candle::load::encoder::PromptEncoder {
        &self.encoder
    }

    /// Logits of the last prompt token for each prompt, prefilled together with left
    /// padding; used by parity and batch-invariance tests.
    pub fn prompt_logits(&self, prompts: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, EngineError> {
        let (logits, _) = self.prefill(prompts, 0)?;
        Ok(logits.to_vec2()?)
    }

    /// The scheduler's policy under this engine's limits and way of refilling.
    pub(crate) fn policy(&self) -> Policy {
        Policy {
            limits: self.limits,
            kv_bytes_per_token: self.kv_bytes_per_token,
            refill: self.refill,
            layers: self.model.layers(),
        }
    }

    /// Prefills prompts in the groups the scheduler makes within the token budget and
    /// joins their caches, with room for `room` slots after the longest prompt; the
    /// logits (prompts, vocab) stay on the device.
    pub(crate) fn prefill(
        &self,
        prompts: &[Vec<u32>],
        room: usize,
    ) -> Result<(Tensor, KvCache), EngineError> {
        let lens: Vec<usize> = prompts.iter().map(Vec::len).collect();
        let groups = self.policy().prefill_groups(&lens);
        ModelRunner::new(self).prefill(prompts, &groups, room)
    }
}
