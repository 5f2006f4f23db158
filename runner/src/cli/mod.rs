//! Argument parsing and dispatch. Each subcommand lives in its own file.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

mod engine;
mod probe;
mod render;
mod score;
mod suite;

#[derive(Parser, Debug)]
#[command(
    name = "runner",
    version,
    about = "Local inference runner for the CREG suite and the Probe diagnostic"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Generate, check and summarise the CREG evaluation-v1.0 suite.
    #[command(subcommand)]
    Suite(suite::SuiteCommand),
    /// Generate, check and score the Probe diagnostic.
    #[command(subcommand)]
    Probe(probe::ProbeCommand),
    /// Run a baseline system (no network) over the suite and write its reports.
    Baseline(score::BaselineArgs),
    /// The embedded scorer: benchmarks (journal rescoring arrives with the runner).
    #[command(subcommand)]
    Score(score::ScoreCommand),
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
        Command::Suite(cmd) => suite::run(cmd),
        Command::Probe(cmd) => probe::run(cmd),
        Command::Baseline(args) => score::baseline(args),
        Command::Score(cmd) => score::run(cmd),
        Command::Render(args) => render::run(args),
        Command::Generate(args) => engine::generate(args),
        Command::Fixture(args) => engine::fixture(args),
        Command::Models(args) => engine::models(args),
        Command::Bench(args) => engine::bench(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(2)
        }
    }
}
