//! The run loop journals samples while a backend call is still running: one call can
//! hold hundreds of samples (the oracle answers 512 per call, the engine up to the
//! row limit), and a crash must not lose all of them. Likewise each call's
//! decode-batch figures, kept per invocation of a resumed run.

use super::common::scratch;
use creg::plan::PlanSpec;
use creg::render::{Condition, Task};
use creg::workload::{load_suite, CregWorkload};
use runner_core::journal::{batches, read_records, JOURNAL_FILE};
use runner_core::run::rescore::{rescore, Rescore};
use runner_core::run::{
    execute, manifest::manifest, Observer, Quiet, Running, Workload, JOURNAL_EVERY, JOURNAL_GRACE,
};
use runner_engine::batch::BatchStats;
use runner_engine::{Backend, EngineError, Request, Sample};
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
        seeds: runner_core::protocol::SEEDS.to_vec(),
        limit_per_regime: Some(1),
        shard: None,
    };
    let workload =
        CregWorkload::new(suite, sha, spec, 64, runner_core::protocol::SAMPLING).unwrap();
    // The oracle answers at once; a call that ends within JOURNAL_GRACE is journaled at
    // its end. This one takes its time first, as a model would.
    let mut backend = Slow(
        workload
            .baseline("oracle")
            .expect("the oracle answers CREG"),
    );
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
    execute(&mut backend, &workload, &m, &dir, "oracle", &mut observer).unwrap();

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

/// A backend that thinks for [`JOURNAL_GRACE`] before its answers.
struct Slow(Box<dyn Backend>);

impl Backend for Slow {
    fn describe(&self) -> String {
        "the oracle, slowly".into()
    }
    fn preferred_batch(&self) -> usize {
        self.0.preferred_batch()
    }
    fn generate_each(
        &mut self,
        requests: &[Request],
        on_sample: &mut dyn FnMut(Sample),
    ) -> Result<(), EngineError> {
        std::thread::sleep(JOURNAL_GRACE);
        self.0.generate_each(requests, on_sample)
    }
}

/// A backend that batches: the oracle's answers with decode-batch figures of its own
/// (per call: a step per sample, two row-steps per sample, a token per sample and one
/// more per call), failing after its answers on call `fail_on` as a crash would.
struct Batching {
    inner: Box<dyn Backend>,
    stats: BatchStats,
    calls: usize,
    fail_on: Option<usize>,
}

impl Backend for Batching {
    fn describe(&self) -> String {
        "oracle with batch figures".into()
    }
    fn preferred_batch(&self) -> usize {
        30
    }
    fn batch_stats(&self) -> Option<BatchStats> {
        Some(self.stats)
    }
    fn generate_each(
        &mut self,
        requests: &[Request],
        on_sample: &mut dyn FnMut(Sample),
    ) -> Result<(), EngineError> {
        self.calls += 1;
        let mut samples = 0;
        self.inner.generate_each(requests, &mut |s| {
            samples += 1;
            on_sample(s)
        })?;
        self.stats = self.stats.plus(&BatchStats {
            steps: samples,
            rows_decoded: samples,
            row_steps: 2 * samples,
            generated_tokens: samples + 1,
            joins: 1,
            ..BatchStats::default()
        });
        match self.fail_on {
            Some(n) if n == self.calls => Err(EngineError::Device("lost the device".into())),
            _ => Ok(()),
        }
    }
}

#[test]
fn each_invocation_of_a_resumed_run_keeps_its_batch_figures_and_the_report_pools_them() {
    let (suite, sha) = load_suite(None).unwrap();
    let spec = PlanSpec {
        conditions: vec![Condition::ALL[0]],
        tasks: vec![Task::Belief],
        seeds: runner_core::protocol::SEEDS.to_vec(),
        limit_per_regime: Some(1),
        shard: None,
    };
    let workload =
        CregWorkload::new(suite, sha, spec, 64, runner_core::protocol::SAMPLING).unwrap();
    let planned: usize = workload.jobs().iter().map(|j| j.request.seeds.len()).sum();
    let dir = scratch("invocations");
    let m = manifest(
        &workload,
        &json!({"kind": "test", "name": "model"}),
        &json!({}),
        "test",
    );
    let backend = |fail_on| Batching {
        inner: workload.baseline("oracle").unwrap(),
        stats: BatchStats::default(),
        calls: 0,
        fail_on,
    };

    // The first invocation dies on its second call, after that call's answers.
    let mut first = backend(Some(2));
    let err = execute(&mut first, &workload, &m, &dir, "model", &mut Quiet).unwrap_err();
    assert!(err.to_string().contains("lost the device"), "{err}");
    let one = batches::read(&dir).unwrap();
    assert_eq!(one.len(), 1, "{one:?}");
    assert_eq!(
        one[0].stats, first.stats,
        "both calls' figures, the failed one too"
    );
    let journaled = read_records(&dir.join(JOURNAL_FILE), false)
        .unwrap()
        .records
        .len();
    assert!(
        journaled > 30 && journaled < planned,
        "{journaled} of {planned}"
    );

    // The resume finishes the run; its figures are the second invocation's.
    let mut second = backend(None);
    let outcome = execute(&mut second, &workload, &m, &dir, "model", &mut Quiet).unwrap();
    assert_eq!(outcome.running.done, planned);
    let two = batches::read(&dir).unwrap();
    assert_eq!(two.iter().map(|i| i.invocation).collect::<Vec<_>>(), [1, 2]);
    assert_eq!(two[0].stats, first.stats);
    assert_eq!(Some(two[1].stats), outcome.batch);
    let pooled = batches::pooled(&two);
    assert_eq!(pooled, first.stats.plus(&second.stats));
    assert_eq!(
        pooled.generated_tokens,
        planned + first.calls + second.calls
    );

    let summary = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    let want = format!(
        "- run model batch utilization (rows decoded per row-step offered): {}, pooled over 2 invocations; invocation 1 (started {}): {}; invocation 2 (started {}): {}\n",
        pooled.describe().unwrap(),
        two[0].started,
        two[0].stats.describe().unwrap(),
        two[1].started,
        two[1].stats.describe().unwrap()
    );
    assert!(summary.contains(&want), "{want}\nnot in:\n{summary}");
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.contains(&pooled.describe().unwrap()));

    // A folder from before the record (or of a backend without figures) still scores,
    // without the line.
    std::fs::remove_file(dir.join(batches::BATCHES_FILE)).unwrap();
    let dirs = [dir.clone()];
    let job = Rescore {
        dirs: &dirs,
        suite_file: None,
        keep_first: false,
        out: None,
        suites: &runner::SUITES,
    };
    rescore(&job, &mut |_| {}).unwrap();
    let summary = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(summary.contains("- run model: "), "{summary}");
    assert!(!summary.contains("batch utilization"), "{summary}");
    std::fs::remove_dir_all(&dir).ok();
}
