//! `batches.jsonl`: how full the backend kept its decode batch, one line per backend
//! call that decoded, each tagged with the invocation (the process) that made it.
//!
//! A run is often several invocations (interrupted, then resumed), each with its own
//! backend and figures, so the figures are kept per invocation and the reports pool
//! them. A line is appended as each call ends, not once at the end of the process, so
//! a killed process loses at most its last call's figures. Backends that do not batch
//! (served models, baselines) write nothing, and folders from before this file existed
//! simply have none.

use crate::journal::{io_error, Journal, JournalError};
use runner_engine::batch::BatchStats;
use serde::{Deserialize, Serialize};
use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};

pub const BATCHES_FILE: &str = "batches.jsonl";

/// One invocation's figures: as a line of the file, one call's; as read back, the sum
/// of its calls.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Invocation {
    /// 1 for the first process that decoded in this run folder, then 2, 3, ...
    pub invocation: usize,
    /// When that process opened the run (UTC, RFC 3339).
    pub started: String,
    /// Where an invocation that `runner merge` carried into a merged folder came from;
    /// absent in a folder's own lines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<Origin>,
    #[serde(flatten)]
    pub stats: BatchStats,
}

/// A carried invocation's shard ("3/8", or the folder where the shard's manifest names
/// none) and its number there.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Origin {
    pub shard: String,
    pub invocation: usize,
}

/// The lines one process appends.
#[derive(Debug)]
pub struct BatchLog {
    path: PathBuf,
    invocation: usize,
    started: String,
}

impl BatchLog {
    /// The log of the process that holds `journal`, and with it the folder's lock, so
    /// no other process numbers its invocation at the same time. A torn last line (a
    /// crash mid-write) is cut off, so that the next line starts on a line of its own.
    pub fn open(journal: &Journal) -> Result<BatchLog, JournalError> {
        Ok(Self::open_with_lines(journal)?.0)
    }

    /// [`BatchLog::open`], with the whole lines already in the file.
    fn open_with_lines(journal: &Journal) -> Result<(BatchLog, Vec<Invocation>), JournalError> {
        let path = journal.dir().join(BATCHES_FILE);
        let lines: Vec<Invocation> = read_cutting_torn_tail(&path)?;
        let log = BatchLog {
            invocation: lines.iter().map(|l| l.invocation).max().unwrap_or(0) + 1,
            started: chrono::DateTime::<chrono::Utc>::from(std::time::SystemTime::now())
                .to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            path,
        };
        Ok((log, lines))
    }

    /// Appends one call's figures; a call that decoded nothing adds no line.
    pub fn append(&mut self, stats: &BatchStats) -> Result<(), JournalError> {
        if stats.steps == 0 && stats.row_steps == 0 {
            return Ok(());
        }
        let line = Invocation {
            invocation: self.invocation,
            started: self.started.clone(),
            from: None,
            stats: *stats,
        };
        append_lines(&self.path, &[line])
    }

    /// Carries the invocations of shard run folders into the (merged) folder `journal`
    /// holds, each renumbered after the ones already there and tagged with where it came
    /// from, so the merged reports pool every shard's figures. An invocation already
    /// carried is not carried twice, so merging again adds only what is new. Returns how
    /// many were added.
    pub fn carry_over(
        journal: &Journal,
        shards: &[(String, Vec<Invocation>)],
    ) -> Result<usize, JournalError> {
        let (log, here) = Self::open_with_lines(journal)?;
        let mut next = log.invocation;
        let mut lines = Vec::new();
        for (shard, invocations) in shards {
            for i in invocations {
                let from = Origin {
                    shard: shard.clone(),
                    invocation: i.invocation,
                };
                let carried =
                    |l: &Invocation| l.from.as_ref() == Some(&from) && l.started == i.started;
                if here.iter().any(carried) {
                    continue;
                }
                lines.push(Invocation {
                    invocation: next,
                    started: i.started.clone(),
                    from: Some(from),
                    stats: i.stats,
                });
                next += 1;
            }
        }
        append_lines(&log.path, &lines)?;
        Ok(lines.len())
    }
}

/// Appends whole lines in one write, synced; nothing to append writes nothing.
fn append_lines(path: &Path, lines: &[Invocation]) -> Result<(), JournalError> {
    if lines.is_empty() {
        return Ok(());
    }
    let mut buf = Vec::new();
    for line in lines {
        serde_json::to_writer(&mut buf, line).map_err(|e| io_error(path, "encode", e.into()))?;
        buf.push(b'\n');
    }
    crate::fsutil::no_follow(&mut OpenOptions::new())
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(&buf).and_then(|_| f.sync_data()))
        .map_err(|e| io_error(path, "append to", e))
}

/// The invocations recorded in run folder `dir`, in order, each the sum of its calls;
/// empty when the folder has no such file.
pub fn read(dir: &Path) -> Result<Vec<Invocation>, JournalError> {
    let (lines, _, _) = read_lines::<Invocation>(&dir.join(BATCHES_FILE))?;
    let mut out: Vec<Invocation> = Vec::new();
    for line in lines {
        match out.iter_mut().find(|i| i.invocation == line.invocation) {
            Some(i) => i.stats = i.stats.plus(&line.stats),
            None => out.push(line),
        }
    }
    Ok(out)
}

/// Every invocation's figures together.
pub fn pooled(invocations: &[Invocation]) -> BatchStats {
    invocations
        .iter()
        .fold(BatchStats::default(), |sum, i| sum.plus(&i.stats))
}

/// The whole lines, where they end, and the file's length; a torn last line is left
/// out, a damaged line before it is an error naming the line.
/// The whole lines of a JSONL side file of the journal (`batches.jsonl`,
/// `failed.jsonl`), opened for writing next: a torn last line (a crash mid-write) is cut
/// off, so that the next line starts on a line of its own.
pub(crate) fn read_cutting_torn_tail<T: serde::de::DeserializeOwned>(
    path: &Path,
) -> Result<Vec<T>, JournalError> {
    let (lines, good_end, len) = read_lines(path)?;
    if good_end < len {
        let cut = crate::fsutil::no_follow(&mut OpenOptions::new())
            .write(true)
            .open(path)
            .and_then(|f| f.set_len(good_end as u64));
        cut.map_err(|e| io_error(path, "cut the torn last line off", e))?;
    }
    Ok(lines)
}

/// The whole lines of a JSONL side file, the byte where they end and the file's length:
/// a line cut short can only be the last (it is left for the caller to cut); a bad line
/// before it is an error naming its number.
pub(crate) fn read_lines<T: serde::de::DeserializeOwned>(
    path: &Path,
) -> Result<(Vec<T>, usize, usize), JournalError> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), 0, 0)),
        Err(e) => return Err(io_error(path, "read", e)),
    };
    let mut lines = Vec::new();
    let mut offset = 0;
    for (index, line) in bytes.split_inclusive(|&b| b == b'\n').enumerate() {
        let Some(body) = line.strip_suffix(b"\n") else {
            break; // unterminated: a write cut short
        };
        let parsed = std::str::from_utf8(body)
            .map_err(|e| e.to_string())
            .and_then(|s| serde_json::from_str::<T>(s).map_err(|e| e.to_string()));
        match parsed {
            Ok(l) => lines.push(l),
            Err(_) if offset + line.len() == bytes.len() => break,
            Err(message) => {
                return Err(JournalError::Corrupt {
                    path: path.to_path_buf(),
                    line: index + 1,
                    message,
                })
            }
        }
        offset += line.len();
    }
    Ok((lines, offset, bytes.len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(steps: usize, row_steps: usize, tokens: usize) -> BatchStats {
        BatchStats {
            steps,
            rows_decoded: tokens,
            row_steps,
            generated_tokens: tokens,
            ..BatchStats::default()
        }
    }

    fn line(invocation: usize, s: BatchStats) -> String {
        let l = Invocation {
            invocation,
            started: "2026-01-01T00:00:00Z".into(),
            from: None,
            stats: s,
        };
        serde_json::to_string(&l).unwrap() + "\n"
    }

    fn folder(name: &str, text: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("creg-batches-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(BATCHES_FILE), text).unwrap();
        dir
    }

    #[test]
    fn calls_sum_per_invocation_and_a_torn_last_line_is_left_out() {
        let text = line(1, stats(2, 8, 6)) + &line(1, stats(3, 12, 9)) + &line(2, stats(1, 4, 4));
        let dir = folder("sum", &format!("{text}{{\"invocation\": 3, \"sta"));
        let got = read(&dir).unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[0].stats, stats(5, 20, 15));
        assert_eq!(got[1].stats, stats(1, 4, 4));
        assert_eq!(pooled(&got), stats(6, 24, 19));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_damaged_line_before_the_last_is_an_error_naming_the_line() {
        let text = line(1, stats(2, 8, 6)) + "{not json\n" + &line(2, stats(1, 4, 4));
        let dir = folder("damaged", &text);
        let err = read(&dir).unwrap_err().to_string();
        assert!(err.contains(BATCHES_FILE) && err.contains(":2:"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_folder_without_the_file_has_no_invocations() {
        let dir = folder("none", "");
        std::fs::remove_file(dir.join(BATCHES_FILE)).unwrap();
        assert_eq!(read(&dir).unwrap(), Vec::new());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
