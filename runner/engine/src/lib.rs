//! The inference engine: what the runner asks of a model, and what it gets back.
//!
//! The runner and the scorer only see the [`Backend`] trait. The candle engine
//! ([`candle`]) is one implementation; baseline systems that answer without a network
//! implement the same trait. This crate names no suite: what a
//! request asks is a prompt, and what comes back is text and token ids.

pub mod activity;
// The binary's tools (the `tools` feature): the counting allocator `runner bench`
// installs, and the engine's benchmark harnesses.
#[cfg(any(test, feature = "tools"))]
pub mod alloc_count;
pub mod batch;
#[cfg(any(test, feature = "tools"))]
pub mod bench;
pub mod bounded;
pub mod candle;
pub mod digest;
pub mod finish;
pub mod folder_name;
pub mod id;
pub mod panel;
pub mod peak_rss;
pub mod process;
pub mod resolve;
pub mod served;

use serde::{Deserialize, Serialize};

/// The sampler keys its randomness on the request id, so it must be stable across runs
/// and batch layouts.
pub use crate::id::RequestId;

/// Who speaks a chat message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Message {
    pub role: Role,
    pub content: String,
}

/// What the model is asked. Chat messages go through the model's own chat template;
/// raw text is tokenized as it stands (no special tokens added).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Prompt {
    Chat(Vec<Message>),
    Raw(String),
}

impl Prompt {
    /// The prompt as a reader sees it: the chat turns' contents, or the raw text.
    pub fn plain_text(&self) -> String {
        match self {
            Prompt::Chat(turns) => turns
                .iter()
                .map(|m| m.content.as_str())
                .collect::<Vec<_>>()
                .join("\n\n"),
            Prompt::Raw(t) => t.clone(),
        }
    }
}

/// How the next token is chosen from the logits.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum Sampling {
    /// Highest logit; ties go to the lowest token id.
    Greedy,
    /// Temperature, then nucleus (top-p) over the full vocabulary.
    TopP { temperature: f32, top_p: f32 },
}

/// One prompt, decoded once per seed. The seeds of one request share one prefill.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    pub id: RequestId,
    pub prompt: Prompt,
    pub seeds: Vec<u64>,
    pub max_new_tokens: usize,
    pub sampling: Sampling,
}

pub use crate::finish::FinishReason;

/// Wall-clock seconds spent on a sample. Work is batched, so these are the times of the
/// batch steps the sample took part in, not exclusive costs.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct Timings {
    pub prefill_s: f64,
    pub decode_s: f64,
}

/// One decoded answer: a (request, seed) pair.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    pub request_id: RequestId,
    pub seed: u64,
    pub text: String,
    pub prompt_tokens: usize,
    /// Generated token ids, without the end-of-sequence token that stopped decoding.
    pub token_ids: Vec<u32>,
    /// The number of generated tokens as the backend counted them (a served model's
    /// `usage.completion_tokens`), where `token_ids` are not the model's own ids: a
    /// server may return none, and re-encoding the text need not give the same count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reported_tokens: Option<usize>,
    pub finish_reason: FinishReason,
    pub timings: Timings,
}

impl Sample {
    /// Tokens generated: the backend's own count where it gave one, else the ids.
    pub fn generated_tokens(&self) -> usize {
        self.reported_tokens.unwrap_or(self.token_ids.len())
    }
}

pub use crate::batch::BatchStats;

/// What a backend hands over while it runs (see [`Backend::generate_handing_over`]).
#[derive(Debug)]
pub enum Handover {
    /// A finished sample.
    Sample(Sample),
    /// A (request, seed) that cannot be answered however often it is asked (a served
    /// model's server refuses the prompt, or answers what cannot be read): kept as
    /// failed, with the reason, and asked again only when the user says so.
    Failed {
        request_id: RequestId,
        seed: u64,
        reason: String,
    },
    /// Nothing more is ready for now: what was handed over should be kept before the
    /// backend waits for more.
    Idle,
}

/// A backend ready to run, with what a run's manifest records of it.
pub struct Loaded {
    pub backend: Box<dyn Backend>,
    /// The name of the model's folder under `--out` and in reports.
    pub label: String,
    /// What defines the model's answers (part of the run's identity).
    pub identity: serde_json::Value,
    /// Where it runs (may differ between sessions of one run).
    pub context: serde_json::Value,
    /// Warnings to show once (the CPU fallback, a base model's plain-text prompts).
    pub warnings: Vec<String>,
}

/// A system that answers requests. Samples are handed to `on_sample` as soon as they are
/// finished (in no particular order), so the caller can journal them while others run.
pub trait Backend {
    /// A short description for the run manifest (model, revision, device, dtype).
    fn describe(&self) -> String;

    /// What bounds the memory a run takes, for the line it starts with (a local
    /// model's KV cache budget and row limit); None for a backend that holds none.
    fn memory_bounds(&self) -> Option<String> {
        None
    }

    /// Requests worth giving in one call: the runner journals at the end of a call that
    /// ends quickly, and within a call when the backend is idle or a second has passed
    /// (see `runner_core::run`), so this trades fsyncs against work lost to a crash.
    fn preferred_batch(&self) -> usize {
        64
    }

    fn generate_each(
        &mut self,
        requests: &[Request],
        on_sample: &mut dyn FnMut(Sample),
    ) -> Result<(), EngineError>;

    /// [`Backend::generate_each`], with failed samples and pauses handed over as well;
    /// by default, samples only.
    fn generate_handing_over(
        &mut self,
        requests: &[Request],
        on: &mut dyn FnMut(Handover),
    ) -> Result<(), EngineError> {
        self.generate_each(requests, &mut |s| on(Handover::Sample(s)))
    }

    /// How full the decode batch was kept since the backend was made; None for backends
    /// that do not decode in batches of their own.
    fn batch_stats(&self) -> Option<BatchStats> {
        None
    }

    /// Counters of the work in progress (prompt tokens prefilled, rows decoding, tokens
    /// generated) that another thread may read while a call runs; None for a backend
    /// that keeps none.
    fn activity(&self) -> Option<std::sync::Arc<activity::Activity>> {
        None
    }

    /// Where a first Ctrl-C says to start no new work ([`activity::Activity::stop_admitting`]):
    /// the call under way then returns once its rows (or requests) in flight are done.
    /// By default the backend's [`Backend::activity`]; None for a backend whose calls end
    /// at once (a baseline), which an interrupt stops outright.
    fn admission(&self) -> Option<std::sync::Arc<activity::Activity>> {
        self.activity()
    }

    /// All samples of `requests`, ordered by request then seed.
    fn generate(&mut self, requests: &[Request]) -> Result<Vec<Sample>, EngineError> {
        let mut out = Vec::new();
        self.generate_each(requests, &mut |s| out.push(s))?;
        let order = |s: &Sample| {
            let r = requests
                .iter()
                .position(|r| r.id == s.request_id)
                .unwrap_or(usize::MAX);
            let k = requests
                .get(r)
                .and_then(|r| r.seeds.iter().position(|&x| x == s.seed))
                .unwrap_or(usize::MAX);
            (r, k)
        };
        out.sort_by_key(order);
        Ok(out)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// Without the backtrace candle attaches under `RUST_BACKTRACE` (see `From`).
    #[error("tensor computation failed: {0}")]
    Tensor(::candle_core::Error),
    #[error("cannot read {path}: {source}")]
    Io {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
    #[error("invalid {what} in {path}: {message}")]
    BadFile {
        what: &'static str,
        path: std::path::PathBuf,
        message: String,
    },
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    #[error("chat template: {0}")]
    Template(String),
    #[error("model {0}")]
    Model(String),
    /// What was asked does not fit the model (its context), said with the remedy.
    #[error("{0}")]
    Limit(String),
    #[error("model not available: {0}")]
    NotAvailable(String),
    /// A served model's server did not answer through the retry window.
    #[error("{0}")]
    ServerDown(String),
    #[error("device: {0}")]
    Device(String),
    /// The operating system gave no thread for the work (a process or cgroup limit).
    #[error("{0}")]
    Threads(String),
    /// Refused before loading: the model would not fit.
    #[error("{0}")]
    Memory(String),
    #[error("invalid request {id}: {message}")]
    InvalidRequest { id: String, message: String },
}

/// candle prints the backtrace it captured under `RUST_BACKTRACE` as part of the
/// error's text, so every load error of a user's file became a 20-line stack dump. The
/// message is the error; a backtrace is for the runner's own bugs (panics).
impl From<::candle_core::Error> for EngineError {
    fn from(e: ::candle_core::Error) -> Self {
        EngineError::Tensor(without_backtrace(e))
    }
}

/// `e` with every backtrace candle attached taken out, its messages and context kept.
pub fn without_backtrace(e: ::candle_core::Error) -> ::candle_core::Error {
    use ::candle_core::Error;
    match e {
        Error::WithBacktrace { inner, .. } => without_backtrace(*inner),
        Error::Context { inner, context } => Error::Context {
            inner: Box::new(without_backtrace(*inner)),
            context,
        },
        Error::WithPath { inner, path } => Error::WithPath {
            inner: Box::new(without_backtrace(*inner)),
            path,
        },
        e => e,
    }
}
