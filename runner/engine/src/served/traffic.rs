//! What a served run's requests are doing, for whoever watches them: requests in
//! flight, retries, the server's silence while it lasts, and warnings about answers.

use crate::served::wire::redact;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// Counters the progress bar reads while requests run.
#[derive(Debug, Default)]
pub struct Traffic {
    pub in_flight: AtomicUsize,
    pub retries: AtomicUsize,
    /// Samples whose prompt the server counted in other tokens than the runner's
    /// tokenizer: their prompts were not token for token the embedded engine's.
    pub prompt_token_mismatches: AtomicUsize,
    /// Warnings about answers (each naming its request), for after the run: the first
    /// [`KEPT_WARNINGS`] of `warned`.
    pub warnings: Mutex<Vec<String>>,
    pub warned: AtomicUsize,
    /// Model names answers came from other than the one asked.
    other_models: Mutex<BTreeSet<String>>,
    /// Since when the server has not answered, while it has not: shown at once, and
    /// cleared by its next answer.
    waiting: Mutex<Option<Waiting>>,
    /// The first request sent, until the server's first answer: a server that takes the
    /// connection and says nothing is shown long before that request times out.
    first: Mutex<First>,
    /// Whether anything at the address has ever taken a connection (an HTTP answer of
    /// any status, or a timeout after connecting): until then a refused connection may
    /// be a wrong address rather than a server that is restarting.
    reached: AtomicBool,
}

/// The first request sent and whether anything has answered since.
#[derive(Debug, Default)]
enum First {
    #[default]
    NotSent,
    Sent(Unanswered),
    Answered,
}

/// The first request, sent and not yet answered (nor any other).
#[derive(Debug, Clone, PartialEq)]
pub struct Unanswered {
    /// What was sent, e.g. `GET http://host:8000/v1/models` (no credentials).
    pub what: String,
    /// When its first attempt started.
    pub since: Instant,
}

/// The server not answering: since the first failed attempt after its last answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Waiting {
    /// What is being retried, e.g. `GET http://host:8000/v1/models` (no credentials).
    pub what: String,
    pub since: Instant,
    /// Failed attempts so far, over every request in flight.
    pub failures: usize,
    /// Why the latest attempt failed, e.g. `connection refused`.
    pub last: String,
    /// When every request will have given up, at the latest (the retry window).
    pub give_up_at: Instant,
    /// The flag that sets that window.
    pub window: Window,
}

/// Which bound ends the retries of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Window {
    /// `--retry-for`: a server that was reached and stopped answering.
    RetryFor,
    /// `--wait-for-server`: nothing at the address has ever taken a connection.
    WaitForServer,
}

impl Window {
    pub fn flag(self) -> &'static str {
        match self {
            Window::RetryFor => "--retry-for",
            Window::WaitForServer => "--wait-for-server",
        }
    }
}

/// Warnings kept for after the run; the rest are counted.
pub const KEPT_WARNINGS: usize = 20;

impl Traffic {
    pub fn warn(&self, message: String) {
        if self.warned.fetch_add(1, Ordering::Relaxed) < KEPT_WARNINGS {
            if let Ok(mut w) = self.warnings.lock() {
                w.push(redact(&message));
            }
        }
    }

    /// The server's silence so far, while it lasts.
    pub fn waiting(&self) -> Option<Waiting> {
        self.waiting.lock().ok().and_then(|w| w.clone())
    }

    /// The first request, while the server has answered none: since when it waits.
    pub fn unanswered(&self) -> Option<Unanswered> {
        match &*self.first.lock().ok()? {
            First::Sent(u) => Some(u.clone()),
            First::NotSent | First::Answered => None,
        }
    }

    /// An attempt starts: the first of all is recorded.
    pub(crate) fn sending(&self, what: impl FnOnce() -> String) {
        if let Ok(mut f) = self.first.lock() {
            if matches!(*f, First::NotSent) {
                *f = First::Sent(Unanswered {
                    what: what(),
                    since: Instant::now(),
                });
            }
        }
    }

    pub(crate) fn failed(&self, what: String, since: Instant, why: &str, until: (Instant, Window)) {
        let (give_up_at, window) = until;
        if let Ok(mut w) = self.waiting.lock() {
            let w = w.get_or_insert_with(|| Waiting {
                what,
                since,
                failures: 0,
                last: String::new(),
                give_up_at,
                window,
            });
            w.failures += 1;
            w.last = why.to_string();
            if give_up_at >= w.give_up_at {
                (w.give_up_at, w.window) = (give_up_at, window);
            }
        }
    }

    /// Something at the address took a connection.
    pub(crate) fn reached(&self) {
        self.reached.store(true, Ordering::Relaxed);
    }

    /// Whether anything at the address has ever taken a connection.
    pub fn was_reached(&self) -> bool {
        self.reached.load(Ordering::Relaxed)
    }

    pub(crate) fn answered(&self) {
        if let Ok(mut f) = self.first.lock() {
            *f = First::Answered;
        }
        if let Ok(mut w) = self.waiting.lock() {
            *w = None;
        }
    }

    /// True the first time `model` is seen answering.
    pub fn first_time_model(&self, model: &str) -> bool {
        self.other_models
            .lock()
            .is_ok_and(|mut m| m.insert(model.to_string()))
    }
}
