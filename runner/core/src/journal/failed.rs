//! `failed.jsonl`: samples that cannot be had however often they are asked (a served
//! model's server refuses the prompt, or answers what cannot be read), one line each
//! with the reason, appended and synced as each fails.
//!
//! A resume skips them, so a run does not stop on the same sample every time; `runner
//! run --retry-failed` asks for them again, and a sample answered later is taken from
//! the journal, whatever this file says. The journal itself is untouched by failures:
//! folders without this file, and programs that do not know it, read as before.

use crate::journal::batches::{read_cutting_torn_tail, read_lines};
use crate::journal::{identity_sha256, io_error, Journal, JournalError, Manifest};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};

pub const FAILED_FILE: &str = "failed.jsonl";

/// One failed (request, seed), as a line of the file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Failure {
    pub request_id: String,
    pub seed: u64,
    pub reason: String,
    /// The identity the line was written under, as in the journal.
    pub identity_sha256: String,
}

/// The failures of the run whose journal is open, and appending more.
#[derive(Debug)]
pub struct FailedLog {
    path: PathBuf,
    identity_sha256: String,
    /// The latest reason per (request, seed), of this run's identity only.
    pub known: BTreeMap<(String, u64), String>,
}

impl FailedLog {
    /// Reads the file of the folder `journal` holds (locked); a torn last line is cut off.
    pub fn open(journal: &Journal) -> Result<FailedLog, JournalError> {
        let path = journal.dir().join(FAILED_FILE);
        let lines: Vec<Failure> = read_cutting_torn_tail(&path)?;
        let ours = journal.identity_sha256.clone();
        let known = lines
            .into_iter()
            .filter(|f| f.identity_sha256 == ours)
            .map(|f| ((f.request_id, f.seed), f.reason))
            .collect();
        Ok(FailedLog {
            path,
            identity_sha256: ours,
            known,
        })
    }

    /// Appends and syncs one failure.
    pub fn append(
        &mut self,
        request_id: &str,
        seed: u64,
        reason: &str,
    ) -> Result<(), JournalError> {
        let line = Failure {
            request_id: request_id.to_string(),
            seed,
            reason: reason.to_string(),
            identity_sha256: self.identity_sha256.clone(),
        };
        append_lines(&self.path, &[line])?;
        self.known
            .insert((request_id.to_string(), seed), reason.to_string());
        Ok(())
    }
}

/// Appends `lines` in one write and syncs them; the file is never followed through a
/// symlink (as the journal).
fn append_lines(path: &Path, lines: &[Failure]) -> Result<(), JournalError> {
    let mut buf = Vec::new();
    for line in lines {
        serde_json::to_writer(&mut buf, line).map_err(|e| io_error(path, "encode", e.into()))?;
        buf.push(b'\n');
    }
    let result = crate::fsutil::no_follow(&mut OpenOptions::new())
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut f| f.write_all(&buf).and_then(|_| f.sync_data()));
    result.map_err(|e| io_error(path, "append to", e))
}

/// A shard run folder's failures, for [`carry_over`]: the lines of the identity its
/// manifest names (a line of another run is not the shard's), the latest reason of each.
/// Read before a merge writes anything, so a damaged file stops it with nothing done.
pub fn of_shard(dir: &Path, manifest: &Manifest) -> Result<Vec<Failure>, JournalError> {
    let (lines, _, _) = read_lines::<Failure>(&dir.join(FAILED_FILE))?;
    Ok(latest(lines, &identity_sha256(&manifest.identity))
        .into_values()
        .collect())
}

/// Carries shards' failures ([`of_shard`]) into the merged folder `journal` holds: those
/// whose sample no shard answered (`answered`), bound to the merged run's identity (a
/// shard's names its shard, the merged run's none), so its reports show them and a resume
/// skips them. A failure the folder already holds with that reason is not written again
/// (a merge rerun); a torn last line of its file is cut off first. Returns how many.
pub fn carry_over(
    journal: &Journal,
    failures: Vec<Failure>,
    answered: &BTreeSet<(String, u64)>,
) -> Result<usize, JournalError> {
    let log = FailedLog::open(journal)?;
    let mut fresh: BTreeMap<(String, u64), Failure> = BTreeMap::new();
    for f in failures {
        let key = (f.request_id.clone(), f.seed);
        if answered.contains(&key) || log.known.get(&key) == Some(&f.reason) {
            continue;
        }
        let line = Failure {
            identity_sha256: log.identity_sha256.clone(),
            ..f
        };
        fresh.insert(key, line);
    }
    let lines: Vec<Failure> = fresh.into_values().collect();
    if !lines.is_empty() {
        append_lines(&log.path, &lines)?;
    }
    Ok(lines.len())
}

/// The lines of identity `ours`, the latest of each (request, seed).
fn latest(lines: Vec<Failure>, ours: &str) -> BTreeMap<(String, u64), Failure> {
    let mut latest = BTreeMap::new();
    for f in lines.into_iter().filter(|f| f.identity_sha256 == ours) {
        latest.insert((f.request_id.clone(), f.seed), f);
    }
    latest
}

/// The failures a run folder's reports show: the lines of the identity its manifest
/// names whose sample the journal does not hold (answered later, on a retry), the latest
/// reason of each, by request and seed. Reads only, and reads the journal only when
/// there is a failure to weigh; a folder without the file or a manifest has none.
pub fn standing(dir: &Path) -> Result<Vec<Failure>, JournalError> {
    let (lines, _, _) = read_lines::<Failure>(&dir.join(FAILED_FILE))?;
    if lines.is_empty() {
        return Ok(Vec::new());
    }
    let Some(manifest) = crate::journal::read_manifest(dir)? else {
        return Ok(Vec::new());
    };
    let ours = identity_sha256(&manifest.identity);
    let journal = dir.join(crate::journal::JOURNAL_FILE);
    let answered: BTreeSet<(String, u64)> = crate::journal::read_records(&journal, false)?
        .records
        .iter()
        .map(crate::journal::SampleRecord::key)
        .collect();
    Ok(latest(lines, &ours)
        .into_iter()
        .filter(|(k, _)| !answered.contains(k))
        .map(|(_, f)| f)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_are_read_back_and_a_torn_last_line_is_cut() {
        let dir = std::env::temp_dir().join(format!("creg-failed-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(FAILED_FILE);
        let line = |id: &str, h: &str| {
            format!(
                "{{\"request_id\":\"{id}\",\"seed\":0,\"reason\":\"r\",\"identity_sha256\":\"{h}\"}}\n"
            )
        };
        std::fs::write(
            &path,
            format!("{}{}{{\"req", line("a", "x"), line("b", "y")),
        )
        .unwrap();
        let (lines, good_end, len) = read_lines::<Failure>(&path).unwrap();
        assert_eq!(lines.len(), 2);
        assert_eq!(len - good_end, "{\"req".len());
        std::fs::write(&path, format!("garbage\n{}", line("a", "x"))).unwrap();
        assert!(matches!(
            read_lines::<Failure>(&path),
            Err(JournalError::Corrupt { line: 1, .. })
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_standing_failures_are_this_identitys_unanswered_ones() {
        use crate::journal::{Manifest, SampleRecord};
        let dir = std::env::temp_dir().join(format!("creg-standing-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        assert!(standing(&dir).unwrap().is_empty(), "no folder, no failures");
        let manifest = Manifest {
            identity: serde_json::json!({"model": {"name": "served"}}),
            context: serde_json::json!({}),
        };
        let (mut journal, _) = Journal::open(&dir, &manifest).unwrap();
        let mut log = FailedLog::open(&journal).unwrap();
        log.append("a", 1, "body over 10 MB").unwrap();
        log.append("b", 1, "first reason").unwrap();
        log.append("b", 1, "lone surrogate").unwrap();
        log.append("c", 2, "body over 10 MB").unwrap();
        // Answered on a retry: the journal wins.
        journal
            .append(&[SampleRecord {
                request_id: "c".into(),
                seed: 2,
                facets: crate::facets::Facets::new()
                    .with("scenario", "s")
                    .with("condition", "x")
                    .with("task", "belief")
                    .with("step", 1),
                prompt_sha256: "00".into(),
                text: "{}".into(),
                tokens: 1,
                finish_reason: runner_engine::finish::FinishReason::Stop,
                prefill_ms: 0.0,
                decode_ms: 0.0,
                scores: serde_json::Value::Null,
            }])
            .unwrap();
        // A line of another run's identity is not this run's.
        let mut other = std::fs::read_to_string(dir.join(FAILED_FILE)).unwrap();
        other.push_str(
            "{\"request_id\":\"d\",\"seed\":0,\"reason\":\"r\",\"identity_sha256\":\"other\"}\n",
        );
        std::fs::write(dir.join(FAILED_FILE), other).unwrap();
        let got: Vec<(String, u64, String)> = standing(&dir)
            .unwrap()
            .into_iter()
            .map(|f| (f.request_id, f.seed, f.reason))
            .collect();
        assert_eq!(
            got,
            [
                ("a".into(), 1, "body over 10 MB".into()),
                ("b".into(), 1, "lone surrogate".into())
            ]
        );
        drop(journal);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
