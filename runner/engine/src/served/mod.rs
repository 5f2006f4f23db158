//! A model behind an OpenAI-compatible server (vLLM, SGLang, llama.cpp, transformers'
//! `serve`) as a [`Backend`]: one HTTP request per (prompt, seed), a bounded number in
//! flight, each retried through restarts and overload (see [`client`]).
//!
//! Samples are handed over as they finish, so the run loop journals what finished even
//! when a later request gives up; rerunning the command asks only for the rest.

pub mod client;
pub mod identity;
pub mod prompt;
pub mod protocol;

use crate::{Backend, EngineError, Request, Sample, Timings};
use client::{CallError, Client, RetryPolicy, Traffic};
use prompt::LocalPrompts;
use protocol::{BodySpec, Dialect, Payload, PromptMode};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Instant;

/// Requests in flight when `--concurrency` is not given: enough to keep a continuous-
/// batching server busy without queueing the whole plan at once.
pub const DEFAULT_CONCURRENCY: usize = 32;

pub struct ServedOptions {
    /// The API root, e.g. `http://host:8000/v1`.
    pub endpoint: String,
    /// The model's name on the server.
    pub model: String,
    /// Sent as a bearer token; never written anywhere.
    pub api_key: Option<String>,
    /// Present: completions mode with the runner's rendering. Absent: chat mode.
    pub prompts: Option<LocalPrompts>,
    pub concurrency: usize,
    /// What the user declares: the server's answers do not depend on its batching.
    pub server_deterministic: bool,
    pub policy: RetryPolicy,
}

pub struct ServedBackend {
    client: Client,
    model: String,
    prompts: Option<LocalPrompts>,
    mode: PromptMode,
    dialect: Dialect,
    concurrency: usize,
    server_deterministic: bool,
    /// The server's `/models` entry for the model, less what changes between calls.
    server_model: Value,
}

impl ServedBackend {
    /// Checks that the server serves `model` and finds which way of overriding the
    /// sampling defaults it accepts (a one-token request per try).
    pub fn connect(opts: ServedOptions) -> Result<ServedBackend, EngineError> {
        let client = Client::new(&opts.endpoint, opts.api_key, opts.policy);
        let models = client.get("/models").map_err(|e| unavailable(&e))?;
        let server_model = identity::model_entry(&models, &opts.model)
            .map_err(|m| EngineError::NotAvailable(format!("{}: {m}", client.url("/models"))))?;
        let mode = match opts.prompts {
            Some(_) => PromptMode::Completions,
            None => PromptMode::Chat,
        };
        let probe = match &opts.prompts {
            Some(p) => p.payload("Hello"),
            None => Payload::Chat(vec![crate::Message {
                role: crate::Role::User,
                content: "Hello".into(),
            }]),
        };
        let mut refusals = Vec::new();
        let mut dialect = None;
        for d in Dialect::ALL {
            let spec = BodySpec {
                sampling: crate::Sampling::PROTOCOL,
                max_tokens: 1,
                dialect: d,
            };
            let body = protocol::body(&opts.model, &probe, &spec, Some(0));
            match client.post_checked(mode.path(), &body, protocol::parse_answer) {
                Ok(_) => {
                    dialect = Some(d);
                    break;
                }
                Err(CallError::Refused { status, message }) => {
                    refusals.push(format!("{}: HTTP {status}: {message}", d.name()))
                }
                Err(e) => return Err(unavailable(&e)),
            }
        }
        let Some(dialect) = dialect else {
            return Err(EngineError::NotAvailable(format!(
                "{} refused every form of request for model {:?}: {}",
                client.url(mode.path()),
                opts.model,
                refusals.join("; ")
            )));
        };
        Ok(ServedBackend {
            client,
            model: opts.model,
            prompts: opts.prompts,
            mode,
            dialect,
            concurrency: opts.concurrency.max(1),
            server_deterministic: opts.server_deterministic,
            server_model,
        })
    }

    /// Requests in flight, retries and prompt-token mismatches so far.
    pub fn traffic(&self) -> Arc<Traffic> {
        self.client.traffic.clone()
    }

    pub fn mode(&self) -> PromptMode {
        self.mode
    }

    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// Where it runs: context, not identity (a resumed run may use another host).
    pub fn context(&self) -> Value {
        json!({
            "endpoint": self.client.url(""),
            "concurrency": self.concurrency,
            "backend": self.describe(),
        })
    }

    fn one(
        &self,
        r: &Request,
        seed: u64,
        payload: &Payload,
        local: Option<usize>,
    ) -> Result<Sample, EngineError> {
        let spec = BodySpec {
            sampling: r.sampling,
            max_tokens: r.max_new_tokens,
            dialect: self.dialect,
        };
        let body = protocol::body(
            &self.model,
            payload,
            &spec,
            Some(protocol::server_seed(r.id.as_str(), seed)),
        );
        let started = Instant::now();
        let answer = self
            .client
            .post_checked(self.mode.path(), &body, protocol::parse_answer)
            .map_err(|e| match e {
                CallError::Refused { .. } => EngineError::InvalidRequest {
                    id: r.id.to_string(),
                    message: e.to_string(),
                },
                other => unavailable(&other),
            })?;
        if let (Some(l), Some(s)) = (local, answer.prompt_tokens) {
            if l != s {
                self.client
                    .traffic
                    .prompt_token_mismatches
                    .fetch_add(1, Ordering::Relaxed);
            }
        }
        let token_ids = match (answer.token_ids, &self.prompts) {
            (Some(ids), _) => ids,
            (None, Some(p)) => p.encode(&answer.text)?,
            (None, None) => Vec::new(),
        };
        Ok(Sample {
            request_id: r.id.clone(),
            seed,
            text: answer.text,
            prompt_tokens: answer.prompt_tokens.or(local).unwrap_or(0),
            token_ids,
            reported_tokens: answer.completion_tokens,
            finish_reason: answer.finish_reason,
            timings: Timings {
                prefill_s: 0.0,
                decode_s: started.elapsed().as_secs_f64(),
            },
        })
    }

    fn payload(&self, r: &Request) -> Result<(Payload, Option<usize>), EngineError> {
        match (&self.prompts, &r.prompt) {
            (Some(p), prompt) => {
                let (text, ids) = p.render(prompt)?;
                Ok((p.payload(&text), Some(ids.len())))
            }
            (None, crate::Prompt::Chat(m)) => Ok((Payload::Chat(m.clone()), None)),
            (None, crate::Prompt::Raw(_)) => Err(EngineError::InvalidRequest {
                id: r.id.to_string(),
                message: "a raw-text prompt needs completions mode: give --tokenizer".into(),
            }),
        }
    }
}

fn unavailable(e: &CallError) -> EngineError {
    match e {
        CallError::Refused { .. } => EngineError::NotAvailable(e.to_string()),
        CallError::Unavailable { .. } => EngineError::NotAvailable(format!(
            "{e}. The run stops here: every sample finished so far is journaled, and rerunning \
             the same command resumes once the server is back"
        )),
    }
}

impl Backend for ServedBackend {
    fn describe(&self) -> String {
        format!(
            "served model {} at {} ({} mode, {} in flight)",
            self.model,
            self.client.url(""),
            self.mode.name(),
            self.concurrency
        )
    }

    fn preferred_batch(&self) -> usize {
        (self.concurrency * 4).max(16)
    }

    fn generate_each(
        &mut self,
        requests: &[Request],
        on_sample: &mut dyn FnMut(Sample),
    ) -> Result<(), EngineError> {
        let payloads = requests
            .iter()
            .map(|r| self.payload(r))
            .collect::<Result<Vec<_>, _>>()?;
        let work: Vec<(usize, u64)> = requests
            .iter()
            .enumerate()
            .flat_map(|(i, r)| r.seeds.iter().map(move |&s| (i, s)))
            .collect();
        let next = AtomicUsize::new(0);
        let stop = AtomicBool::new(false);
        let this = &*self;
        std::thread::scope(|scope| {
            let (tx, rx) = mpsc::channel::<Result<Sample, EngineError>>();
            for _ in 0..this.concurrency.min(work.len()) {
                let tx = tx.clone();
                let (next, stop, work, payloads) = (&next, &stop, &work, &payloads);
                scope.spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        let Some(&(i, seed)) = work.get(next.fetch_add(1, Ordering::Relaxed))
                        else {
                            break;
                        };
                        let (payload, local) = &payloads[i];
                        let result = this.one(&requests[i], seed, payload, *local);
                        if result.is_err() {
                            // Requests already in flight finish; no new ones start.
                            stop.store(true, Ordering::Relaxed);
                        }
                        if tx.send(result).is_err() {
                            break;
                        }
                    }
                });
            }
            drop(tx);
            let mut first_error = None;
            for result in rx {
                match result {
                    Ok(sample) => on_sample(sample),
                    Err(e) => {
                        first_error.get_or_insert(e);
                    }
                }
            }
            first_error.map_or(Ok(()), Err)
        })
    }
}
