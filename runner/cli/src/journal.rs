//! `runner journal rebind RUN_DIR`: the repair for a journal that no longer matches
//! its manifest.

use anyhow::Result;
use clap::Subcommand;
use runner_core::journal::{self, FOREIGN_FILE, JOURNAL_FILE};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Subcommand, Debug)]
pub enum JournalCommand {
    /// Bind a run's journal to its manifest: lines written under another identity move
    /// to journal.foreign.jsonl, lines without one (older runners) are stamped.
    Rebind {
        /// The run folder (outputs/<model>/<run>).
        dir: PathBuf,
    },
}

pub fn run(cmd: JournalCommand) -> Result<ExitCode> {
    match cmd {
        JournalCommand::Rebind { dir } => {
            let done = journal::rebind(&dir)?;
            println!(
                "{}: {} samples kept ({} without an identity stamped with the manifest's); \
                 {} of another identity moved to {}",
                dir.join(JOURNAL_FILE).display(),
                done.kept,
                done.stamped,
                done.set_aside,
                dir.join(FOREIGN_FILE).display()
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}
