//! A model behind an OpenAI-compatible server (vLLM, SGLang, llama.cpp, transformers'
//! `serve`) as a [`Backend`]: one HTTP request per (prompt, seed), a bounded number in
//! flight, each retried through restarts and overload (see [`client`]).
//!
//! Samples are handed over as they finish, and the backend says when nothing more is
//! ready, so the run loop journals each finished sample at once even while slower
//! requests hang; rerunning the command asks only for the rest. A sample whose prompt
//! the server refuses (HTTP 400, 413, 422) or whose answer can never be read is handed
//! over as failed, with the reason, instead of stopping the run.

pub mod client;
pub mod identity;
pub mod prompt;
pub mod protocol;
pub mod traffic;
pub mod wire;

use crate::{Backend, EngineError, Handover, Request, RequestId, Sample, Timings};
use client::{CallError, Client, RetryPolicy, Traffic};
use prompt::LocalPrompts;
use protocol::{BodySpec, Dialect, Payload, PromptMode};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, TryRecvError};
use std::sync::Arc;
use std::time::Instant;

/// Failed samples in a row that stop the run: then the server, not the prompts, is
/// broken (every answer an error page, say).
pub const FAILURES_IN_A_ROW: usize = 8;

/// What one (request, seed) came to, short of a sample.
enum Miss {
    /// This sample cannot be had; the others can.
    Failed(String),
    /// The run cannot go on (the server is gone, the key refused).
    Stop(EngineError),
}

/// The stack of a request thread: it only waits on the network and parses JSON, so a
/// thousand of them need not reserve 2 MiB each.
const WORKER_STACK: usize = 512 << 10;

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
    /// Its admitting flag only: a first Ctrl-C lets the requests in flight finish.
    admission: Arc<crate::activity::Activity>,
}

impl ServedBackend {
    /// Checks that the server serves `model` and finds which way of overriding the
    /// sampling defaults it accepts (a one-token request per try).
    pub fn connect(opts: ServedOptions) -> Result<ServedBackend, EngineError> {
        ServedBackend::connect_with(opts, Arc::default())
    }

    /// Like [`ServedBackend::connect`], counting into `traffic` from the first request
    /// on, so that a caller can say at once that the server does not answer.
    pub fn connect_with(
        opts: ServedOptions,
        traffic: Arc<Traffic>,
    ) -> Result<ServedBackend, EngineError> {
        let client = Client::with_traffic(&opts.endpoint, opts.api_key, opts.policy, traffic);
        let models = client.get("/models").map_err(|e| match e {
            CallError::Unavailable { .. } => EngineError::ServerDown(format!(
                "{e}. Check that the server is running and that the endpoint is its API root \
                 (e.g. http://host:8000/v1); --retry-for sets how long to keep trying ({} s \
                 this time)",
                client.policy.give_up_after.as_secs()
            )),
            CallError::NothingThere { .. } => EngineError::ServerDown(e.to_string()),
            CallError::Refused { status: 404, .. } => {
                EngineError::NotAvailable(format!("{e}. {}", api_root_hint(&client)))
            }
            other => unavailable(&other),
        })?;
        let server_model = identity::model_entry(&models, &opts.model).map_err(|m| {
            let hint = match m {
                identity::NoEntry::NotAModelList(_) => format!(". {}", api_root_hint(&client)),
                identity::NoEntry::NotServed(_) => String::new(),
            };
            EngineError::NotAvailable(format!("{}: {m}{hint}", client.url("/models")))
        })?;
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
        let mut not_found = true;
        let mut dialect = None;
        for d in Dialect::ALL {
            // top-k off as 0 only for a server that said top_k may not be negative
            // (others, such as transformers' serve, refuse the extra fields themselves).
            if d == Dialect::ExtraFieldsTopKZero
                && !refusals
                    .last()
                    .is_some_and(|r: &String| refuses_negative_top_k(r))
            {
                continue;
            }
            let spec = BodySpec {
                // A nucleus request such as the benchmark sends.
                sampling: crate::Sampling::TopP {
                    temperature: 0.2,
                    top_p: 0.9,
                },
                max_tokens: 1,
                dialect: d,
            };
            let body = protocol::body(&opts.model, &probe, &spec, Some(0));
            match client.post_checked(mode.path(), &body, protocol::parse_probe_answer) {
                Ok(_) => {
                    dialect = Some(d);
                    break;
                }
                Err(CallError::Refused { status, message }) => {
                    not_found &= status == 404;
                    refusals.push(format!("{}: HTTP {status}: {message}", d.name()))
                }
                Err(e @ CallError::Unreadable { .. }) => {
                    return Err(EngineError::NotAvailable(format!(
                        "{}: {e}. {}",
                        client.url(mode.path()),
                        api_root_hint(&client)
                    )))
                }
                Err(e) => return Err(unavailable(&e)),
            }
        }
        let Some(dialect) = dialect else {
            let hint = match not_found {
                true => format!(". {}", api_root_hint(&client)),
                false => String::new(),
            };
            return Err(EngineError::NotAvailable(format!(
                "{} refused every form of request for model {:?}: {}{hint}",
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
            admission: Arc::default(),
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
    ) -> Result<Sample, Miss> {
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
                // What this prompt asks is refused; the next prompt may be fine.
                CallError::Refused {
                    status: 400 | 413 | 422,
                    ..
                }
                | CallError::Unreadable { .. } => Miss::Failed(e.to_string()),
                CallError::Refused { .. } => Miss::Stop(EngineError::InvalidRequest {
                    id: r.id.to_string(),
                    message: e.to_string(),
                }),
                other => Miss::Stop(unavailable(&other)),
            })?;
        self.check(r, seed, &answer);
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
            (None, Some(p)) => p.encode(&answer.text).map_err(Miss::Stop)?,
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

    /// Warns (in [`Traffic::warnings`]) of an answer longer than asked for, or from
    /// another model than the one asked: the server may not be doing what the manifest
    /// records.
    fn check(&self, r: &Request, seed: u64, answer: &protocol::Answer) {
        let who = format!("request {} seed {seed}", r.id);
        if let Some(n) = answer.completion_tokens.filter(|&n| n > r.max_new_tokens) {
            self.client.traffic.warn(format!(
                "{who}: the server counted {n} completion tokens, over the max_tokens {} \
                 asked for",
                r.max_new_tokens
            ));
        }
        if let Some(m) = answer.model.as_deref().filter(|m| *m != self.model) {
            if self.client.traffic.first_time_model(m) {
                self.client.traffic.warn(format!(
                    "{who}: answered by model {m:?}, not {:?} as asked (later answers from \
                     {m:?} are not named)",
                    self.model
                ));
            }
        }
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

/// What to try when something answers at the endpoint, but not as an OpenAI API root
/// does (a 404, a model list or completion of another shape): most often the root was
/// given without its `/v1`.
fn api_root_hint(client: &Client) -> String {
    let root = client.url("");
    let path = root.split_once("://").map_or("", |(_, r)| r);
    if path.split('/').skip(1).any(|segment| segment == "v1") {
        format!(
            "{root} does not answer as an OpenAI-compatible API root does: check that it is \
             the path that /models and /completions follow on this server"
        )
    } else {
        format!(
            "{root} does not answer as an OpenAI-compatible API root does: vLLM, SGLang and \
             llama.cpp's server serve that API under /v1, so try {root}/v1 as the endpoint"
        )
    }
}

fn unavailable(e: &CallError) -> EngineError {
    match e {
        CallError::Refused { .. }
        | CallError::Unreadable { .. }
        | CallError::Redirected { .. }
        | CallError::BadUrl { .. } => EngineError::NotAvailable(e.to_string()),
        CallError::NothingThere { .. } => EngineError::ServerDown(e.to_string()),
        CallError::Unavailable { .. } => EngineError::ServerDown(format!(
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

    fn admission(&self) -> Option<Arc<crate::activity::Activity>> {
        Some(self.admission.clone())
    }

    fn generate_each(
        &mut self,
        requests: &[Request],
        on_sample: &mut dyn FnMut(Sample),
    ) -> Result<(), EngineError> {
        let mut failed = None;
        self.generate_handing_over(requests, &mut |h| match h {
            Handover::Sample(s) => on_sample(s),
            Handover::Failed {
                request_id, reason, ..
            } => {
                failed.get_or_insert(EngineError::InvalidRequest {
                    id: request_id.to_string(),
                    message: reason,
                });
            }
            Handover::Idle => {}
        })?;
        failed.map_or(Ok(()), Err)
    }

    fn generate_handing_over(
        &mut self,
        requests: &[Request],
        on: &mut dyn FnMut(Handover),
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
            let (tx, rx) = mpsc::channel::<(RequestId, u64, Result<Sample, Miss>)>();
            // A fixed pool of workers, each taking the next (request, seed) until none
            // is left: threads are bounded by --concurrency, never one per sample, and a
            // limit on threads (ulimit -u, a cgroup's pids.max) leaves fewer workers
            // rather than a panic.
            let wanted = this.concurrency.min(work.len());
            let mut workers = 0;
            for _ in 0..wanted {
                let tx = tx.clone();
                let (next, stop, work, payloads) = (&next, &stop, &work, &payloads);
                let admission = &*this.admission;
                let spawned = std::thread::Builder::new()
                    .name("served-request".into())
                    .stack_size(WORKER_STACK)
                    .spawn_scoped(scope, move || {
                        while !stop.load(Ordering::Relaxed) && admission.admitting() {
                            let Some(&(i, seed)) = work.get(next.fetch_add(1, Ordering::Relaxed))
                            else {
                                break;
                            };
                            let (payload, local) = &payloads[i];
                            let result = this.one(&requests[i], seed, payload, *local);
                            if let Err(Miss::Stop(_)) = result {
                                // Requests already in flight finish; no new ones start.
                                stop.store(true, Ordering::Relaxed);
                            }
                            if tx.send((requests[i].id.clone(), seed, result)).is_err() {
                                break;
                            }
                        }
                    });
                match spawned {
                    Ok(_) => workers += 1,
                    Err(e) if workers == 0 => {
                        return Err(EngineError::Threads(format!(
                            "cannot start a thread for requests to the server ({e}): lower \
                             --concurrency, or raise the limit on threads (ulimit -u, or the \
                             cgroup's pids.max)"
                        )))
                    }
                    Err(e) => {
                        this.client.traffic.warn(format!(
                            "only {workers} of the {wanted} request threads could be started \
                             ({e}): {workers} requests were in flight at a time, not \
                             --concurrency {}",
                            this.concurrency
                        ));
                        break;
                    }
                }
            }
            drop(tx);
            let mut first_error = None;
            let mut in_a_row = 0;
            loop {
                // Before waiting, the caller keeps what it was handed: a finished sample
                // is not held back by slower requests.
                let (request_id, seed, result) = match rx.try_recv() {
                    Ok(r) => r,
                    Err(TryRecvError::Disconnected) => break,
                    Err(TryRecvError::Empty) => {
                        on(Handover::Idle);
                        match rx.recv() {
                            Ok(r) => r,
                            Err(_) => break,
                        }
                    }
                };
                match result {
                    Ok(sample) => {
                        in_a_row = 0;
                        on(Handover::Sample(sample));
                    }
                    Err(Miss::Failed(reason)) => {
                        in_a_row += 1;
                        if in_a_row == FAILURES_IN_A_ROW {
                            stop.store(true, Ordering::Relaxed);
                            first_error.get_or_insert(EngineError::NotAvailable(format!(
                                "{} at {}: {FAILURES_IN_A_ROW} answers in a row could not be \
                                 used (last: {reason}): the server, not the prompts, seems \
                                 broken. They are kept as failed; once it is fixed, rerun the \
                                 same command with --retry-failed",
                                this.model,
                                this.client.url("")
                            )));
                        }
                        on(Handover::Failed {
                            request_id,
                            seed,
                            reason,
                        });
                    }
                    Err(Miss::Stop(e)) => {
                        first_error.get_or_insert(e);
                    }
                }
            }
            first_error.map_or(Ok(()), Err)
        })
    }
}

/// Whether a server's refusal says `top_k` must not be negative (pydantic's "greater than
/// or equal to 0", as llama-cpp-python's server words it).
fn refuses_negative_top_k(refusal: &str) -> bool {
    let r = refusal.to_ascii_lowercase();
    r.contains("top_k")
        && (r.contains("greater than or equal to 0")
            || r.contains(">= 0")
            || r.contains("non-negative"))
}
