//! `runner smoke`: the library's smoke run (`run::smoke`) with a progress bar: a
//! fixture model and the oracle, end to end on the CPU. It fails unless every run
//! folder holds its manifest, a complete journal and the reports, and the oracle
//! scores perfectly.

use super::progress::Bar;
use anyhow::{bail, Result};
use clap::Args;
use creg::render::{Condition, Task};
use creg::smoke::{SmokeObserver, SmokeOptions};
use runner_core::journal::Recovered;
use runner_core::run::{Observer, Outcome, Running, Workload};
use runner_engine::candle::load::open::LocalOptions;
use runner_engine::candle::DeviceChoice;
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
    /// New tokens per sample (the protocol's 512 would only make the smoke slow):
    /// 16 for the fixture, 128 for a --model, enough for a real model's answer to end
    /// at its end-of-turn token.
    #[arg(long)]
    max_new_tokens: Option<usize>,
    /// The fixture model's architecture.
    #[arg(long, default_value = "qwen2", value_parser = super::engine::arch_names())]
    arch: String,
    /// A model folder in the Hugging Face layout (a real checkpoint, such as those
    /// scripts/real-models writes) to run in place of the fixture.
    #[arg(long, value_name = "FOLDER")]
    model: Option<PathBuf>,
    /// The conditions to run, comma-separated (default: the four principal ones).
    #[arg(long, value_delimiter = ',', num_args = 1..)]
    condition: Option<Vec<String>>,
    /// The tasks to run, comma-separated (default: all four).
    #[arg(long, value_delimiter = ',', num_args = 1..)]
    tasks: Option<Vec<String>>,
}

pub fn smoke(args: SmokeArgs) -> Result<ExitCode> {
    if let Some(dir) = &args.model {
        if !dir.join("config.json").is_file() {
            bail!(
                "smoke --model {}: not a model folder (no config.json there)",
                dir.display()
            );
        }
    }
    let tasks = match &args.tasks {
        None => Task::ALL.to_vec(),
        Some(names) => names
            .iter()
            .map(|n| n.parse::<Task>().map_err(anyhow::Error::msg))
            .collect::<Result<_>>()?,
    };
    let conditions = match &args.condition {
        None => Condition::ALL
            .into_iter()
            .filter(|c| c.is_principal())
            .collect(),
        Some(names) => names
            .iter()
            .map(|n| n.parse::<Condition>().map_err(anyhow::Error::msg))
            .collect::<Result<_>>()?,
    };
    let default_tokens = if args.model.is_some() { 128 } else { 16 };
    let opts = SmokeOptions {
        out: args.out,
        limit: args.limit,
        max_new_tokens: args.max_new_tokens.unwrap_or(default_tokens),
        arch: args.arch.parse().map_err(anyhow::Error::msg)?,
        model: args.model,
        conditions,
        tasks,
        command: std::env::args().collect::<Vec<_>>().join(" "),
    };
    let panel = super::engine::panel(None)?;
    let models = super::engine::EngineModels::local(LocalOptions {
        device: DeviceChoice::Cpu,
        load: Default::default(),
        max_batch: None,
        panel: &panel,
        chat_template: None,
    });
    let report = creg::smoke::smoke(&opts, &models, &mut Progress { bar: None })?;
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
        super::interrupt::watch(dir);
        super::run::print_start(dir, workload, None);
        self.bar = Some(Bar::new(workload.headline(), false));
    }

    fn finished(&mut self, dir: &Path, outcome: &Outcome) {
        if let Some(b) = self.bar.take() {
            b.finish();
        }
        super::run::print_outcome(outcome, dir);
    }
}
