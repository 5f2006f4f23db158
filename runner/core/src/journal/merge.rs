//! `runner merge`: shard runs combined into one run folder.

use super::{
    batches, differences, failed, read_run, Journal, JournalError, Manifest, SampleRecord,
    MANIFEST_FILE,
};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Combines shard runs into `out`: their manifests must agree on everything but the
/// shard; samples are united by (request, seed), and each shard's batch figures are
/// carried over, tagged with the shard (see [`batches::BatchLog::carry_over`]), and so are
/// their failed samples no shard answered (see [`failed::carry_over`]). A shard given
/// twice, or `out` among the shards, is refused before anything is read.
pub fn merge(dirs: &[PathBuf], out: &Path) -> Result<usize, JournalError> {
    check_folders(dirs, out)?;
    let mut first: Option<(PathBuf, Manifest)> = None;
    let mut records = Vec::new();
    let mut readings = Vec::new();
    let (mut batch_figures, mut failures) = (Vec::new(), Vec::new());
    for dir in dirs {
        let reading = read_run(dir)?;
        let manifest = reading.manifest.clone();
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
            Some((first_dir, m)) => {
                let differing = differences(&m.identity, &identity);
                if !differing.is_empty() {
                    return Err(JournalError::Merge {
                        path: dir.join(MANIFEST_FILE),
                        problem: format!(
                            "this shard is of another run than {}; differing fields: {}. \
                             Merge only the shards of one run",
                            first_dir.display(),
                            differing.join("; ")
                        ),
                    });
                }
            }
        }
        records.extend(reading.records.iter().cloned());
        // The shard's batch figures are read before anything is written, so a damaged
        // file stops the merge with nothing half done.
        let label = match manifest.identity.get("shard").and_then(|s| s.as_str()) {
            Some(shard) => shard.to_string(),
            None => dir.display().to_string(),
        };
        batch_figures.push((label, batches::read(dir)?));
        failures.extend(failed::of_shard(dir, &reading.manifest)?);
        readings.push(reading);
    }
    let Some((_, manifest)) = first else {
        return Ok(0);
    };
    let (mut journal, existing) = Journal::open(out, &manifest).map_err(|e| match e {
        // Journal::open's own advice is for a run (`--fresh`, which merge has not).
        JournalError::ManifestMismatch { path, differences } => JournalError::Merge {
            path,
            problem: format!(
                "--out holds another run; differing fields: {}. Give --out an empty or \
                 new folder, or the folder of an earlier merge of these same shards",
                differences.join("; ")
            ),
        },
        JournalError::Unbound { path, .. } | JournalError::ForeignSamples { path, .. } => {
            JournalError::Merge {
                path,
                problem: "--out holds samples of another run. Give --out an empty or new \
                          folder"
                    .into(),
            }
        }
        e => e,
    })?;
    let mut seen: BTreeSet<(String, u64)> =
        existing.records.iter().map(SampleRecord::key).collect();
    let fresh: Vec<SampleRecord> = records
        .into_iter()
        .filter(|r| seen.insert(r.key()))
        .collect();
    journal.append(&fresh)?;
    batches::BatchLog::carry_over(&journal, &batch_figures)?;
    failed::carry_over(&journal, failures, &seen)?;
    Ok(seen.len())
}

/// Refuses a shard given twice (it would count as two shards merged) and an `out` that
/// is one of the shards (merge would wait on its own lock of that shard).
fn check_folders(dirs: &[PathBuf], out: &Path) -> Result<(), JournalError> {
    let real = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    let mut seen = BTreeSet::new();
    for dir in dirs {
        if !seen.insert(real(dir)) {
            return Err(JournalError::Merge {
                path: dir.clone(),
                problem: "this shard is given twice; give each shard folder once".into(),
            });
        }
    }
    if seen.contains(&real(out)) {
        return Err(JournalError::Merge {
            path: out.to_path_buf(),
            problem: "--out is one of the shards being merged; give --out a new folder \
                      (the shards are read, never written)"
                .into(),
        });
    }
    Ok(())
}
