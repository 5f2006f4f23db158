//! Argument parsing and dispatch. Each subcommand lives in its own file.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

mod engine;
mod probe;
mod render;
mod run;
mod score;
mod smoke;
mod suite;

#[derive(Parser, Debug)]
#[command(
    name = "runner",
    version,
    about = "Local inference runner for the CREG suite and the Probe diagnostic"
)]
#[command(args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Without a subcommand, `runner` is `runner run`.
    #[command(flatten)]
    run: run::RunArgs,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run (or resume) a model or baseline over the suite, streaming into the scorer.
    Run(run::RunArgs),
    /// Rescore run journals offline and rewrite their reports.
    Score(run::ScoreArgs),
    /// Merge shard runs into one run and write its reports.
    Merge(run::MergeArgs),
    /// A CPU smoke run of the whole path: a fixture model and the oracle, end to end.
    Smoke(smoke::SmokeArgs),
    /// Generate, check and summarise the CREG evaluation-v1.0 suite.
    #[command(subcommand)]
    Suite(suite::SuiteCommand),
    /// Generate, check and score the Probe diagnostic.
    #[command(subcommand)]
    Probe(probe::ProbeCommand),
    /// Run a baseline system (no network) over the suite and write its reports.
    Baseline(score::BaselineArgs),
    /// Render the prompts of the nine representation conditions and four tasks.
    Render(render::RenderArgs),
    /// Decode one chat prompt and print the sample as JSON.
    Generate(engine::GenerateArgs),
    /// Write a deterministic random-weight model in the Hugging Face layout.
    Fixture(engine::FixtureArgs),
    /// List the pinned model panel and what the local cache holds.
    Models(engine::ModelsArgs),
    /// Prefill and decode throughput of the engine at several batch sizes.
    Bench(engine::BenchArgs),
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        None => run::run_command(cli.run),
        Some(command) => dispatch(command),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(2)
        }
    }
}

fn dispatch(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Run(args) => run::run_command(args),
        Command::Score(args) => run::score(args),
        Command::Merge(args) => run::merge(args),
        Command::Smoke(args) => smoke::smoke(args),
        Command::Suite(cmd) => suite::run(cmd),
        Command::Probe(cmd) => probe::run(cmd),
        Command::Baseline(args) => score::baseline(args),
        Command::Render(args) => render::run(args),
        Command::Generate(args) => engine::generate(args),
        Command::Fixture(args) => engine::fixture(args),
        Command::Models(args) => engine::models(args),
        Command::Bench(args) => engine::bench(args),
    }
}
