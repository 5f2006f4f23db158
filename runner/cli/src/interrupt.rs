//! Ctrl-C during a run: say how many samples the journal holds and how to go on, then
//! exit 130 as a shell expects. Samples are journaled as they finish, so the journal is
//! the whole truth; the samples being decoded at that moment are lost and decoded again
//! on resume.

use runner_core::journal::JOURNAL_FILE;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The run folder being written, once a run has started.
static RUN: Mutex<Option<PathBuf>> = Mutex::new(None);

/// Installs the handler; without one (another handler already set) Ctrl-C ends the
/// process silently, as before.
pub fn install() {
    let _ = ctrlc::set_handler(on_interrupt);
}

/// From now on an interrupt reports on the run in `dir`.
pub fn watch(dir: &Path) {
    if let Ok(mut run) = RUN.lock() {
        *run = Some(dir.to_path_buf());
    }
}

fn on_interrupt() {
    let run = RUN.lock().ok().and_then(|r| r.clone());
    match run {
        Some(dir) => eprintln!("\n{}", interrupted(&dir)),
        None => eprintln!("\ninterrupted"),
    }
    std::process::exit(130);
}

/// What an interrupt leaves in `dir`, and the next step.
fn interrupted(dir: &Path) -> String {
    let journaled = std::fs::read(dir.join(JOURNAL_FILE))
        .map(|b| b.iter().filter(|&&c| c == b'\n').count())
        .unwrap_or(0);
    format!(
        "interrupted: {journaled} samples are journaled in {}; run the same command again to \
         resume from them (the samples being decoded now are decoded again)",
        dir.display()
    )
}
