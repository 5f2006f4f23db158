//! The run loop journals samples while a backend call is still running: one call can
//! hold hundreds of samples (the oracle answers 512 per call, the engine up to the
//! row limit), and a crash must not lose all of them.

use super::common::scratch;
use runner::engine::Sampling;
use runner::journal::{read_records, JOURNAL_FILE};
use runner::plan::{PlanSpec, PROTOCOL_SEEDS};
use runner::render::{Condition, Task};
use runner::run::creg::{load_suite, CregWorkload};
use runner::run::{execute, manifest::manifest, Observer, Running, Workload, JOURNAL_EVERY};
use serde_json::json;
use std::path::PathBuf;

/// Counts, at every sample handed over, the journal lines already on disk.
struct LinesOnDisk {
    journal: PathBuf,
    seen: Vec<usize>,
    calls_ended: usize,
}

impl Observer for LinesOnDisk {
    fn sample(&mut self, _running: &Running) {
        let lines = std::fs::read_to_string(&self.journal)
            .map(|t| t.lines().count())
            .unwrap_or(0);
        self.seen.push(lines);
    }
    fn journaled(&mut self, _running: &Running) {
        self.calls_ended += 1;
    }
}

#[test]
fn samples_reach_the_journal_while_the_backend_call_is_still_running() {
    let (suite, sha) = load_suite(None).unwrap();
    let spec = PlanSpec {
        conditions: vec![Condition::ALL[0]],
        tasks: Task::ALL.to_vec(),
        seeds: PROTOCOL_SEEDS.to_vec(),
        limit_per_regime: Some(1),
        shard: None,
    };
    let workload = CregWorkload::new(suite, sha, spec, 64, Sampling::PROTOCOL).unwrap();
    let mut backend = workload
        .baseline("oracle")
        .expect("the oracle answers CREG");
    let planned: usize = workload.jobs().iter().map(|j| j.request.seeds.len()).sum();
    assert!(
        planned > 4 * JOURNAL_EVERY && planned <= backend.preferred_batch(),
        "the plan ({planned} samples) must fit one backend call and span several appends"
    );
    let dir = scratch("while-running");
    let m = manifest(&workload, &json!({"kind": "baseline"}), &json!({}), "test");
    let mut observer = LinesOnDisk {
        journal: dir.join(JOURNAL_FILE),
        seen: Vec::new(),
        calls_ended: 0,
    };
    execute(
        backend.as_mut(),
        &workload,
        &m,
        &dir,
        "oracle",
        &mut observer,
    )
    .unwrap();

    assert_eq!(
        observer.calls_ended, 1,
        "one backend call made the whole run"
    );
    assert_eq!(observer.seen.len(), planned);
    // The manifest is the journal's first line; every sample handed over beyond the
    // first JOURNAL_EVERY finds at least all but the last JOURNAL_EVERY on disk.
    for (i, &lines) in observer.seen.iter().enumerate() {
        let handed_over = i + 1;
        assert!(
            lines + JOURNAL_EVERY >= handed_over,
            "sample {handed_over}: only {lines} journal lines on disk"
        );
    }
    let records = read_records(&dir.join(JOURNAL_FILE), false)
        .unwrap()
        .records;
    let mut keys: Vec<_> = records.iter().map(|r| r.key()).collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), planned, "every sample journaled exactly once");
    assert_eq!(records.len(), planned);
    std::fs::remove_dir_all(&dir).ok();
}
