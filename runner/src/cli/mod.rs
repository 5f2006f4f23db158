//! Argument parsing and dispatch. Each subcommand lives in its own file.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

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
}

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Suite(cmd) => suite::run(cmd),
        Command::Probe(cmd) => probe::run(cmd),
        Command::Baseline(args) => score::baseline(args),
        Command::Score(cmd) => score::run(cmd),
        Command::Render(args) => render::run(args),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(2)
        }
    }
}
