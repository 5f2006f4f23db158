//! Ctrl-C during a run. A first Ctrl-C tells the backend to start no new work: the rows
//! it is decoding (a served model's requests in flight) finish and are journaled, the
//! run stops there and says how to go on, exit 130. A second Ctrl-C stops at once: what
//! is journaled is kept, and the samples still decoding are decoded again on resume.
//! A backend whose calls end at once (a baseline) stops at the first Ctrl-C.

use runner_core::journal::JOURNAL_FILE;
use runner_engine::activity::Activity;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The run being written, once a run has started.
static RUN: Mutex<Option<Watched>> = Mutex::new(None);
/// Ctrl-C presses so far.
static PRESSES: AtomicUsize = AtomicUsize::new(0);

struct Watched {
    dir: PathBuf,
    /// Where to say "start nothing new"; None: a first Ctrl-C stops at once.
    admission: Option<Arc<Activity>>,
    /// The engine's counters, for the time the rows in flight take.
    activity: Option<(Arc<Activity>, u64, Instant)>,
    /// New tokens per sample at most.
    max_new_tokens: usize,
}

/// Installs the handler; without one (another handler already set) Ctrl-C ends the
/// process silently, as before.
pub fn install() {
    let _ = ctrlc::set_handler(on_interrupt);
}

/// From now on an interrupt reports on the run in `dir` and stops at once.
pub fn watch(dir: &Path) {
    watch_draining(dir, None, None, 0);
}

/// From now on an interrupt reports on the run in `dir`; with `admission`, a first one
/// drains the backend instead of stopping at once.
pub fn watch_draining(
    dir: &Path,
    admission: Option<Arc<Activity>>,
    activity: Option<Arc<Activity>>,
    max_new_tokens: usize,
) {
    if let Ok(mut run) = RUN.lock() {
        *run = Some(Watched {
            dir: dir.to_path_buf(),
            admission,
            activity: activity.map(|a| {
                let base = a.read().tokens;
                (a, base, Instant::now())
            }),
            max_new_tokens,
        });
    }
}

fn on_interrupt() {
    let first = PRESSES.fetch_add(1, Ordering::SeqCst) == 0;
    let Ok(run) = RUN.lock() else {
        std::process::exit(130);
    };
    match run.as_ref() {
        Some(w) => match (&w.admission, first) {
            (Some(admission), true) => {
                admission.stop_admitting();
                eprintln!("\n{}", draining(w));
            }
            _ => {
                eprintln!("\n{}", interrupted(&w.dir));
                std::process::exit(130);
            }
        },
        None => {
            eprintln!("\ninterrupted");
            std::process::exit(130);
        }
    }
}

/// What a first Ctrl-C does now, and how long it may take.
fn draining(w: &Watched) -> String {
    let in_flight = match &w.activity {
        Some((a, base, since)) => {
            let now = a.read();
            let rate = now.tokens.saturating_sub(*base) as f64 / since.elapsed().as_secs_f64();
            let rows = now.rows as usize;
            match drain_time(rows, w.max_new_tokens, rate) {
                Some(t) => format!(
                    "the {rows} rows in flight finish and are journaled first (at most about \
                     {}: up to {} new tokens each at {rate:.1} tok/s)",
                    super::progress::clock(t),
                    w.max_new_tokens
                ),
                None => "the rows in flight finish and are journaled first".to_string(),
            }
        }
        None => "the requests in flight finish and are journaled first (each within \
                 --request-timeout)"
            .to_string(),
    };
    format!(
        "Ctrl-C: stopping after the work in flight: no new requests start; {in_flight}. \
         Press Ctrl-C again to stop at once (what is journaled is kept)"
    )
}

/// The longest the rows in flight can take: every row decodes together, so it is the
/// steps of the longest answer left (`max_new_tokens` at most), each step `rows` tokens
/// at `tokens_per_s`. None without a rate or rows.
pub fn drain_time(rows: usize, max_new_tokens: usize, tokens_per_s: f64) -> Option<Duration> {
    if rows == 0 || tokens_per_s.is_nan() || tokens_per_s <= 0.0 {
        return None;
    }
    Duration::try_from_secs_f64((rows * max_new_tokens) as f64 / tokens_per_s).ok()
}

/// What an interrupt leaves in `dir`, and the next step.
pub fn interrupted(dir: &Path) -> String {
    let journaled = std::fs::read(dir.join(JOURNAL_FILE))
        .map(|b| b.iter().filter(|&&c| c == b'\n').count())
        .unwrap_or(0);
    format!(
        "interrupted: {journaled} samples are journaled in {}; run the same command again to \
         resume from them (the samples not journaled are decoded again)",
        dir.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_drain_takes_the_longest_answer_at_the_rows_rate() {
        // 8 rows at 80 tok/s: 10 steps a second, 512 steps at most.
        assert_eq!(
            drain_time(8, 512, 80.0),
            Some(Duration::from_secs_f64(51.2))
        );
        assert_eq!(drain_time(0, 512, 80.0), None);
        assert_eq!(drain_time(8, 512, 0.0), None);
        assert_eq!(drain_time(8, 512, f64::NAN), None);
    }
}
