//! The progress bar of a run: samples, tokens per second, ETA, running scores, and a
//! served model's requests in flight and retries.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use runner_core::journal::Recovered;
use runner_core::run::{Observer, Running};
use std::io::IsTerminal;
use std::time::{Duration, Instant};

/// The progress bar: samples, tokens per second, ETA, running scores.
pub(super) struct Bar {
    pub(super) bar: ProgressBar,
    headline: String,
    started: Instant,
    quiet: bool,
    last_line: Instant,
    /// A served model's requests in flight and retries.
    pub(super) traffic: Option<std::sync::Arc<runner_engine::served::client::Traffic>>,
}

impl Bar {
    pub(super) fn new(headline: &str, quiet: bool) -> Bar {
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        bar.set_style(
            ProgressStyle::with_template(
                "{elapsed_precise} [{bar:30}] {pos}/{len} samples, ETA {eta} | {msg}",
            )
            .expect("a valid template")
            .progress_chars("=> "),
        );
        if quiet {
            bar.set_draw_target(ProgressDrawTarget::hidden());
        }
        Bar {
            bar,
            headline: headline.to_string(),
            started: Instant::now(),
            quiet,
            last_line: Instant::now(),
            traffic: None,
        }
    }

    fn message(&self, r: &Running) -> String {
        let secs = self.started.elapsed().as_secs_f64().max(1e-9);
        format!(
            "{:.0} tok/s | {} {} | contract failures {}{}",
            r.generated_tokens as f64 / secs,
            self.headline,
            r.accuracy()
                .map_or("-".to_string(), |a| format!("{:.1}%", 100.0 * a)),
            r.contract_failures,
            self.traffic
                .as_deref()
                .map_or(String::new(), super::served::bar_note)
        )
    }

    fn update(&mut self, r: &Running) {
        self.bar.set_length(r.total as u64);
        self.bar.set_position(r.done as u64);
        self.bar.set_message(self.message(r));
        // Logs (no terminal) get a plain line every 30 seconds instead of a bar.
        if !self.quiet
            && !std::io::stderr().is_terminal()
            && self.last_line.elapsed() > Duration::from_secs(30)
        {
            self.last_line = Instant::now();
            eprintln!("{}/{} samples | {}", r.done, r.total, self.message(r));
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
        self.update(r);
    }
    fn sample(&mut self, r: &Running) {
        self.update(r);
    }
    fn journaled(&mut self, r: &Running) {
        self.update(r);
    }
}
