//! `runner suite ...`

use clap::Subcommand;
use std::process::ExitCode;

#[derive(Subcommand, Debug)]
pub enum SuiteCommand {
    /// Print the statistics table of the embedded frozen suite.
    Stats,
}

pub fn run(cmd: SuiteCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        SuiteCommand::Stats => Ok(ExitCode::SUCCESS),
    }
}
