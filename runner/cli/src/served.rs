//! `runner --endpoint URL --model NAME`: the flags of a model behind an OpenAI-compatible
//! server (the engine's resolver, `runner_engine::resolve`, loads it), and what its
//! progress bar and summary add.

use anyhow::{bail, Result};
use clap::Args;
use indicatif::ProgressBar;
use runner_engine::resolve::{ApiKey, ServedSettings};
use runner_engine::served::client::{RetryPolicy, Traffic, Unanswered, Waiting};
use runner_engine::served::DEFAULT_CONCURRENCY;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Args, Debug, Clone, Default)]
pub struct ServedArgs {
    /// An OpenAI-compatible server's API root (e.g. http://host:8000/v1); --model is then
    /// the served model's name. A models.toml entry's `endpoint` does the same.
    #[arg(long)]
    pub endpoint: Option<String>,
    /// The environment variable holding the server's API key (the key is never written).
    #[arg(long)]
    pub api_key_env: Option<String>,
    /// Render prompts with this panel model's (or folder's) chat template and tokenizer
    /// and send them to the completions endpoint; without it the chat endpoint and the
    /// server's template are used.
    #[arg(long)]
    pub tokenizer: Option<String>,
    /// Requests in flight at once.
    #[arg(long, default_value_t = DEFAULT_CONCURRENCY)]
    pub concurrency: usize,
    /// Declare that the server's answers do not depend on its batching (e.g. vLLM with
    /// VLLM_BATCH_INVARIANT=1); recorded in the manifest and the report.
    #[arg(long)]
    pub server_deterministic: bool,
    /// Seconds one request may take (1 to 86400).
    #[arg(long, default_value_t = 600)]
    pub request_timeout: u64,
    /// Seconds to keep retrying an unreachable or failing server before the run stops.
    #[arg(long, default_value_t = 300)]
    pub retry_for: u64,
    /// Seconds to wait for a server that nothing has ever answered for at the address
    /// (connection refused from the first try), when shorter than --retry-for: raise it
    /// for a server that is still starting.
    #[arg(long, default_value_t = 30, value_name = "SECONDS")]
    pub wait_for_server: u64,
    /// Ask again for the samples an earlier invocation kept as failed (answers the
    /// server refused or that could not be read, listed in failed.jsonl); without it a
    /// resume skips them.
    #[arg(long)]
    pub retry_failed: bool,
}

/// The longest `--request-timeout`: a day.
const MAX_REQUEST_TIMEOUT: u64 = 86_400;

impl ServedArgs {
    /// The resolver's served settings (which model they serve is the resolver's
    /// choice): the request timeout's range checked, the API key read from its variable.
    pub fn settings(&self, traffic: Arc<Traffic>) -> Result<ServedSettings> {
        if self.request_timeout == 0 || self.request_timeout > MAX_REQUEST_TIMEOUT {
            bail!(
                "--request-timeout {}: give the seconds one request may take, from 1 to \
                 {MAX_REQUEST_TIMEOUT} (default 600)",
                self.request_timeout
            );
        }
        Ok(ServedSettings {
            endpoint: self.endpoint.clone(),
            api_key: self.api_key_env.as_ref().map(|var| ApiKey {
                var: var.clone(),
                value: std::env::var(var).ok(),
            }),
            tokenizer: self.tokenizer.clone(),
            concurrency: self.concurrency,
            server_deterministic: self.server_deterministic,
            policy: RetryPolicy {
                request_timeout: Duration::from_secs(self.request_timeout),
                give_up_after: Duration::from_secs(self.retry_for),
                wait_for_server: Duration::from_secs(self.wait_for_server),
                ..RetryPolicy::default()
            },
            traffic,
        })
    }
}

/// How often a server that still does not answer is said again.
const REPEAT: Duration = Duration::from_secs(10);

/// How long the first request may go unanswered before the wait is said: a server
/// that answers within it is not mentioned.
const QUIET: Duration = Duration::from_secs(1);

/// Says on stderr, within a fraction of a second of the first failed attempt, that the
/// server does not answer (its address, what is retried, why it failed and for how
/// long it is retried), again every [`REPEAT`] while it still does not, and once when
/// it answers again. Before the server's first answer it does not wait for a failure
/// (a server that takes the connection and says nothing fails only at the request
/// timeout): the first request unanswered for [`QUIET`] is said too, and again every
/// [`REPEAT`]. It stops when dropped.
pub struct Watch {
    stop: Arc<AtomicBool>,
    bar: Arc<Mutex<Option<ProgressBar>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Watch {
    /// `endpoint` as shown: redacted.
    pub fn start(traffic: Arc<Traffic>, endpoint: String) -> Watch {
        let stop = Arc::new(AtomicBool::new(false));
        let bar: Arc<Mutex<Option<ProgressBar>>> = Arc::default();
        let (stop2, bar2) = (stop.clone(), bar.clone());
        // Where no thread can be had (a thread limit), the run goes on unwatched: its
        // errors still say what the server did.
        let spawned = std::thread::Builder::new()
            .name("server-watch".into())
            .spawn(move || {
                let say = |line: String| match bar2.lock().ok().and_then(|b| b.clone()) {
                    Some(b) => b.suspend(|| eprintln!("{line}")),
                    None => eprintln!("{line}"),
                };
                // The silence last said (its start) and when it was said.
                let mut said: Option<(Instant, Instant)> = None;
                // The first request's wait, alike, while nothing has failed yet.
                let mut slow: Option<(Instant, Instant)> = None;
                while !stop2.load(Ordering::Relaxed) {
                    if let Some(w) = traffic.waiting() {
                        if let Some(line) = waiting_line(&endpoint, &w, said) {
                            say(line);
                            said = Some((w.since, Instant::now()));
                        }
                    } else if let Some(u) = traffic.unanswered() {
                        let in_flight = traffic.in_flight.load(Ordering::Relaxed);
                        if let Some(line) = unanswered_line(&endpoint, &u, in_flight, slow) {
                            say(line);
                            slow = Some((u.since, Instant::now()));
                        }
                    } else if let Some(line) = answered_line(&endpoint, said.take(), slow.take()) {
                        say(line);
                    }
                    std::thread::sleep(Duration::from_millis(100));
                }
            });
        Watch {
            stop,
            bar,
            thread: spawned.ok(),
        }
    }

    /// Lines are printed above this bar from now on, not through it.
    pub fn set_bar(&self, bar: &ProgressBar) {
        if let Ok(mut b) = self.bar.lock() {
            *b = Some(bar.clone());
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().ok();
        }
    }
}

/// The line to print about the server's silence `w`, if one is due: at its start, then
/// every [`REPEAT`]; `said` is the silence last said and when.
fn waiting_line(endpoint: &str, w: &Waiting, said: Option<(Instant, Instant)>) -> Option<String> {
    let left = w
        .give_up_at
        .saturating_duration_since(Instant::now())
        .as_secs_f64();
    match said {
        Some((since, at)) if since == w.since && at.elapsed() < REPEAT => None,
        Some((since, _)) if since == w.since => Some(format!(
            "warning: still no answer from the server at {endpoint} after {:.0} s ({} failed \
             attempts; last: {}); retrying {} for {left:.0} s more",
            w.since.elapsed().as_secs_f64(),
            w.failures,
            w.last,
            w.what,
        )),
        _ => Some(format!(
            "warning: the server at {endpoint} is not answering ({}); retrying {} for up to \
             {left:.0} s more ({})",
            w.last,
            w.what,
            w.window.flag()
        )),
    }
}

/// The line to print about the first request `u`, unanswered (and not failed) so far,
/// if one is due: once it has waited [`QUIET`], then every [`REPEAT`]; `said` is when
/// it was last said. `in_flight` counts the requests sent and not answered.
fn unanswered_line(
    endpoint: &str,
    u: &Unanswered,
    in_flight: usize,
    said: Option<(Instant, Instant)>,
) -> Option<String> {
    let waited = u.since.elapsed();
    let due = match said {
        Some((since, at)) if since == u.since => at.elapsed() >= REPEAT,
        _ => waited >= QUIET,
    };
    let more = match in_flight.saturating_sub(1) {
        0 => String::new(),
        n => format!(" and {n} more"),
    };
    due.then(|| {
        format!(
            "waiting for the server at {endpoint} to answer ({:.0} s; {}{more} in flight)",
            waited.as_secs_f64(),
            u.what
        )
    })
}

/// The line to print when the server answers after a wait that was said, if one was:
/// `said` after a failure, `slow` the first request's (each its start and when said).
fn answered_line(
    endpoint: &str,
    said: Option<(Instant, Instant)>,
    slow: Option<(Instant, Instant)>,
) -> Option<String> {
    let (again, since) = match (said, slow) {
        (Some((since, _)), _) => (" again", since),
        (None, Some((since, _))) => ("", since),
        (None, None) => return None,
    };
    Some(format!(
        "the server at {endpoint} answers{again} (after {:.0} s)",
        since.elapsed().as_secs_f64()
    ))
}

/// The progress bar's addition: requests in flight, retries, and how long the server
/// has not answered, while it does not.
pub fn bar_note(traffic: &Traffic) -> String {
    format!(
        " | in flight {} | retries {}{}",
        traffic.in_flight.load(Ordering::Relaxed),
        traffic.retries.load(Ordering::Relaxed),
        traffic.waiting().map_or(String::new(), |w| format!(
            " | no answer for {:.0} s",
            w.since.elapsed().as_secs_f64()
        ))
    )
}

/// Said after the run: answers that were implausible (each naming its request), and
/// when the server's prompts were not the runner's token for token.
pub fn after_run(traffic: &Traffic) {
    if let Ok(w) = traffic.warnings.lock() {
        for line in w.iter() {
            eprintln!("warning: {line}");
        }
        let more = traffic
            .warned
            .load(Ordering::Relaxed)
            .saturating_sub(w.len());
        if more > 0 {
            eprintln!("warning: {more} more warnings like these");
        }
    }
    let n = traffic.prompt_token_mismatches.load(Ordering::Relaxed);
    if n > 0 {
        eprintln!(
            "warning: for {n} samples the server counted the prompt in other tokens than the \
             runner's tokenizer: its tokenizer differs, so those prompts were not token for \
             token the embedded engine's"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_first_request_is_said_after_a_second_unanswered_then_every_repeat() {
        let ago = |s: f64| Instant::now() - Duration::from_secs_f64(s);
        let u = |since| Unanswered {
            what: "GET http://h/v1/models".into(),
            since,
        };
        // Answered within a second: nothing.
        assert_eq!(unanswered_line("http://h/v1", &u(ago(0.5)), 1, None), None);
        let slow = u(ago(1.2));
        let line = unanswered_line("http://h/v1", &slow, 3, None).unwrap();
        assert_eq!(
            line,
            "waiting for the server at http://h/v1 to answer (1 s; GET http://h/v1/models \
             and 2 more in flight)"
        );
        // Said a moment ago: not again until REPEAT has passed.
        let said = Some((slow.since, ago(1.0)));
        assert_eq!(unanswered_line("http://h/v1", &slow, 1, said), None);
        let said = Some((slow.since, ago(10.5)));
        assert!(unanswered_line("http://h/v1", &slow, 1, said).is_some());
        // Its answer is said once it was waited for aloud, and only then.
        assert_eq!(answered_line("http://h/v1", None, None), None);
        let answered = answered_line("http://h/v1", None, Some((slow.since, ago(0.2))));
        assert_eq!(
            answered.as_deref(),
            Some("the server at http://h/v1 answers (after 1 s)")
        );
    }
}
