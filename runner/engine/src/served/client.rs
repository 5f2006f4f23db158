//! HTTP to the server: one JSON call, retried with exponential backoff and jitter on
//! what a busy or restarting server does (connection errors, timeouts, 429, 5xx, a body
//! cut off), refused at once on any other 4xx with the server's own message.

use crate::served::protocol::server_message;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

/// How long to wait for one answer, and how long to keep retrying before the run stops.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RetryPolicy {
    /// One request's whole exchange (a 512-token answer from a loaded server takes
    /// minutes at worst).
    pub request_timeout: Duration,
    /// Retries of one request stop this long after its first failure.
    pub give_up_after: Duration,
    pub first_delay: Duration,
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> RetryPolicy {
        RetryPolicy {
            request_timeout: Duration::from_secs(600),
            give_up_after: Duration::from_secs(300),
            first_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// A 4xx other than 408/429: retrying cannot help.
    #[error("the server refused the request (HTTP {status}): {message}")]
    Refused { status: u16, message: String },
    /// Retried until the policy's bound.
    #[error("the server at {url} did not answer for {waited_s:.0} s ({attempts} attempts; last: {last})")]
    Unavailable {
        url: String,
        waited_s: f64,
        attempts: usize,
        last: String,
    },
}

/// Counters the progress bar reads while requests run.
#[derive(Debug, Default)]
pub struct Traffic {
    pub in_flight: AtomicUsize,
    pub retries: AtomicUsize,
    /// Samples whose prompt the server counted in other tokens than the runner's
    /// tokenizer: their prompts were not token for token the embedded engine's.
    pub prompt_token_mismatches: AtomicUsize,
}

#[derive(Clone)]
pub struct Client {
    agent: ureq::Agent,
    base: String,
    api_key: Option<String>,
    pub policy: RetryPolicy,
    pub traffic: Arc<Traffic>,
}

/// What one attempt came to.
enum Attempt {
    Done(String),
    Retry(String, Option<Duration>),
    Refused(u16, String),
}

impl Client {
    /// `base` is the API root, e.g. `http://host:8000/v1`.
    pub fn new(base: &str, api_key: Option<String>, policy: RetryPolicy) -> Client {
        let agent = ureq::AgentBuilder::new()
            .timeout_connect(Duration::from_secs(10).min(policy.request_timeout))
            .timeout(policy.request_timeout)
            // Idle connections to a restarted server are stale; a fresh one per
            // retry is cheap next to a generation.
            .max_idle_connections_per_host(64)
            .build();
        Client {
            agent,
            base: base.trim_end_matches('/').to_string(),
            api_key,
            policy,
            traffic: Arc::new(Traffic::default()),
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub fn get(&self, path: &str) -> Result<String, CallError> {
        self.call(path, None)
    }

    pub fn post(&self, path: &str, body: &serde_json::Value) -> Result<String, CallError> {
        self.call(path, Some(body))
    }

    /// The body of a 2xx answer that `accept` takes; `accept` saying no (a cut-off or
    /// garbled body) counts as a failed attempt.
    pub fn post_checked<T>(
        &self,
        path: &str,
        body: &serde_json::Value,
        accept: impl Fn(&str) -> Result<T, String>,
    ) -> Result<T, CallError> {
        self.retrying(path, Some(body), accept)
    }

    fn call(&self, path: &str, body: Option<&serde_json::Value>) -> Result<String, CallError> {
        self.retrying(path, body, |t| Ok(t.to_string()))
    }

    fn retrying<T>(
        &self,
        path: &str,
        body: Option<&serde_json::Value>,
        accept: impl Fn(&str) -> Result<T, String>,
    ) -> Result<T, CallError> {
        let url = self.url(path);
        let mut first_failure: Option<Instant> = None;
        let mut attempts = 0;
        loop {
            attempts += 1;
            self.traffic.in_flight.fetch_add(1, Ordering::Relaxed);
            let outcome = self.once(&url, body);
            self.traffic.in_flight.fetch_sub(1, Ordering::Relaxed);
            let (why, hint) = match outcome {
                Attempt::Done(text) => match accept(&text) {
                    Ok(v) => return Ok(v),
                    Err(why) => (why, None),
                },
                Attempt::Refused(status, message) => {
                    return Err(CallError::Refused { status, message })
                }
                Attempt::Retry(why, hint) => (why, hint),
            };
            let since = *first_failure.get_or_insert_with(Instant::now);
            let waited = since.elapsed();
            if waited >= self.policy.give_up_after {
                return Err(CallError::Unavailable {
                    url,
                    waited_s: waited.as_secs_f64(),
                    attempts,
                    last: why,
                });
            }
            let delay = hint
                .unwrap_or_else(|| backoff(&self.policy, attempts))
                .min(self.policy.give_up_after.saturating_sub(waited))
                .min(self.policy.max_delay);
            self.traffic.retries.fetch_add(1, Ordering::Relaxed);
            std::thread::sleep(delay);
        }
    }

    fn once(&self, url: &str, body: Option<&serde_json::Value>) -> Attempt {
        let mut req = match body {
            Some(_) => self.agent.post(url),
            None => self.agent.get(url),
        };
        if let Some(key) = &self.api_key {
            req = req.set("Authorization", &format!("Bearer {key}"));
        }
        let result = match body {
            Some(b) => req.send_json(b),
            None => req.call(),
        };
        match result {
            Ok(resp) => match resp.into_string() {
                Ok(text) => Attempt::Done(text),
                Err(e) => Attempt::Retry(format!("reading the answer: {e}"), None),
            },
            Err(ureq::Error::Status(status, resp)) => {
                let retry_after = resp
                    .header("retry-after")
                    .and_then(|v| v.trim().parse::<f64>().ok())
                    .filter(|s| s.is_finite() && *s >= 0.0)
                    .map(Duration::from_secs_f64);
                let text = resp.into_string().unwrap_or_default();
                let message = server_message(&text);
                if status == 408 || status == 429 || status >= 500 {
                    Attempt::Retry(format!("HTTP {status}: {message}"), retry_after)
                } else {
                    Attempt::Refused(status, message)
                }
            }
            Err(ureq::Error::Transport(t)) => Attempt::Retry(t.to_string(), None),
        }
    }
}

/// Exponential backoff with "equal jitter": half the step fixed, half random, so that
/// many workers retrying together spread out.
fn backoff(policy: &RetryPolicy, attempt: usize) -> Duration {
    let exp = policy
        .first_delay
        .saturating_mul(1u32 << attempt.saturating_sub(1).min(16))
        .min(policy.max_delay);
    let half = exp / 2;
    half + half.mul_f64(jitter())
}

/// A number in [0, 1) that differs between threads and calls; quality does not matter.
fn jitter() -> f64 {
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos() as u64);
    let thread = {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        std::thread::current().id().hash(&mut h);
        h.finish()
    };
    let mut x = nanos ^ thread.rotate_left(17) ^ 0x9e37_79b9_7f4a_7c15;
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    (x >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_to_its_cap_and_stays_jittered_within_it() {
        let p = RetryPolicy {
            first_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(2),
            ..RetryPolicy::default()
        };
        for attempt in 1..30 {
            let d = backoff(&p, attempt);
            let step = Duration::from_millis(100)
                .saturating_mul(1 << (attempt - 1).min(16))
                .min(p.max_delay);
            assert!(d >= step / 2 && d <= step, "attempt {attempt}: {d:?}");
        }
        assert!(backoff(&p, 20) >= Duration::from_secs(1));
    }

    #[test]
    fn an_unreachable_server_is_given_up_within_the_bound() {
        // A port nothing listens on: bind, learn the port, close.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let policy = RetryPolicy {
            request_timeout: Duration::from_secs(2),
            give_up_after: Duration::from_millis(600),
            first_delay: Duration::from_millis(50),
            max_delay: Duration::from_millis(200),
        };
        let c = Client::new(&format!("http://127.0.0.1:{port}/v1"), None, policy);
        let started = Instant::now();
        let err = c.get("/models").unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(3));
        match err {
            CallError::Unavailable { attempts, .. } => assert!(attempts >= 3, "{attempts}"),
            other => panic!("{other}"),
        }
        assert!(c.traffic.retries.load(Ordering::Relaxed) >= 2);
    }
}
