//! One writer per run folder: an advisory lock on the run folder itself, held for the
//! life of the run and released by the operating system when the process ends, crash
//! or not. Readers (`score`, `merge`) take the lock shared: they wait for no one, but
//! they are refused while a writer holds it, and a writer is refused while they read.
//!
//! Why the folder and not `run.lock`: a lock on a file holds only as long as its name
//! does. Delete or replace `run.lock` during a run and the next process locks a new
//! file, free, while the first still writes: two writers. The folder cannot be deleted
//! while it holds the run, and after locking we check that its path still names the
//! folder we locked. `run.lock` stays, written atomically (never through a symlink
//! planted there), only to name the writer's pid and command line for whoever is
//! refused next; deleting it neither frees the folder nor breaks the lock.

use std::fs::{File, TryLockError};
use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use thiserror::Error;

pub const LOCK_FILE: &str = "run.lock";

/// What the writer writes into `run.lock` below its `pid N: command` line.
const LOCK_NOTE: &str = "\n\
# The process above holds this run folder, or held it last. The lock is the operating\n\
# system's lock on the folder itself, released when that process ends; this file only\n\
# names the holder. Do not delete it by hand: it is not a stale lock, and deleting it\n\
# frees nothing.\n";

/// How often a lock is retried when the folder's path turned out to name another folder
/// than the one locked (replaced between opening and locking).
const REPLACED_RETRIES: usize = 3;

#[derive(Debug, Error)]
pub enum LockError {
    #[error(
        "{dir}: the run is in use by another process ({holder}); wait for it to finish{advice}"
    )]
    Busy {
        dir: PathBuf,
        holder: String,
        /// What else the blocked command can do: a writer can choose another folder; a
        /// reader (`runner score`) has to wait, or read a copy.
        advice: &'static str,
    },
    #[error("{path}: cannot lock: {cause}")]
    Io {
        path: PathBuf,
        cause: std::io::Error,
    },
}

/// A held lock; dropping it releases the lock.
#[derive(Debug)]
pub struct RunLock {
    _dir: Option<File>,
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Exclusive,
    Shared,
}

impl RunLock {
    /// No lock, for reading a folder that cannot be locked.
    pub fn none() -> Result<RunLock, LockError> {
        Ok(RunLock { _dir: None })
    }

    /// The writer's lock: refused at once if any other process holds the folder.
    pub fn exclusive(dir: &Path) -> Result<RunLock, LockError> {
        let held = lock(dir, Mode::Exclusive)?;
        // Who holds it, for whoever is refused next. Best effort: the lock is what counts.
        let me = format!(
            "pid {}: {}\n{LOCK_NOTE}",
            std::process::id(),
            // An endpoint's user and password stay out of a file others can read.
            runner_engine::served::wire::redact(&std::env::args().collect::<Vec<_>>().join(" "))
        );
        let _ = crate::fsutil::write_atomic(&dir.join(LOCK_FILE), me.as_bytes());
        Ok(held)
    }

    /// A reader's lock: refused at once while a writer holds the folder.
    pub fn shared(dir: &Path) -> Result<RunLock, LockError> {
        lock(dir, Mode::Shared)
    }
}

/// Opens `dir`, locks it, and checks that the path still names the folder locked.
fn lock(dir: &Path, mode: Mode) -> Result<RunLock, LockError> {
    let io = |cause| LockError::Io {
        path: dir.to_path_buf(),
        cause,
    };
    for _ in 0..REPLACED_RETRIES {
        let file = File::open(dir).map_err(io)?;
        let taken = match mode {
            Mode::Exclusive => file.try_lock(),
            Mode::Shared => file.try_lock_shared(),
        };
        match taken {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => return Err(busy(dir, mode)),
            Err(TryLockError::Error(cause)) => return Err(io(cause)),
        }
        let locked = file.metadata().map_err(io)?;
        match std::fs::metadata(dir) {
            Ok(now) if (now.dev(), now.ino()) == (locked.dev(), locked.ino()) => {
                return Ok(RunLock { _dir: Some(file) });
            }
            // Replaced (or moved away) between opening and locking: lock what is there now.
            _ => continue,
        }
    }
    Err(io(std::io::Error::other(
        "the folder was replaced while it was being locked",
    )))
}

fn busy(dir: &Path, mode: Mode) -> LockError {
    let holder = holder(&dir.join(LOCK_FILE));
    LockError::Busy {
        advice: match mode {
            Mode::Exclusive => ", or choose another --out or --run",
            Mode::Shared => ", or score a copy of the folder (its journal so far)",
        },
        dir: dir.to_path_buf(),
        holder: if holder.is_empty() {
            "a reader such as `runner score`, or a writer just starting".to_string()
        } else {
            holder
        },
    }
}

/// The first line of `run.lock`, if it is a regular file (never read through a symlink).
fn holder(path: &Path) -> String {
    let regular = std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_file());
    let mut text = String::new();
    if regular {
        if let Ok(f) = File::open(path) {
            let _ = f.take(4096).read_to_string(&mut text);
        }
    }
    text.lines().next().unwrap_or("").trim().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("creg-lock-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_second_writer_or_a_reader_is_refused_and_told_who_holds_the_run() {
        let dir = temp("held");
        let held = RunLock::exclusive(&dir).unwrap();
        let err = RunLock::exclusive(&dir).unwrap_err().to_string();
        assert!(
            err.contains(&format!("pid {}", std::process::id())),
            "{err}"
        );
        // A writer can go elsewhere; a reader (`runner score`) cannot: it is told to
        // wait or read a copy, not to pass flags score does not have.
        assert!(err.contains("choose another --out or --run"), "{err}");
        let err = RunLock::shared(&dir).unwrap_err().to_string();
        assert!(
            err.contains("score a copy") && !err.contains("--out"),
            "{err}"
        );
        drop(held);
        let r1 = RunLock::shared(&dir).unwrap();
        let _r2 = RunLock::shared(&dir).unwrap();
        assert!(matches!(
            RunLock::exclusive(&dir),
            Err(LockError::Busy { .. })
        ));
        drop((r1, _r2));
        RunLock::exclusive(&dir).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn deleting_or_replacing_the_lock_file_frees_nothing() {
        let dir = temp("deleted");
        let held = RunLock::exclusive(&dir).unwrap();
        let text = std::fs::read_to_string(dir.join(LOCK_FILE)).unwrap();
        assert!(text.contains("Do not delete it by hand"), "{text}");
        std::fs::remove_file(dir.join(LOCK_FILE)).unwrap();
        assert!(matches!(
            RunLock::exclusive(&dir),
            Err(LockError::Busy { .. })
        ));
        std::fs::write(dir.join(LOCK_FILE), "pid 1: forged\n").unwrap();
        assert!(matches!(
            RunLock::exclusive(&dir),
            Err(LockError::Busy { .. })
        ));
        assert!(matches!(RunLock::shared(&dir), Err(LockError::Busy { .. })));
        drop(held);
        RunLock::exclusive(&dir).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_holder_is_never_written_or_read_through_a_symlink() {
        let dir = temp("symlink");
        let victim = dir.with_extension("victim");
        std::fs::write(&victim, "precious\n").unwrap();
        std::os::unix::fs::symlink(&victim, dir.join(LOCK_FILE)).unwrap();
        let held = RunLock::exclusive(&dir).unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n");
        let meta = std::fs::symlink_metadata(dir.join(LOCK_FILE)).unwrap();
        assert!(meta.file_type().is_file());
        drop(held);
        std::fs::remove_dir_all(&dir).unwrap();
        std::fs::remove_file(&victim).unwrap();
    }
}
