//! HTTP to the server: one JSON call, retried with exponential backoff and jitter on
//! what a busy or restarting server does (connection errors, timeouts, 429, 5xx, a body
//! cut off), refused at once on any other 4xx with the server's own message, and given
//! up at once on an answer that no retry can make readable (over [`MAX_ANSWER_BYTES`],
//! not UTF-8, malformed JSON).

use crate::served::protocol::server_message;
use crate::served::wire::{redact, retry_after};
use std::io::Read;
use std::sync::atomic::Ordering;
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
    /// While nothing at the address has ever taken a connection (refused, a connect
    /// timeout, a name that does not resolve), retries stop this long after the first
    /// failure instead, when that is sooner: a wrong address is said in seconds, and a
    /// server still starting is given this long to open its port.
    pub wait_for_server: Duration,
    pub first_delay: Duration,
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> RetryPolicy {
        RetryPolicy {
            request_timeout: Duration::from_secs(600),
            give_up_after: Duration::from_secs(300),
            wait_for_server: Duration::from_secs(30),
            first_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
        }
    }
}

/// The largest answer read; a bigger one is not an answer the runner can use.
pub const MAX_ANSWER_BYTES: usize = 10 << 20;

pub use crate::served::traffic::{Traffic, Unanswered, Waiting, Window, KEPT_WARNINGS};
pub use crate::served::wire::Unreadable;

#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// A 4xx other than 408/429: retrying cannot help.
    #[error("the server refused the request (HTTP {status}): {message}")]
    Refused { status: u16, message: String },
    /// An answer that asking again cannot make readable.
    #[error("the server's answer cannot be used: {message}")]
    Unreadable { message: String },
    /// A 3xx: not followed (a POST comes back a GET, another server's answers journaled).
    #[error(
        "the server at {from} redirected the request (HTTP {status}) to {to}; redirects are \
         not followed: give the endpoint the server really answers at"
    )]
    Redirected {
        from: String,
        to: String,
        status: u16,
    },
    /// A URL the HTTP client cannot use (malformed, unknown scheme): final, not retried.
    #[error("{url}: not a URL the runner can request: {message}")]
    BadUrl { url: String, message: String },
    /// Retried until the policy's bound.
    #[error("the server at {url} did not answer for {waited_s:.0} s ({attempts} attempts; last: {last})")]
    Unavailable {
        url: String,
        waited_s: f64,
        attempts: usize,
        last: String,
    },
    /// Nothing at the address took a connection, from the first try to the end of the
    /// policy's `wait_for_server`.
    #[error(
        "nothing answered at {url} in {waited_s:.0} s ({attempts} attempts; last: {last}). \
             Start the server, or check the endpoint's host and port; for a server that is \
             still starting, --wait-for-server SECONDS waits longer"
    )]
    NothingThere {
        url: String,
        waited_s: f64,
        attempts: usize,
        last: String,
    },
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
    /// Worth another try, but nothing took the connection.
    NotConnected(String),
    Refused(u16, String),
    Unreadable(String),
    /// A 3xx, with its `Location`.
    Redirected(u16, String),
    BadUrl(String),
}

impl Client {
    /// `base` is the API root, e.g. `http://host:8000/v1`.
    pub fn new(base: &str, api_key: Option<String>, policy: RetryPolicy) -> Client {
        Client::with_traffic(base, api_key, policy, Arc::default())
    }

    /// Like [`Client::new`], counting into `traffic`, which the caller may watch from
    /// the first attempt on (a server that does not answer is said at once).
    pub fn with_traffic(
        base: &str,
        api_key: Option<String>,
        policy: RetryPolicy,
        traffic: Arc<Traffic>,
    ) -> Client {
        let agent = ureq::AgentBuilder::new()
            .timeout_connect(Duration::from_secs(10).min(policy.request_timeout))
            .timeout(policy.request_timeout)
            // Idle connections to a restarted server are stale; a fresh one per
            // retry is cheap next to a generation.
            .max_idle_connections_per_host(64)
            // A redirect comes back as the 3xx it is, and stops the call (`once`).
            .redirects(0)
            .build();
        Client {
            agent,
            base: base.trim_end_matches('/').to_string(),
            api_key,
            policy,
            traffic,
        }
    }

    /// The URL of `path` as shown and stored: without user and password.
    pub fn url(&self, path: &str) -> String {
        redact(&self.request_url(path))
    }

    /// The URL requested, credentials included.
    fn request_url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub fn get(&self, path: &str) -> Result<String, CallError> {
        self.call(path, None)
    }

    pub fn post(&self, path: &str, body: &serde_json::Value) -> Result<String, CallError> {
        self.call(path, Some(body))
    }

    /// The body of a 2xx answer that `accept` takes; `accept` saying no counts as a
    /// failed attempt (a cut-off body), or ends the call (a malformed one).
    pub fn post_checked<T>(
        &self,
        path: &str,
        body: &serde_json::Value,
        accept: impl Fn(&str) -> Result<T, Unreadable>,
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
        accept: impl Fn(&str) -> Result<T, Unreadable>,
    ) -> Result<T, CallError> {
        let url = self.request_url(path);
        let method = if body.is_some() { "POST" } else { "GET" };
        let mut first_failure: Option<Instant> = None;
        let mut attempts = 0;
        loop {
            attempts += 1;
            self.traffic
                .sending(|| format!("{method} {}", redact(&url)));
            self.traffic.in_flight.fetch_add(1, Ordering::Relaxed);
            let outcome = self.once(&url, body);
            self.traffic.in_flight.fetch_sub(1, Ordering::Relaxed);
            if !matches!(outcome, Attempt::NotConnected(..) | Attempt::BadUrl(..)) {
                self.traffic.reached();
            }
            if !matches!(outcome, Attempt::Retry(..) | Attempt::NotConnected(..)) {
                self.traffic.answered();
            }
            let (why, hint) = match outcome {
                Attempt::Done(text) => match accept(&text) {
                    Ok(v) => return Ok(v),
                    Err(u) if u.permanent => {
                        return Err(CallError::Unreadable {
                            message: redact(&u.message),
                        })
                    }
                    Err(u) => (u.message, None),
                },
                Attempt::Refused(status, message) => {
                    return Err(CallError::Refused {
                        status,
                        message: redact(&message),
                    })
                }
                Attempt::Unreadable(message) => {
                    return Err(CallError::Unreadable {
                        message: redact(&message),
                    })
                }
                Attempt::Redirected(status, to) => {
                    return Err(CallError::Redirected {
                        from: redact(&url),
                        to: redact(&to),
                        status,
                    })
                }
                Attempt::BadUrl(message) => {
                    return Err(CallError::BadUrl {
                        url: redact(&url),
                        message: redact(&message),
                    })
                }
                Attempt::Retry(why, hint) => (why, hint),
                Attempt::NotConnected(why) => (why, None),
            };
            let since = *first_failure.get_or_insert_with(Instant::now);
            let waited = since.elapsed();
            let (window, bound) = self.window();
            self.traffic.failed(
                format!("{method} {}", redact(&url)),
                since,
                &why,
                (since + window, bound),
            );
            if waited >= window {
                let (url, waited_s, last) = (redact(&url), waited.as_secs_f64(), redact(&why));
                return Err(match bound {
                    Window::RetryFor => CallError::Unavailable {
                        url,
                        waited_s,
                        attempts,
                        last,
                    },
                    Window::WaitForServer => CallError::NothingThere {
                        url,
                        waited_s,
                        attempts,
                        last,
                    },
                });
            }
            let policy = RetryPolicy {
                give_up_after: window,
                ..self.policy
            };
            let delay = next_delay(&policy, attempts, hint, waited);
            self.traffic.retries.fetch_add(1, Ordering::Relaxed);
            std::thread::sleep(delay);
        }
    }

    /// How long a failing request is retried, and which flag sets that: the shorter
    /// wait for a server while nothing at the address has ever taken a connection.
    fn window(&self) -> (Duration, Window) {
        let p = &self.policy;
        if !self.traffic.was_reached() && p.wait_for_server < p.give_up_after {
            (p.wait_for_server, Window::WaitForServer)
        } else {
            (p.give_up_after, Window::RetryFor)
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
            Ok(resp) if (300..400).contains(&resp.status()) => Attempt::Redirected(
                resp.status(),
                resp.header("location")
                    .unwrap_or("(no Location header)")
                    .to_string(),
            ),
            Ok(resp) => read_answer(resp),
            Err(ureq::Error::Status(status, resp)) => {
                let retry_after = resp
                    .header("retry-after")
                    .and_then(|v| retry_after(v, SystemTime::now()));
                let text = match read_answer(resp) {
                    Attempt::Done(text) => text,
                    _ => String::new(),
                };
                let message = server_message(&text);
                // A request the server's validation refused is refused again if retried,
                // whatever status it came with (llama-cpp-python's server says 500).
                if (status == 408 || status == 429 || status >= 500)
                    && !is_validation_error(&message)
                {
                    Attempt::Retry(format!("HTTP {status}: {message}"), retry_after)
                } else {
                    Attempt::Refused(status, message)
                }
            }
            Err(ureq::Error::Transport(t))
                if matches!(
                    t.kind(),
                    ureq::ErrorKind::ConnectionFailed | ureq::ErrorKind::Dns
                ) =>
            {
                Attempt::NotConnected(transport_reason(&t))
            }
            Err(ureq::Error::Transport(t))
                if matches!(
                    t.kind(),
                    ureq::ErrorKind::InvalidUrl
                        | ureq::ErrorKind::UnknownScheme
                        | ureq::ErrorKind::InsecureRequestHttpsOnly
                ) =>
            {
                Attempt::BadUrl(t.to_string())
            }
            Err(ureq::Error::Transport(t)) => Attempt::Retry(transport_reason(&t), None),
        }
    }
}

/// Whether a server's error message says the request failed its validation (a field out
/// of range, of the wrong type): pydantic's `validation error`, as FastAPI servers word it.
fn is_validation_error(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    m.contains("validation error") || m.contains("validation_error")
}

/// Why no answer came, in words: `connection refused` rather than ureq's
/// `http://host/v1/models: Connection Failed: Connect error: Connection refused (os
/// error 111)` (the URL is said beside it).
fn transport_reason(t: &ureq::Transport) -> String {
    use std::error::Error as _;
    let mut io_kind = None;
    let mut cause = t.source();
    while let Some(c) = cause {
        if let Some(io) = c.downcast_ref::<std::io::Error>() {
            io_kind = Some(io.kind());
            break;
        }
        cause = c.source();
    }
    match (t.kind(), io_kind) {
        (_, Some(std::io::ErrorKind::ConnectionRefused)) => {
            "connection refused (nothing listens at that address and port)".into()
        }
        (_, Some(std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock)) => {
            "timed out (no answer within the connect or --request-timeout limit)".into()
        }
        (_, Some(std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::ConnectionAborted)) => {
            "the connection was dropped".into()
        }
        (ureq::ErrorKind::Dns, _) => "the host name does not resolve".into(),
        _ => redact(&t.to_string()),
    }
}

/// A 2xx body: read up to [`MAX_ANSWER_BYTES`]; a bigger one, or one that is not
/// UTF-8, is the server's answer every time; a read cut short is worth another try.
fn read_answer(resp: ureq::Response) -> Attempt {
    let mut bytes = Vec::new();
    let read = resp
        .into_reader()
        .take(MAX_ANSWER_BYTES as u64 + 1)
        .read_to_end(&mut bytes);
    if let Err(e) = read {
        return Attempt::Retry(format!("reading the answer: {e}"), None);
    }
    if bytes.len() > MAX_ANSWER_BYTES {
        return Attempt::Unreadable(format!("the answer is over {} MiB", MAX_ANSWER_BYTES >> 20));
    }
    match String::from_utf8(bytes) {
        Ok(text) => Attempt::Done(text),
        Err(e) => Attempt::Unreadable(format!("the answer is not UTF-8 ({e})")),
    }
}

/// The wait before the next attempt: the server's `Retry-After` where it gave one,
/// else the backoff; never past what is left of the retry window, nor the cap.
fn next_delay(
    policy: &RetryPolicy,
    attempts: usize,
    hint: Option<Duration>,
    waited: Duration,
) -> Duration {
    hint.unwrap_or_else(|| backoff(policy, attempts))
        .min(policy.give_up_after.saturating_sub(waited))
        .min(policy.max_delay)
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
    fn a_servers_retry_after_is_bounded_by_the_window_and_the_cap() {
        let p = RetryPolicy {
            give_up_after: Duration::from_secs(20),
            max_delay: Duration::from_secs(30),
            ..RetryPolicy::default()
        };
        let waited = Duration::from_secs(15);
        let huge = retry_after("1e20", SystemTime::now());
        assert_eq!(next_delay(&p, 1, huge, waited), Duration::from_secs(5));
        let far = retry_after("Fri, 31 Dec 9999 23:59:59 GMT", SystemTime::now());
        assert_eq!(
            next_delay(&p, 1, far, Duration::ZERO),
            Duration::from_secs(20)
        );
        assert_eq!(
            next_delay(&p, 1, Some(Duration::from_secs(2)), waited),
            Duration::from_secs(2)
        );
        assert_eq!(
            next_delay(&p, 1, huge, Duration::from_secs(99)),
            Duration::ZERO
        );
        // No usable header: the backoff.
        let d = next_delay(&p, 1, retry_after("-1", SystemTime::now()), waited);
        assert!(d <= p.first_delay, "{d:?}");
    }

    #[test]
    fn shown_urls_carry_no_credentials() {
        let c = Client::new(
            "http://u:secret@127.0.0.1:1/v1/",
            None,
            RetryPolicy::default(),
        );
        assert_eq!(c.url("/models"), "http://127.0.0.1:1/v1/models");
        assert_eq!(
            c.request_url("/models"),
            "http://u:secret@127.0.0.1:1/v1/models"
        );
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
            wait_for_server: Duration::from_secs(60),
            first_delay: Duration::from_millis(50),
            max_delay: Duration::from_millis(200),
        };
        let c = Client::new(&format!("http://127.0.0.1:{port}/v1"), None, policy);
        let started = Instant::now();
        let err = c.get("/models").unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(3));
        match err {
            CallError::Unavailable {
                attempts, ref last, ..
            } => {
                assert!(attempts >= 3, "{attempts}");
                assert!(last.starts_with("connection refused"), "{last}");
            }
            other => panic!("{other}"),
        }
        assert!(c.traffic.retries.load(Ordering::Relaxed) >= 2);
        // The silence stays on record for a watcher until an answer clears it.
        let w = c.traffic.waiting().expect("the silence is on record");
        assert_eq!(w.what, format!("GET http://127.0.0.1:{port}/v1/models"));
        assert!(
            w.failures >= 3 && w.last.starts_with("connection refused"),
            "{w:?}"
        );
        // The first request stays unanswered on record too, until an answer.
        let u = c
            .traffic
            .unanswered()
            .expect("the first request is on record");
        assert_eq!(w.what, u.what);
        assert!(u.since <= w.since, "{u:?} {w:?}");
        c.traffic.answered();
        assert!(c.traffic.waiting().is_none());
        assert!(c.traffic.unanswered().is_none());
        // Later requests do not put it back: only the first is waited for aloud.
        c.traffic.sending(|| "GET again".into());
        assert!(c.traffic.unanswered().is_none());
    }

    /// A port nothing listens on: bind, learn the port, close.
    fn closed_port() -> u16 {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    }

    #[test]
    fn an_address_that_never_took_a_connection_is_given_up_at_the_shorter_wait() {
        let policy = RetryPolicy {
            give_up_after: Duration::from_secs(600),
            wait_for_server: Duration::from_millis(300),
            first_delay: Duration::from_millis(50),
            max_delay: Duration::from_millis(100),
            ..RetryPolicy::default()
        };
        let url = format!("http://127.0.0.1:{}/v1", closed_port());
        let c = Client::new(&url, None, policy);
        match c.get("/models").unwrap_err() {
            CallError::NothingThere { last, .. } => {
                assert!(last.starts_with("connection refused"), "{last}")
            }
            other => panic!("{other}"),
        }
        assert_eq!(c.traffic.waiting().unwrap().window, Window::WaitForServer);
        // Once something took a connection there, a refusal is a restart: the long
        // window holds (600 ms here), and the end says --retry-for.
        let c = Client::new(
            &url,
            None,
            RetryPolicy {
                give_up_after: Duration::from_millis(600),
                ..policy
            },
        );
        c.traffic.reached();
        let err = c.get("/models").unwrap_err();
        assert!(matches!(err, CallError::Unavailable { .. }), "{err}");
        assert_eq!(c.traffic.waiting().unwrap().window, Window::RetryFor);
    }
}
