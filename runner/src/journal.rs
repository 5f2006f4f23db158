//! The run journal: `manifest.json` written first, then one JSON line per finished
//! sample appended to `journal.jsonl`, flushed and synced per batch.
//!
//! Resuming reads the journal back: finished samples are skipped, a torn last line
//! (a crash mid-write) is cut off without touching the lines before it, and a journal
//! whose manifest differs in anything that defines the run is refused, naming the
//! fields that differ. Nothing already written is ever rewritten.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeSet;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use thiserror::Error;

pub const MANIFEST_FILE: &str = "manifest.json";
pub const JOURNAL_FILE: &str = "journal.jsonl";

/// A run's manifest: `identity` defines the run (resuming requires it to be equal);
/// `context` records where and when it ran and may differ between sessions.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub identity: Value,
    pub context: Value,
}

/// One finished sample, as journaled.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SampleRecord {
    pub request_id: String,
    pub seed: u64,
    /// What the request asks, so that a journal can be rescored without re-planning:
    /// the scenario (or Probe item), condition, task and arrival step.
    pub scenario: String,
    pub condition: String,
    pub task: String,
    pub step: usize,
    pub prompt_sha256: String,
    pub text: String,
    pub tokens: usize,
    pub finish_reason: crate::score::contract::FinishReason,
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
    #[error("{path}: cannot {action}: {source}{hint}")]
    Io {
        path: PathBuf,
        action: &'static str,
        source: std::io::Error,
        hint: &'static str,
    },
    #[error("{path}: not a manifest of this runner: {message}")]
    BadManifest { path: PathBuf, message: String },
    #[error(
        "{path}: this folder holds a run with another manifest; differing fields: {}.\n\
         Resume with the same settings, or pass --fresh to start a new run beside it.",
        differences.join("; ")
    )]
    ManifestMismatch {
        path: PathBuf,
        differences: Vec<String>,
    },
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
        source,
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
        _ if a != b => out.push(format!("{path}: this run {a} vs journal {b}")),
        _ => {}
    }
}

/// What opening a journal found.
#[derive(Debug, Default)]
pub struct Recovered {
    pub records: Vec<SampleRecord>,
    /// Bytes of a torn last line that were cut off.
    pub torn_bytes: usize,
    /// Lines that repeated an earlier (request, seed); the first is kept.
    pub duplicates: usize,
}

/// An open journal, appending.
#[derive(Debug)]
pub struct Journal {
    dir: PathBuf,
    file: File,
    len: u64,
}

fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), JournalError> {
    let tmp = path.with_extension("json.tmp");
    let mut f = File::create(&tmp).map_err(|e| io_error(&tmp, "create", e))?;
    f.write_all(bytes).map_err(|e| io_error(&tmp, "write", e))?;
    f.sync_all().map_err(|e| io_error(&tmp, "sync", e))?;
    std::fs::rename(&tmp, path).map_err(|e| io_error(path, "rename into place", e))
}

pub fn read_manifest(dir: &Path) -> Result<Option<Manifest>, JournalError> {
    let path = dir.join(MANIFEST_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_error(&path, "read", e)),
    };
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| JournalError::BadManifest {
            path,
            message: e.to_string(),
        })
}

/// Reads a journal's lines, cutting a torn last line off the file when `repair` is set.
pub fn read_records(path: &Path, repair: bool) -> Result<Recovered, JournalError> {
    let mut file = match OpenOptions::new().read(true).write(repair).open(path) {
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
            .and_then(|s| serde_json::from_str::<SampleRecord>(s).map_err(|e| e.to_string()));
        match (parsed, end) {
            (Ok(record), Some(end)) => {
                if seen.insert(record.key()) {
                    out.records.push(record);
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
    /// samples it already holds.
    pub fn open(dir: &Path, manifest: &Manifest) -> Result<(Journal, Recovered), JournalError> {
        std::fs::create_dir_all(dir).map_err(|e| io_error(dir, "create the run folder", e))?;
        let manifest_path = dir.join(MANIFEST_FILE);
        match read_manifest(dir)? {
            Some(existing) => {
                let differing = differences(&manifest.identity, &existing.identity);
                if !differing.is_empty() {
                    return Err(JournalError::ManifestMismatch {
                        path: manifest_path,
                        differences: differing,
                    });
                }
            }
            None => {
                let text = serde_json::to_string_pretty(manifest).map_err(|e| {
                    JournalError::BadManifest {
                        path: manifest_path.clone(),
                        message: e.to_string(),
                    }
                })?;
                write_atomically(&manifest_path, text.as_bytes())?;
            }
        }
        let path = dir.join(JOURNAL_FILE);
        let recovered = read_records(&path, true)?;
        let mut file = OpenOptions::new()
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
            serde_json::to_writer(&mut buf, r).map_err(|e| io_error(&path, "encode", e.into()))?;
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

/// Combines shard runs into `out`: their manifests must agree on everything but the
/// shard; samples are united by (request, seed).
pub fn merge(dirs: &[PathBuf], out: &Path) -> Result<usize, JournalError> {
    let mut first: Option<(PathBuf, Manifest)> = None;
    let mut records = Vec::new();
    for dir in dirs {
        let manifest = read_manifest(dir)?.ok_or_else(|| JournalError::BadManifest {
            path: dir.join(MANIFEST_FILE),
            message: "missing".into(),
        })?;
        let mut identity = manifest.identity.clone();
        if let Some(obj) = identity.as_object_mut() {
            obj.remove("shard");
        }
        match &first {
            None => {
                first = Some((
                    dir.clone(),
                    Manifest {
                        identity,
                        context: manifest.context,
                    },
                ))
            }
            Some((_, m)) => {
                let differing = differences(&m.identity, &identity);
                if !differing.is_empty() {
                    return Err(JournalError::ManifestMismatch {
                        path: dir.join(MANIFEST_FILE),
                        differences: differing,
                    });
                }
            }
        }
        records.extend(read_records(&dir.join(JOURNAL_FILE), false)?.records);
    }
    let Some((_, manifest)) = first else {
        return Ok(0);
    };
    let (mut journal, existing) = Journal::open(out, &manifest)?;
    let mut seen: BTreeSet<(String, u64)> =
        existing.records.iter().map(SampleRecord::key).collect();
    let fresh: Vec<SampleRecord> = records
        .into_iter()
        .filter(|r| seen.insert(r.key()))
        .collect();
    journal.append(&fresh)?;
    Ok(seen.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::score::contract::FinishReason;
    use serde_json::json;

    fn temp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("creg-journal-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    fn manifest(revision: &str) -> Manifest {
        Manifest {
            identity: json!({"model": {"name": "fixture", "revision": revision}, "sampling": {"temperature": 0.2}}),
            context: json!({"device": "cpu"}),
        }
    }

    fn record(i: usize) -> SampleRecord {
        SampleRecord {
            request_id: format!("req-{i:04}"),
            seed: 42,
            scenario: "s".into(),
            condition: "full_graph".into(),
            task: "belief".into(),
            step: 1,
            prompt_sha256: "00".into(),
            text: format!("{{\"answer\": {i}}}"),
            tokens: 5,
            finish_reason: FinishReason::Stop,
            prefill_ms: 1.0,
            decode_ms: 2.0,
            scores: json!({"top_state_correct": true}),
        }
    }

    #[test]
    fn records_survive_a_reopen_and_are_not_duplicated() {
        let dir = temp("reopen");
        let (mut j, rec) = Journal::open(&dir, &manifest("a")).unwrap();
        assert!(rec.records.is_empty());
        j.append(&[record(1), record(2)]).unwrap();
        drop(j);
        let (mut j, rec) = Journal::open(&dir, &manifest("a")).unwrap();
        assert_eq!(rec.records, vec![record(1), record(2)]);
        j.append(&[record(2), record(3)]).unwrap();
        let again = read_records(&dir.join(JOURNAL_FILE), false).unwrap();
        assert_eq!(again.records.len(), 3);
        assert_eq!(again.duplicates, 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_torn_last_line_is_cut_off_and_nothing_before_it_is_lost() {
        let dir = temp("torn");
        let (mut j, _) = Journal::open(&dir, &manifest("a")).unwrap();
        j.append(&[record(1), record(2)]).unwrap();
        drop(j);
        let path = dir.join(JOURNAL_FILE);
        let before = std::fs::read(&path).unwrap();
        let mut torn = before.clone();
        torn.extend_from_slice(b"{\"request_id\": \"req-0003\", \"se");
        std::fs::write(&path, &torn).unwrap();
        let (_, rec) = Journal::open(&dir, &manifest("a")).unwrap();
        assert_eq!(rec.records.len(), 2);
        assert_eq!(rec.torn_bytes, torn.len() - before.len());
        assert_eq!(
            std::fs::read(&path).unwrap(),
            before,
            "the file is back to its good prefix"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_empty_journal_resumes_from_nothing() {
        let dir = temp("empty");
        let (j, _) = Journal::open(&dir, &manifest("a")).unwrap();
        drop(j);
        std::fs::write(dir.join(JOURNAL_FILE), b"").unwrap();
        let (_, rec) = Journal::open(&dir, &manifest("a")).unwrap();
        assert!(rec.records.is_empty() && rec.torn_bytes == 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn another_runs_manifest_is_refused_naming_what_differs() {
        let dir = temp("mismatch");
        let (mut j, _) = Journal::open(&dir, &manifest("a")).unwrap();
        j.append(&[record(1)]).unwrap();
        drop(j);
        let err = Journal::open(&dir, &manifest("b")).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("model.revision: this run \"b\" vs journal \"a\""),
            "{msg}"
        );
        assert!(msg.contains("--fresh"), "{msg}");
        assert_eq!(
            read_records(&dir.join(JOURNAL_FILE), false)
                .unwrap()
                .records
                .len(),
            1
        );
        // The context (device, times) may differ freely.
        let mut moved = manifest("a");
        moved.context = json!({"device": "cuda:0"});
        assert!(Journal::open(&dir, &moved).is_ok());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_damaged_middle_line_is_reported_not_silently_dropped() {
        let dir = temp("corrupt");
        let (mut j, _) = Journal::open(&dir, &manifest("a")).unwrap();
        j.append(&[record(1), record(2), record(3)]).unwrap();
        drop(j);
        let path = dir.join(JOURNAL_FILE);
        let text = std::fs::read_to_string(&path).unwrap();
        let damaged = text.replacen("req-0002", "req-0002\u{0}\"", 1);
        std::fs::write(&path, &damaged).unwrap();
        let err = Journal::open(&dir, &manifest("a")).unwrap_err();
        assert!(
            matches!(err, JournalError::Corrupt { line: 2, .. }),
            "{err}"
        );
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            damaged,
            "nothing was rewritten"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_folder_that_cannot_be_written_gives_a_clear_error() {
        // /proc refuses new entries even to root.
        let err =
            Journal::open(Path::new("/proc/creg-runner-test/run"), &manifest("a")).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.starts_with("/proc/creg-runner-test/run: cannot create the run folder"),
            "{msg}"
        );
    }

    #[test]
    fn a_full_disk_keeps_every_earlier_line() {
        let dir = temp("full");
        let (mut j, _) = Journal::open(&dir, &manifest("a")).unwrap();
        j.append(&[record(1)]).unwrap();
        drop(j);
        // Swap the journal's file for the full device behind the journal's back.
        let path = dir.join(JOURNAL_FILE);
        let good = std::fs::read(&path).unwrap();
        let mut j = Journal {
            dir: dir.clone(),
            file: OpenOptions::new().append(true).open("/dev/full").unwrap(),
            len: good.len() as u64,
        };
        let err = j.append(&[record(2)]).unwrap_err();
        assert!(err.to_string().contains("the disk is full"), "{err}");
        assert_eq!(std::fs::read(&path).unwrap(), good);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn shards_merge_into_their_union_and_mismatched_shards_are_refused() {
        let (a, b, out) = (temp("shard-a"), temp("shard-b"), temp("merged"));
        let shard = |i: usize| {
            let mut m = manifest("a");
            m.identity["shard"] = json!(format!("{i}/2"));
            m
        };
        let (mut ja, _) = Journal::open(&a, &shard(0)).unwrap();
        ja.append(&[record(1), record(3)]).unwrap();
        let (mut jb, _) = Journal::open(&b, &shard(1)).unwrap();
        jb.append(&[record(2), record(4), record(3)]).unwrap();
        assert_eq!(merge(&[a.clone(), b.clone()], &out).unwrap(), 4);
        let merged = read_records(&out.join(JOURNAL_FILE), false).unwrap();
        assert_eq!(merged.records.len(), 4);

        let other = temp("shard-other");
        Journal::open(&other, &manifest("b")).unwrap();
        let err = merge(&[a.clone(), other.clone()], &temp("merged-bad")).unwrap_err();
        assert!(err.to_string().contains("model.revision"), "{err}");
        for d in [a, b, out, other] {
            std::fs::remove_dir_all(d).unwrap();
        }
    }
}
