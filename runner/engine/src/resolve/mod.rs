//! The one resolution of `--model` into a backend: a model behind an OpenAI-compatible
//! server (`--endpoint`, or a panel entry with an `endpoint`), else a local model of
//! the embedded engine (a panel name, a model folder or a GGUF file: `candle::load::open`).
//! The workload's baselines are the caller's: a served name is asked of its server
//! before them, a local one after them ([`server`] says which, loading nothing).

mod served;

pub use served::{ApiKey, ServedSettings, Server};

use crate::candle::load::open::{self as local, LocalOptions};
use crate::served::client::Traffic;
use crate::{EngineError, Loaded, Prompt, Sampling};
use std::sync::Arc;

/// What a run asks of its model: checked against a local model's context, recorded in
/// a served model's identity.
pub struct Asked<'a> {
    pub prompts: &'a [&'a Prompt],
    /// The most new tokens a request asks for.
    pub max_new_tokens: usize,
    /// How the requests sample (the first request's; a workload samples alike).
    pub sampling: Sampling,
}

/// How `--model` is loaded, whichever kind it names.
pub struct ModelOptions<'a> {
    pub local: LocalOptions<'a>,
    pub served: ServedSettings,
}

/// A model, loaded, and the request counters of a served one (for a progress bar).
pub struct Opened {
    pub loaded: Loaded,
    pub traffic: Option<Arc<Traffic>>,
}

/// Why `--model` did not load: the engine's error, or a served model's settings or
/// server, said as the command line's flags name them.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    #[error(transparent)]
    Engine(#[from] EngineError),
    /// A flag that does not fit the model it is given with.
    #[error("{0}")]
    Settings(String),
    #[error("loading the tokenizer for completions mode")]
    Tokenizer(#[source] EngineError),
    /// `endpoint` as shown: redacted.
    #[error("connecting to {endpoint}")]
    Connect {
        endpoint: String,
        #[source]
        source: EngineError,
    },
}

/// The server that answers `model`, if one does: `--endpoint`, else the panel entry's
/// `endpoint`. Nothing is loaded or asked; served-only settings given for a local
/// model are refused here, before a baseline or a local model is looked up.
pub fn server(model: &str, opts: &ModelOptions) -> Result<Option<Server>, ResolveError> {
    served::server(model, &opts.served, opts.local.panel)
}

/// `model` loaded for `asked`: from its server when [`server`] names one, else as a
/// local model; `None` when it names neither.
pub fn open(
    model: &str,
    asked: &Asked,
    opts: &ModelOptions,
) -> Result<Option<Opened>, ResolveError> {
    if let Some(server) = server(model, opts)? {
        let (loaded, traffic) = served::connect(&server, asked, &opts.served, opts.local.panel)?;
        return Ok(Some(Opened {
            loaded,
            traffic: Some(traffic),
        }));
    }
    let loaded = local::open(model, asked.prompts, asked.max_new_tokens, &opts.local)?;
    Ok(loaded.map(|loaded| Opened {
        loaded,
        traffic: None,
    }))
}

#[cfg(test)]
mod tests;
