//! The repair for a journal bound to another identity than its manifest's.

use crate::journal::lock::RunLock;
use crate::journal::{
    identity_sha256, io_error, read_manifest, read_records, write_atomically, JournalError, LineIn,
    LineOut, FOREIGN_FILE, JOURNAL_FILE, MANIFEST_FILE,
};
use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;

/// What [`rebind`] did.
#[derive(Debug, Default, PartialEq)]
pub struct Rebound {
    /// Lines kept, now all carrying the manifest's identity.
    pub kept: usize,
    /// Lines without an identity that were stamped with the manifest's.
    pub stamped: usize,
    /// Lines of another identity, moved to [`FOREIGN_FILE`].
    pub set_aside: usize,
}

/// The repair for a journal that does not match its manifest: keeps the lines written
/// under the manifest's identity, stamps the lines that carry none with it (journals of
/// older versions), and moves lines of any other identity to [`FOREIGN_FILE`], appended
/// there so that nothing is lost. The journal is replaced atomically.
pub fn rebind(dir: &Path) -> Result<Rebound, JournalError> {
    let _lock = RunLock::exclusive(dir)?;
    let manifest = read_manifest(dir)?.ok_or_else(|| JournalError::BadManifest {
        path: dir.join(MANIFEST_FILE),
        message: "missing: rebind needs the manifest to bind the journal to (rerun the \
                  original command to restore it, or pass --fresh to start over)"
            .into(),
    })?;
    let ours = identity_sha256(&manifest.identity);
    let path = dir.join(JOURNAL_FILE);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Rebound::default()),
        Err(e) => return Err(io_error(&path, "read", e)),
    };
    // Parsed first, so that a damaged line stops the repair before anything moves.
    read_records(&path, false)?;
    let mut kept = Vec::new();
    let mut foreign = Vec::new();
    let mut done = Rebound::default();
    for line in bytes.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let Ok(parsed) = serde_json::from_slice::<LineIn>(line) else {
            continue; // a torn last line
        };
        let (record, identity) = parsed.split();
        match identity.as_deref() {
            Some(h) if h != ours => {
                foreign.extend_from_slice(line);
                foreign.push(b'\n');
                done.set_aside += 1;
                continue;
            }
            Some(_) => {}
            None => done.stamped += 1,
        }
        let out = LineOut {
            record: &record,
            identity_sha256: &ours,
        };
        serde_json::to_writer(&mut kept, &out).map_err(|e| io_error(&path, "encode", e.into()))?;
        kept.push(b'\n');
        done.kept += 1;
    }
    if !foreign.is_empty() {
        let aside = dir.join(FOREIGN_FILE);
        let mut f = crate::fsutil::no_follow(&mut OpenOptions::new())
            .create(true)
            .append(true)
            .open(&aside)
            .map_err(|e| io_error(&aside, "open for appending", e))?;
        f.write_all(&foreign)
            .and_then(|_| f.sync_all())
            .map_err(|e| io_error(&aside, "append", e))?;
    }
    write_atomically(&path, &kept)?;
    Ok(done)
}
