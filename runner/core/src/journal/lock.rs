//! One writer per run folder: an advisory lock on `run.lock`, held for the life of
//! the run and released by the operating system when the process ends, crash or not.
//! The writer records its pid and command line in the file, so that a refused process
//! can name it. Readers (`score`, `merge`) take the lock shared: they wait for no one,
//! but they are refused while a writer holds it, and a writer is refused while they read.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use thiserror::Error;

pub const LOCK_FILE: &str = "run.lock";

#[derive(Debug, Error)]
pub enum LockError {
    #[error(
        "{dir}: the run is in use by another process ({holder}); \
         wait for it to finish, or choose another --out or --run"
    )]
    Busy { dir: PathBuf, holder: String },
    #[error("{path}: cannot lock: {cause}")]
    Io {
        path: PathBuf,
        cause: std::io::Error,
    },
}

/// A held lock; dropping it releases the lock.
#[derive(Debug)]
pub struct RunLock {
    _file: Option<File>,
}

impl RunLock {
    /// No lock, for reading a folder that cannot hold a lock file (read-only media,
    /// where no writer can run either).
    pub fn none() -> Result<RunLock, LockError> {
        Ok(RunLock { _file: None })
    }

    /// The writer's lock: refused at once if any other process holds the folder.
    pub fn exclusive(dir: &Path) -> Result<RunLock, LockError> {
        let (path, mut file) = open(dir)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => return Err(busy(dir, &mut file)),
            Err(TryLockError::Error(cause)) => return Err(LockError::Io { path, cause }),
        }
        // Who holds it, for whoever is refused next. Best effort: the lock is what counts.
        let me = format!(
            "pid {}: {}",
            std::process::id(),
            std::env::args().collect::<Vec<_>>().join(" ")
        );
        let _ = file
            .set_len(0)
            .and_then(|_| file.write_all(me.as_bytes()))
            .and_then(|_| file.flush());
        Ok(RunLock { _file: Some(file) })
    }

    /// A reader's lock: refused at once while a writer holds the folder.
    pub fn shared(dir: &Path) -> Result<RunLock, LockError> {
        let (path, mut file) = open(dir)?;
        match file.try_lock_shared() {
            Ok(()) => Ok(RunLock { _file: Some(file) }),
            Err(TryLockError::WouldBlock) => Err(busy(dir, &mut file)),
            Err(TryLockError::Error(cause)) => Err(LockError::Io { path, cause }),
        }
    }
}

fn open(dir: &Path) -> Result<(PathBuf, File), LockError> {
    let path = dir.join(LOCK_FILE);
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map(|f| (path.clone(), f))
        .map_err(|cause| LockError::Io { path, cause })
}

fn busy(dir: &Path, file: &mut File) -> LockError {
    let mut holder = String::new();
    let _ = file
        .seek(SeekFrom::Start(0))
        .and_then(|_| file.read_to_string(&mut holder));
    let holder = holder.trim();
    LockError::Busy {
        dir: dir.to_path_buf(),
        holder: if holder.is_empty() {
            "a reader such as `runner score`, or a writer just starting".to_string()
        } else {
            holder.to_string()
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_writer_or_a_reader_is_refused_and_told_who_holds_the_run() {
        let dir = std::env::temp_dir().join(format!("creg-lock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let held = RunLock::exclusive(&dir).unwrap();
        let err = RunLock::exclusive(&dir).unwrap_err().to_string();
        assert!(
            err.contains(&format!("pid {}", std::process::id())),
            "{err}"
        );
        assert!(matches!(RunLock::shared(&dir), Err(LockError::Busy { .. })));
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
}
