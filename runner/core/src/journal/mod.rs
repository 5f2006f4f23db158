//! The run journal: `manifest.json` written first, then one JSON line per finished
//! sample appended to `journal.jsonl`, flushed and synced with each append (the run loop
//! appends every 16 samples or every second, `runner_core::run`).
//!
//! Resuming reads the journal back: finished samples are skipped, a torn last line
//! (a crash mid-write) is cut off without touching the lines before it, and a journal
//! whose manifest differs in anything that defines the run is refused, naming the
//! fields that differ. Nothing already written is ever rewritten.
//!
//! Each line carries the SHA-256 of the identity it was written under
//! (`identity_sha256`), so a journal stays bound to its run even when its manifest is
//! deleted or replaced: lines of another identity are refused, never resumed or scored.
//! Lines written before that binding existed carry no hash; they are trusted only
//! beside a manifest (see [`rebind`]). One process writes a run folder at a time
//! ([`lock`]).

pub mod batches;
pub mod failed;
mod line;
pub mod lock;
mod merge;
mod rebind;

pub use merge::merge;
pub use rebind::{rebind, Rebound};

use crate::facets::Facets;
use line::LineIn;
use lock::{LockError, RunLock};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use thiserror::Error;

pub const MANIFEST_FILE: &str = "manifest.json";
pub const JOURNAL_FILE: &str = "journal.jsonl";
/// Where [`rebind`] moves the lines of another identity.
pub const FOREIGN_FILE: &str = "journal.foreign.jsonl";

/// The hash a journal line carries: SHA-256 of the identity's compact JSON, keys
/// sorted and null fields left out, as [`differences`] treats a null and an absent field alike (a
/// merged run's identity drops the shard that an unsharded run writes as null).
pub fn identity_sha256(identity: &Value) -> String {
    fn without_nulls(v: &Value) -> Value {
        match v {
            // Sorted: key order is not part of an identity (and removing a key from
            // an order-preserving map moves another).
            Value::Object(m) => {
                let mut fields: Vec<(&String, &Value)> =
                    m.iter().filter(|(_, x)| !x.is_null()).collect();
                fields.sort_by_key(|(k, _)| *k);
                Value::Object(
                    fields
                        .into_iter()
                        .map(|(k, x)| (k.clone(), without_nulls(x)))
                        .collect(),
                )
            }
            Value::Array(a) => Value::Array(a.iter().map(without_nulls).collect()),
            other => other.clone(),
        }
    }
    runner_engine::digest::sha256_hex(without_nulls(identity).to_string().as_bytes())
}

#[derive(Serialize)]
struct LineOut<'a> {
    #[serde(flatten)]
    record: &'a SampleRecord,
    identity_sha256: &'a str,
}

/// A run's manifest: `identity` defines the run (resuming requires it to be equal);
/// `context` records where and when it ran and may differ between sessions.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    pub identity: Value,
    pub context: Value,
}

/// One finished sample, as journaled.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SampleRecord {
    pub request_id: String,
    pub seed: u64,
    /// What the suite says the request asks (journaled as top-level fields of the
    /// line), so that a journal can be rescored without re-planning.
    #[serde(flatten)]
    pub facets: Facets,
    pub prompt_sha256: String,
    pub text: String,
    pub tokens: usize,
    pub finish_reason: runner_engine::finish::FinishReason,
    /// Milliseconds: prefill share and decode.
    pub prefill_ms: f64,
    pub decode_ms: f64,
    /// The sample's scores, as the embedded scorer computed them while streaming.
    pub scores: Value,
}

impl SampleRecord {
    pub fn key(&self) -> (String, u64) {
        (self.request_id.clone(), self.seed)
    }
}

#[derive(Debug, Error)]
pub enum JournalError {
    // The cause is in the message, so it is not also a `source` (it would print twice).
    #[error("{path}: cannot {action}: {cause}{hint}")]
    Io {
        path: PathBuf,
        action: &'static str,
        cause: std::io::Error,
        hint: &'static str,
    },
    #[error(transparent)]
    Lock(#[from] LockError),
    #[error(
        "{path}: {foreign} of its {total} samples were written under another run's identity \
         (sha256 {other}), not this folder's{ours}. {next}"
    )]
    ForeignSamples {
        path: PathBuf,
        foreign: usize,
        total: usize,
        other: String,
        /// ` (sha256 ...)`, or how this folder's identity is known.
        ours: String,
        next: &'static str,
    },
    #[error(
        "{path}: the journal holds {samples} samples but {MANIFEST_FILE} is missing, and they \
         carry no identity to check this run against. Restore {MANIFEST_FILE}, or pass --fresh \
         to start a new run beside it."
    )]
    Unbound { path: PathBuf, samples: usize },
    #[error("{path}: not a manifest of this runner: {message}")]
    BadManifest { path: PathBuf, message: String },
    #[error("{path}: {what}; give a run folder (outputs/<model>/<run>)")]
    NotAFolder { path: PathBuf, what: &'static str },
    #[error(
        "{path}: this folder holds a run with other settings; differing fields: {}.\n\
         Resume with the same settings, or pass --fresh to start a new run beside it.",
        differences.join("; ")
    )]
    ManifestMismatch {
        path: PathBuf,
        differences: Vec<String>,
    },
    /// A merge that cannot be done as given; `problem` says why and what to give.
    #[error("{path}: {problem}")]
    Merge { path: PathBuf, problem: String },
    #[error("{path}:{line}: damaged journal line (not the last line, so not a torn write): {message}; the lines before it are intact, move the file aside to start over")]
    Corrupt {
        path: PathBuf,
        line: usize,
        message: String,
    },
}

fn io_error(path: &Path, action: &'static str, source: std::io::Error) -> JournalError {
    let hint = match source.raw_os_error() {
        Some(28) => " (the disk is full: free space and rerun the same command to resume)",
        Some(30) => " (the file system is read-only: choose another --out)",
        Some(13) | Some(1) => " (permission denied: choose another --out)",
        _ => "",
    };
    JournalError::Io {
        path: path.to_path_buf(),
        action,
        cause: source,
        hint,
    }
}

/// Field-by-field differences between two JSON values, as `path: ours vs theirs`.
pub fn differences(ours: &Value, theirs: &Value) -> Vec<String> {
    let mut out = Vec::new();
    diff_into("", ours, theirs, &mut out);
    out
}

fn diff_into(path: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                diff_into(
                    &p,
                    x.get(k).unwrap_or(&Value::Null),
                    y.get(k).unwrap_or(&Value::Null),
                    out,
                );
            }
        }
        _ if a != b => out.push(format!("{path}: this run {a} vs the folder's {b}")),
        _ => {}
    }
}

/// What opening a journal found.
#[derive(Debug, Default)]
pub struct Recovered {
    pub records: Vec<SampleRecord>,
    /// The journal line (from 1) each of `records` was read from.
    pub lines: Vec<usize>,
    /// Bytes of a torn last line that were cut off.
    pub torn_bytes: usize,
    /// Lines that repeated an earlier (request, seed); the first is kept.
    pub duplicates: usize,
    /// How many lines carry each identity hash (`None`: written before lines carried one).
    pub identities: BTreeMap<Option<String>, usize>,
}

impl Recovered {
    /// Refuses lines written under an identity other than `ours`; lines without one pass.
    fn check_bound(&self, path: &Path, ours: &str, next: &'static str) -> Result<(), JournalError> {
        let foreign: Vec<(&String, &usize)> = self
            .identities
            .iter()
            .filter_map(|(h, n)| h.as_ref().filter(|h| *h != ours).map(|h| (h, n)))
            .collect();
        match foreign.first() {
            None => Ok(()),
            Some((other, _)) => Err(JournalError::ForeignSamples {
                path: path.to_path_buf(),
                foreign: foreign.iter().map(|(_, n)| **n).sum(),
                total: self.identities.values().sum(),
                other: short(other),
                ours: format!(" (sha256 {})", short(ours)),
                next,
            }),
        }
    }
}

fn short(hash: &str) -> String {
    hash.chars().take(12).collect()
}

const RESUME_NEXT: &str =
    "Resume with the settings it was started with, pass --fresh to start a new \
    run beside it, or run `runner journal rebind DIR` to set the other samples aside.";

/// An open journal, appending; it holds the run folder's lock while open.
#[derive(Debug)]
pub struct Journal {
    dir: PathBuf,
    file: File,
    len: u64,
    identity_sha256: String,
    _lock: Option<RunLock>,
}

fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), JournalError> {
    crate::fsutil::replace(path, bytes).map_err(|e| io_error(path, "write", e))
}

pub fn read_manifest(dir: &Path) -> Result<Option<Manifest>, JournalError> {
    let path = dir.join(MANIFEST_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_error(&path, "read", e)),
    };
    serde_json::from_str(&text).map(Some).map_err(|e| {
        // serde names the unknown field; the nearest known one is added here.
        let mut message = e.to_string();
        if let Some(field) = message
            .strip_prefix("unknown field `")
            .and_then(|r| r.split('`').next())
        {
            let known = ["identity".to_string(), "context".to_string()];
            message = format!(
                "line {}: field `{field}`: {}",
                e.line(),
                crate::strict::Unknown {
                    path: field.to_string(),
                    suggestion: crate::strict::nearest(field, known.iter()),
                }
                .message()
            );
        }
        JournalError::BadManifest { path, message }
    })
}

/// Reads a journal's lines, cutting a torn last line off the file when `repair` is set.
pub fn read_records(path: &Path, repair: bool) -> Result<Recovered, JournalError> {
    let mut file = match crate::fsutil::no_follow(&mut OpenOptions::new())
        .read(true)
        .write(repair)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Recovered::default()),
        Err(e) => return Err(io_error(path, "open", e)),
    };
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(|e| io_error(path, "read", e))?;
    let mut out = Recovered::default();
    let mut seen = BTreeSet::new();
    let mut good_end = 0usize;
    let mut offset = 0usize;
    let mut line_no = 0usize;
    while offset < bytes.len() {
        line_no += 1;
        let end = bytes[offset..]
            .iter()
            .position(|b| *b == b'\n')
            .map(|i| offset + i);
        let line = &bytes[offset..end.unwrap_or(bytes.len())];
        let parsed = std::str::from_utf8(line)
            .map_err(|e| e.to_string())
            .and_then(|s| serde_json::from_str::<LineIn>(s).map_err(|e| e.to_string()));
        match (parsed.map(LineIn::split), end) {
            (Ok((record, identity_sha256)), Some(end)) => {
                *out.identities.entry(identity_sha256).or_default() += 1;
                if seen.insert(record.key()) {
                    out.records.push(record);
                    out.lines.push(line_no);
                } else {
                    out.duplicates += 1;
                }
                offset = end + 1;
                good_end = offset;
            }
            // The last line, unterminated or unparseable: a write cut short by a crash.
            (_, None) => break,
            (Err(message), Some(end)) if end + 1 == bytes.len() => {
                let _ = message;
                break;
            }
            (Err(message), Some(_)) => {
                return Err(JournalError::Corrupt {
                    path: path.to_path_buf(),
                    line: line_no,
                    message,
                })
            }
        }
    }
    out.torn_bytes = bytes.len() - good_end;
    if out.torn_bytes > 0 && repair {
        file.set_len(good_end as u64)
            .map_err(|e| io_error(path, "cut the torn last line off", e))?;
        file.sync_all().map_err(|e| io_error(path, "sync", e))?;
    }
    Ok(out)
}

impl Journal {
    /// Opens (or starts) the run in `dir` under `manifest`; returns the journal and the
    /// samples it already holds. Takes the folder's lock first: a second writer is
    /// refused before anything is read or written.
    pub fn open(dir: &Path, manifest: &Manifest) -> Result<(Journal, Recovered), JournalError> {
        std::fs::create_dir_all(dir).map_err(|e| io_error(dir, "create the run folder", e))?;
        let lock = RunLock::exclusive(dir)?;
        let manifest_path = dir.join(MANIFEST_FILE);
        let path = dir.join(JOURNAL_FILE);
        let ours = identity_sha256(&manifest.identity);
        let existing = read_manifest(dir)?;
        if let Some(existing) = &existing {
            let differing = differences(&manifest.identity, &existing.identity);
            if !differing.is_empty() {
                return Err(JournalError::ManifestMismatch {
                    path: manifest_path,
                    differences: differing,
                });
            }
        }
        let recovered = read_records(&path, true)?;
        recovered.check_bound(&path, &ours, RESUME_NEXT)?;
        let unbound = recovered.identities.get(&None).copied().unwrap_or(0);
        if existing.is_none() && unbound > 0 {
            return Err(JournalError::Unbound {
                path,
                samples: unbound,
            });
        }
        if existing.is_none() {
            // A journal whose every line carries this identity may get its manifest back.
            let text =
                serde_json::to_string_pretty(manifest).map_err(|e| JournalError::BadManifest {
                    path: manifest_path.clone(),
                    message: e.to_string(),
                })?;
            write_atomically(&manifest_path, text.as_bytes())?;
        }
        let mut file = crate::fsutil::no_follow(&mut OpenOptions::new())
            .create(true)
            .append(true)
            .open(&path)
            .map_err(|e| io_error(&path, "open for appending", e))?;
        let len = file
            .seek(SeekFrom::End(0))
            .map_err(|e| io_error(&path, "seek", e))?;
        Ok((
            Journal {
                dir: dir.to_path_buf(),
                file,
                len,
                identity_sha256: ours,
                _lock: Some(lock),
            },
            recovered,
        ))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Appends a batch and syncs it. On failure the file is cut back to where the batch
    /// began, so the journal never keeps half a batch.
    pub fn append(&mut self, records: &[SampleRecord]) -> Result<(), JournalError> {
        let path = self.dir.join(JOURNAL_FILE);
        let mut buf = Vec::new();
        for r in records {
            let line = LineOut {
                record: r,
                identity_sha256: &self.identity_sha256,
            };
            serde_json::to_writer(&mut buf, &line)
                .map_err(|e| io_error(&path, "encode", e.into()))?;
            buf.push(b'\n');
        }
        let result = self
            .file
            .write_all(&buf)
            .and_then(|_| self.file.flush())
            .and_then(|_| self.file.sync_data());
        if let Err(e) = result {
            let _ = self.file.set_len(self.len);
            return Err(io_error(&path, "append to the journal", e));
        }
        self.len += buf.len() as u64;
        Ok(())
    }
}

/// A finished run read back for scoring: its manifest and samples, the folder locked
/// shared for as long as the value lives (a writer is refused meanwhile).
#[derive(Debug)]
pub struct RunReading {
    pub manifest: Manifest,
    pub records: Vec<SampleRecord>,
    /// The journal line (from 1) each of `records` was read from.
    pub lines: Vec<usize>,
    _lock: RunLock,
}

/// Reads a run folder for scoring: refused while a writer holds it, without a
/// manifest, or when its journal holds samples of another identity.
pub fn read_run(dir: &Path) -> Result<RunReading, JournalError> {
    if !dir.is_dir() {
        return Err(JournalError::NotAFolder {
            path: dir.to_path_buf(),
            what: if dir.exists() {
                "is a file, not a run folder"
            } else {
                "the folder does not exist"
            },
        });
    }
    if !dir.join(MANIFEST_FILE).is_file() {
        return Err(JournalError::BadManifest {
            path: dir.join(MANIFEST_FILE),
            message: "missing: not a run folder (outputs/<model>/<run>)".into(),
        });
    }
    let lock = RunLock::shared(dir).or_else(|e| match e {
        // A folder that cannot take a lock file (read-only media) is still read.
        LockError::Io { .. } if dir.join(MANIFEST_FILE).exists() => RunLock::none(),
        e => Err(e),
    })?;
    let manifest = read_manifest(dir)?.ok_or_else(|| JournalError::BadManifest {
        path: dir.join(MANIFEST_FILE),
        message: "missing: not a run folder".into(),
    })?;
    let path = dir.join(JOURNAL_FILE);
    let recovered = read_records(&path, false)?;
    recovered.check_bound(
        &path,
        &identity_sha256(&manifest.identity),
        "Score it with the manifest it was written under, or run `runner journal rebind DIR` \
         to set the other samples aside.",
    )?;
    Ok(RunReading {
        manifest,
        records: recovered.records,
        lines: recovered.lines,
        _lock: lock,
    })
}
#[cfg(test)]
mod tests;
