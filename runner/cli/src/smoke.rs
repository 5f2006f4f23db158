//! `runner smoke`: the library's smoke run (`run::smoke`) with a progress bar: a
//! fixture model and the oracle, end to end on the CPU. It fails unless every run
//! folder holds its manifest, a complete journal and the reports, and the oracle
//! scores perfectly.

use super::progress::Bar;
use anyhow::{bail, Result};
use clap::Args;
use creg::smoke::{SmokeObserver, SmokeOptions};
use runner_core::journal::Recovered;
use runner_core::run::{Observer, Outcome, Running, Workload};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Args, Debug)]
pub struct SmokeArgs {
    /// The smoke run's own folder; its previous smoke runs are replaced.
    #[arg(long, default_value = "outputs/smoke")]
    out: PathBuf,
    /// Scenarios per regime.
    #[arg(long, default_value_t = 1)]
    limit: usize,
    /// New tokens per fixture sample (the protocol's 512 would only make the smoke slow).
    #[arg(long, default_value_t = 16)]
    max_new_tokens: usize,
    /// The fixture model's architecture.
    #[arg(long, default_value = "qwen2", value_parser = super::engine::arch_names())]
    arch: String,
}

pub fn smoke(args: SmokeArgs) -> Result<ExitCode> {
    let opts = SmokeOptions {
        out: args.out,
        limit: args.limit,
        max_new_tokens: args.max_new_tokens,
        arch: args.arch.parse().map_err(anyhow::Error::msg)?,
        command: std::env::args().collect::<Vec<_>>().join(" "),
    };
    let panel = super::engine::panel(None)?;
    let report = creg::smoke::smoke(&opts, &panel, &mut Progress { bar: None })?;
    if !report.failures.is_empty() {
        bail!("smoke run failed:\n  {}", report.failures.join("\n  "));
    }
    println!(
        "\nsmoke run passed: {} runs with manifest, complete journal and reports; the oracle scores perfectly",
        report.runs.len()
    );
    Ok(ExitCode::SUCCESS)
}

/// A progress bar per run, and each run's summary as it ends.
struct Progress {
    bar: Option<Bar>,
}

impl Observer for Progress {
    fn resumed(&mut self, running: &Running, recovered: &Recovered) {
        if let Some(b) = &mut self.bar {
            b.resumed(running, recovered);
        }
    }
    fn sample(&mut self, running: &Running) {
        if let Some(b) = &mut self.bar {
            b.sample(running);
        }
    }
    fn journaled(&mut self, running: &Running) {
        if let Some(b) = &mut self.bar {
            b.journaled(running);
        }
    }
}

impl SmokeObserver for Progress {
    fn starting(&mut self, model: &str, dir: &Path, workload: &dyn Workload) {
        println!("\n==> smoke run: {model}\n");
        super::run::print_start(dir, workload, None);
        self.bar = Some(Bar::new(workload.headline(), false));
    }

    fn finished(&mut self, dir: &Path, outcome: &Outcome) {
        if let Some(b) = self.bar.take() {
            b.bar.finish_and_clear();
        }
        super::run::print_outcome(outcome, dir);
    }
}
