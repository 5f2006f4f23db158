//! The progress bar of a run: samples, tokens per second, ETA, running scores, what the
//! run is doing, and a served model's requests in flight and retries. A pulse thread
//! redraws it every second, so the clock and the state move while no sample finishes
//! (a long prefill, a silent server); without a terminal it writes a line every
//! [`LOG_EVERY`] by the clock instead.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use runner_core::journal::Recovered;
use runner_core::run::{Observer, Running};
use runner_engine::activity::Activity;
use runner_engine::served::client::Traffic;
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How often a log (no terminal) gets a progress line, sample or not.
pub(super) const LOG_EVERY: Duration = Duration::from_secs(30);

/// How often the pulse redraws the bar.
const REDRAW: Duration = Duration::from_secs(1);

/// What the bar shows, shared with the pulse.
struct Shown {
    running: Running,
    /// When this process started generating (the bar's clock, reset on a resume).
    started: Instant,
    headline: String,
    /// A served model's requests in flight and retries.
    traffic: Option<Arc<Traffic>>,
    /// A local engine's counters of the work in progress, and its token count when the
    /// clock started.
    activity: Option<(Arc<Activity>, u64)>,
}

/// The progress bar: samples, tokens per second, ETA, running scores.
pub(super) struct Bar {
    pub(super) bar: ProgressBar,
    shown: Arc<Mutex<Shown>>,
    pulse: Option<Pulse>,
}

impl Bar {
    pub(super) fn new(headline: &str, quiet: bool) -> Bar {
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template(
                "{elapsed_precise} [{bar:30}] {pos}/{len} samples | {msg}",
            )
            .expect("a valid template")
            .progress_chars("=> "),
        );
        if quiet {
            bar.set_draw_target(ProgressDrawTarget::hidden());
        }
        let shown = Arc::new(Mutex::new(Shown {
            running: Running::default(),
            started: Instant::now(),
            headline: headline.to_string(),
            traffic: None,
            activity: None,
        }));
        // Without a terminal the bar is not drawn: a log gets lines by the clock.
        let log = (!std::io::stderr().is_terminal()).then(|| {
            (
                LOG_EVERY,
                Box::new(std::io::stderr()) as Box<dyn Write + Send>,
            )
        });
        let pulse = (!quiet).then(|| Pulse::start(bar.clone(), shown.clone(), log));
        Bar { bar, shown, pulse }
    }

    /// Adds a served model's requests in flight, retries and silences to what is shown.
    pub(super) fn set_traffic(&self, traffic: Option<Arc<Traffic>>) {
        if let Ok(mut s) = self.shown.lock() {
            s.traffic = traffic;
        }
    }

    /// Adds a local engine's work in progress (prefill, rows decoding, tokens so far),
    /// so that the line moves with the engine, not only when a sample finishes.
    pub(super) fn set_activity(&self, activity: Option<Arc<Activity>>) {
        if let Ok(mut s) = self.shown.lock() {
            s.activity = activity.map(|a| {
                let base = a.read().tokens;
                (a, base)
            });
        }
    }

    /// Stops the pulse and clears the bar: nothing more is drawn or logged.
    pub(super) fn finish(mut self) {
        self.pulse.take();
        self.bar.finish_and_clear();
    }

    fn update(&mut self, r: &Running) {
        self.bar.set_length(r.total as u64);
        self.bar.set_position(r.done as u64);
        if let Ok(mut s) = self.shown.lock() {
            s.running = r.clone();
            self.bar.set_message(message(&s, Instant::now()));
        }
    }
}

/// The bar's message: ETA, tokens per second, the headline score, contract failures,
/// and what the run waits on.
fn message(s: &Shown, now: Instant) -> String {
    let r = &s.running;
    let elapsed = now.saturating_duration_since(s.started);
    let secs = elapsed.as_secs_f64().max(1e-9);
    let working = s.activity.as_ref().map(|(a, base)| (a.read(), *base));
    let state = match (&s.traffic, working) {
        (Some(t), _) => super::served::bar_note(t),
        (None, Some((now, _))) if !now.state().is_empty() => format!(" | {}", now.state()),
        (None, _) if r.generated == 0 && r.done < r.total => {
            " | generating the first samples".into()
        }
        (None, _) => String::new(),
    };
    // The engine's own count moves with every step; finished samples' only at their end.
    let tokens = match working {
        Some((now, base)) => now.tokens.saturating_sub(base) as f64,
        None => r.generated_tokens as f64,
    };
    format!(
        "ETA {} | {} tok/s | {} {} | contract failures {}{state}",
        eta(r, elapsed).map_or("-".to_string(), clock),
        rate(tokens / secs),
        s.headline,
        r.accuracy()
            .map_or("-".to_string(), |a| format!("{:.1}%", 100.0 * a)),
        r.contract_failures,
    )
}

/// Tokens per second as read at a glance: a slow server's 0.3 is not shown as 0.
fn rate(per_second: f64) -> String {
    if per_second < 10.0 {
        format!("{per_second:.1}")
    } else {
        format!("{per_second:.0}")
    }
}

/// The time left at the mean rate of this process so far (samples generated over time
/// elapsed); unknown before the first sample.
fn eta(r: &Running, elapsed: Duration) -> Option<Duration> {
    if r.generated == 0 {
        return None;
    }
    let left = r.total.saturating_sub(r.done) as f64;
    Duration::try_from_secs_f64(left * elapsed.as_secs_f64() / r.generated as f64).ok()
}

/// `1h 02m`, `3m 20s`, `12s`.
pub(super) fn clock(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        0..=59 => format!("{s}s"),
        60..=3599 => format!("{}m {:02}s", s / 60, s % 60),
        _ => format!("{}h {:02}m", s / 3600, s / 60 % 60),
    }
}

/// The line a log gets every [`LOG_EVERY`]: the clock, the samples and the message.
fn log_line(s: &Shown, now: Instant) -> String {
    format!(
        "[{}] {}/{} samples | {}",
        clock(now.saturating_duration_since(s.started)),
        s.running.done,
        s.running.total,
        message(s, now)
    )
}

/// The thread that keeps the bar moving between samples; stops when dropped.
struct Pulse {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Pulse {
    /// Redraws `bar` from `shown` every [`REDRAW`], and writes a line to `log` every
    /// period, if given.
    fn start(
        bar: ProgressBar,
        shown: Arc<Mutex<Shown>>,
        mut log: Option<(Duration, Box<dyn Write + Send>)>,
    ) -> Pulse {
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        // A pulse is a nicety: where no thread can be had, the bar moves per sample.
        let thread = std::thread::Builder::new()
            .name("progress".into())
            .spawn(move || {
                let mut last_line = Instant::now();
                let mut last_redraw = Instant::now();
                while !stop2.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(100));
                    let now = Instant::now();
                    if now - last_redraw < REDRAW {
                        continue;
                    }
                    last_redraw = now;
                    let Ok(s) = shown.lock() else { break };
                    bar.set_message(message(&s, now));
                    bar.tick();
                    if let Some((every, out)) = &mut log {
                        if now - last_line >= *every {
                            last_line = now;
                            let _ = writeln!(out, "{}", log_line(&s, now));
                        }
                    }
                }
            })
            .ok();
        Pulse { stop, thread }
    }
}

impl Drop for Pulse {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            t.join().ok();
        }
    }
}

impl Observer for Bar {
    fn resumed(&mut self, r: &Running, recovered: &Recovered) {
        if !recovered.records.is_empty() {
            eprintln!(
                "resuming: {} samples already journaled{}{}",
                r.done,
                if recovered.torn_bytes > 0 {
                    format!(
                        "; a torn last line ({} bytes) was cut off",
                        recovered.torn_bytes
                    )
                } else {
                    String::new()
                },
                if recovered.duplicates > 0 {
                    format!("; {} duplicate lines ignored", recovered.duplicates)
                } else {
                    String::new()
                }
            );
        }
        self.bar.reset_elapsed();
        if let Ok(mut s) = self.shown.lock() {
            s.started = Instant::now();
            if let Some((a, base)) = &mut s.activity {
                *base = a.read().tokens;
            }
        }
        self.update(r);
    }
    fn sample(&mut self, r: &Running) {
        self.update(r);
    }
    fn journaled(&mut self, r: &Running) {
        self.update(r);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(running: Running, started: Instant) -> Shown {
        Shown {
            running,
            started,
            headline: "CREG".into(),
            traffic: None,
            activity: None,
        }
    }

    #[test]
    fn the_eta_is_the_mean_rate_of_this_process_over_what_is_left() {
        let r = Running {
            total: 100,
            done: 30,
            generated: 20,
            generated_tokens: 2000,
            ..Running::default()
        };
        // 20 samples in 40 s: 2 s each, 70 left.
        assert_eq!(
            eta(&r, Duration::from_secs(40)),
            Some(Duration::from_secs(140))
        );
        assert_eq!(clock(Duration::from_secs(140)), "2m 20s");
        assert_eq!(clock(Duration::from_secs(3 * 3600 + 125)), "3h 02m");
        let none = Running {
            generated: 0,
            ..r.clone()
        };
        assert_eq!(eta(&none, Duration::from_secs(40)), None);
        let start = Instant::now();
        let line = log_line(&shown(r, start), start + Duration::from_secs(40));
        assert!(
            line.starts_with("[40s] 30/100 samples | ETA 2m 20s | 50 tok/s | CREG"),
            "{line}"
        );
    }

    #[test]
    fn a_slow_servers_tokens_per_second_do_not_read_as_zero() {
        // A loaded CPU server: 40 samples of 15 tokens in 30 minutes.
        let r = Running {
            total: 176,
            done: 40,
            generated: 40,
            generated_tokens: 600,
            ..Running::default()
        };
        let start = Instant::now();
        let line = log_line(&shown(r, start), start + Duration::from_secs(1800));
        assert!(line.contains("| 0.3 tok/s |"), "{line}");
        // 136 left at 45 s each.
        assert!(line.contains("ETA 1h 42m"), "{line}");
        assert_eq!(rate(1234.4), "1234");
    }

    #[test]
    fn before_any_sample_the_line_says_what_the_run_is_doing_and_the_clock_moves() {
        let start = Instant::now();
        let r = Running {
            total: 176,
            ..Running::default()
        };
        let s = shown(r, start);
        let early = log_line(&s, start + Duration::from_secs(31));
        let later = log_line(&s, start + Duration::from_secs(61));
        assert!(early.starts_with("[31s] 0/176 samples | ETA -"), "{early}");
        assert!(early.contains("generating the first samples"), "{early}");
        assert!(later.starts_with("[1m 01s]"), "{later}");
    }

    #[test]
    fn a_local_engines_prefill_rows_and_tokens_show_before_any_sample_finishes() {
        let start = Instant::now();
        let activity = Arc::new(Activity::default());
        activity.generated(40); // an earlier call's tokens: not this clock's
        let mut s = shown(
            Running {
                total: 176,
                ..Running::default()
            },
            start,
        );
        s.activity = Some((activity.clone(), activity.read().tokens));
        activity.prefilling(512, 1536);
        let line = log_line(&s, start + Duration::from_secs(31));
        assert!(
            line.contains("| 0.0 tok/s |")
                && line.ends_with("| prefilling 512 of 1,536 prompt tokens"),
            "{line}"
        );
        activity.prefilling(1536, 1536);
        activity.decoding(8);
        activity.generated(8 * 40);
        let line = log_line(&s, start + Duration::from_secs(40));
        // 320 tokens in 40 s, though no sample has finished.
        assert!(
            line.contains("| 8.0 tok/s |") && line.ends_with("| decoding 8 rows"),
            "{line}"
        );
        activity.idle();
        let line = log_line(&s, start + Duration::from_secs(41));
        assert!(line.ends_with("generating the first samples"), "{line}");
    }

    /// A log that a test can read while the pulse writes it.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Write for Captured {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(b);
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_log_gets_lines_by_the_clock_while_no_sample_finishes() {
        // A backend that finishes nothing: the running figures never change, yet the
        // log gets a line each period, each with a later clock.
        let shown = Arc::new(Mutex::new(shown(
            Running {
                total: 176,
                ..Running::default()
            },
            Instant::now(),
        )));
        let log = Captured::default();
        let pulse = Pulse::start(
            ProgressBar::hidden(),
            shown,
            Some((Duration::from_secs(1), Box::new(log.clone()))),
        );
        let lines = || String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
        while lines().lines().count() < 2 {
            std::thread::sleep(Duration::from_millis(50));
        }
        drop(pulse);
        let all = lines();
        let l: Vec<&str> = all.lines().collect();
        let clock_of = |line: &str| line.split(']').next().unwrap().to_string();
        for line in &l[..2] {
            assert!(line.contains("] 0/176 samples | ETA -"), "{all}");
            assert!(line.contains("generating the first samples"), "{all}");
        }
        // A period apart: the clock (whole seconds) has moved.
        assert_ne!(clock_of(l[0]), clock_of(l[1]), "{all}");
    }
}
