//! `runner score`: journaled runs rescored with the streaming scorer's code, each alone
//! and, when there are several, pooled into one combined report.

use crate::journal::{self, Manifest, SampleRecord};
use crate::run::plan_check::{Plan, Stray};
use crate::run::{RunError, Workload};
use crate::suite::Registry;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Which runs to rescore and where a combined report goes.
#[derive(Clone)]
pub struct Rescore<'a> {
    pub dirs: &'a [PathBuf],
    /// The suite file the runs were planned with, when it is not the embedded one.
    pub suite_file: Option<&'a Path>,
    /// Pool runs that hold the same (model, request, seed), keeping the first run's.
    pub keep_first: bool,
    /// Where the reports go. None: each run's own reports are rewritten in its folder,
    /// and several runs are pooled into [`DEFAULT_COMBINED`]. Some: the runs are only
    /// read, and one report of them all goes there (a read-only or shared run stays
    /// as it is).
    pub out: Option<PathBuf>,
    /// The suites a run may be of.
    pub suites: &'a Registry,
}

/// What happened, as it happens: rescoring many runs takes a while.
#[derive(Debug, Clone)]
pub enum Event {
    /// A run's reports were rewritten; its summary comes when it is the only run.
    Rescored {
        dir: PathBuf,
        samples: usize,
        summary: Option<String>,
    },
    /// Samples of `dir` left out of the pool because `holder` holds them already.
    LeftOut {
        dir: PathBuf,
        samples: usize,
        holder: PathBuf,
    },
    /// The pooled runs' reports.
    Combined { out: PathBuf, summary: String },
    /// `samples` of `dir` carry stored scores other than the ones recomputed from their
    /// answers (`first`: the first such (request, seed)); the reports use the recomputed.
    ScoresDiffer {
        dir: PathBuf,
        samples: usize,
        first: (String, u64),
    },
    /// `lines` journal lines of `dir` do not belong to its manifest's plan (a facet,
    /// request, seed or prompt hash that the plan does not give; `first` names the
    /// first line and field): they are left out of the reports.
    Strays {
        dir: PathBuf,
        lines: usize,
        first: Stray,
    },
}

/// Where several runs' pooled report goes without `out`.
pub const DEFAULT_COMBINED: &str = "outputs/combined";

/// The workload a journaled run was planned with, rebuilt from its manifest.
pub fn workload_of(
    suites: &Registry,
    dir: &Path,
    m: &Manifest,
    suite_file: Option<&Path>,
) -> Result<Box<dyn Workload>, RunError> {
    suites.rebuild(&m.identity, suite_file).map_err(|e| {
        RunError::Setup(format!(
            "{}: {e}",
            dir.join(journal::MANIFEST_FILE).display()
        ))
    })
}

fn label_of(m: &Manifest, dir: &Path) -> String {
    m.identity
        .pointer("/model/name")
        .and_then(Value::as_str)
        .map(String::from)
        .unwrap_or_else(|| dir.display().to_string())
}

/// A run read for rescoring, before anything is written; its folder stays locked
/// (shared) until the value is dropped, after its reports are rewritten.
struct Loaded {
    dir: PathBuf,
    workload: Box<dyn Workload>,
    label: String,
    reading: journal::RunReading,
    /// Lines left out of `reading.records` as not the plan's.
    strays: Vec<Stray>,
}

/// Rescores every run, then pools them when there are several. Runs of different
/// suites, or runs that would count a sample twice (unless `keep_first`), are refused,
/// and before any report is written: a refused command changes nothing.
pub fn rescore(job: &Rescore, on_event: &mut dyn FnMut(Event)) -> Result<(), RunError> {
    if job.dirs.is_empty() {
        return Err(RunError::Setup(
            "give one or more run folders (outputs/<model>/<run>), or --bench".into(),
        ));
    }
    let runs = load_all(job)?;
    if !job.keep_first {
        refuse_overlap(job, &runs)?;
    }
    let mut pool = Pool::default();
    let mut workload = None;
    for (k, run) in runs.into_iter().enumerate() {
        let Loaded {
            dir,
            workload: w,
            label,
            mut reading,
            strays,
        } = run;
        if let Some(first) = strays.first() {
            on_event(Event::Strays {
                dir: dir.clone(),
                lines: strays.len(),
                first: first.clone(),
            });
        }
        let records = std::mem::take(&mut reading.records);
        warn_if_scores_differ(&dir, w.as_ref(), &records, on_event);
        let records = match job.out {
            None => rescore_alone(job, &dir, w.as_ref(), &label, records, on_event)?,
            Some(_) => records,
        };
        pool.manifests
            .push(source_of(&label, &dir, &reading.manifest));
        pool.add(job, k, label, records, on_event)?;
        workload = Some(w);
    }
    let Some(w) = workload else {
        return Ok(());
    };
    match &job.out {
        Some(out) => write_combined(out, &pool, w.as_ref(), on_event),
        None if pool.runs.len() > 1 => {
            write_combined(Path::new(DEFAULT_COMBINED), &pool, w.as_ref(), on_event)
        }
        None => Ok(()),
    }
}

/// Reads every run and its workload, refusing runs of different suites.
fn load_all(job: &Rescore) -> Result<Vec<Loaded>, RunError> {
    let mut family = None;
    let mut runs = Vec::with_capacity(job.dirs.len());
    for dir in job.dirs {
        let mut reading = journal::read_run(dir)?;
        let w = workload_of(job.suites, dir, &reading.manifest, job.suite_file)?;
        let strays = leave_out_strays(w.as_ref(), &mut reading);
        let m = &reading.manifest;
        // CREG and Probe runs do not mix (each run's suite is checked against the same file).
        let this = m.identity.pointer("/suite/family").cloned();
        if family.get_or_insert_with(|| this.clone()) != &this {
            return Err(RunError::Setup(format!(
                "{}: a {} run cannot be scored together with the runs before it",
                dir.display(),
                w.name()
            )));
        }
        runs.push(Loaded {
            dir: dir.clone(),
            label: label_of(m, dir),
            workload: w,
            reading,
            strays,
        });
    }
    Ok(runs)
}

/// Takes the lines that do not belong to the run's plan out of `reading` (they are not
/// scored, pooled or reported) and returns them.
fn leave_out_strays(w: &dyn Workload, reading: &mut journal::RunReading) -> Vec<Stray> {
    let plan = Plan::new(w.jobs());
    let strays = plan.strays(&reading.records, &reading.lines);
    if !strays.is_empty() {
        let records = std::mem::take(&mut reading.records);
        let lines = std::mem::take(&mut reading.lines);
        for (rec, line) in records.into_iter().zip(lines) {
            if plan.why_not(&rec).is_none() {
                reading.records.push(rec);
                reading.lines.push(line);
            }
        }
    }
    strays
}

/// Refuses runs that hold the same (model, request, seed): pooled, they would count it
/// twice.
fn refuse_overlap(job: &Rescore, runs: &[Loaded]) -> Result<(), RunError> {
    let mut holder = HashMap::new();
    for (k, run) in runs.iter().enumerate() {
        let mut overlap = run
            .reading
            .records
            .iter()
            .filter_map(|rec| claim(&mut holder, k, &run.label, rec).map(|first| (first, rec)));
        if let Some((first, rec)) = overlap.next() {
            let n = 1 + overlap.count();
            let sample = (rec.request_id.as_str(), rec.seed);
            return Err(overlap_error(job, (first, k), &run.label, sample, n));
        }
    }
    Ok(())
}

/// Claims `rec`'s (model, request, seed) for run `k`; the earlier run that holds it
/// already, if another does.
fn claim(holder: &mut Holder, k: usize, label: &str, rec: &SampleRecord) -> Option<usize> {
    let key = (label.to_string(), rec.request_id.clone(), rec.seed);
    match holder.get(&key) {
        Some(&first) if first != k => Some(first),
        _ => {
            holder.insert(key, k);
            None
        }
    }
}

/// The refusal of run `k`, whose `n` samples, `(request, seed)` the first of them, run
/// `first` holds already.
fn overlap_error(
    job: &Rescore,
    (first, k): (usize, usize),
    label: &str,
    (request, seed): (&str, u64),
    n: usize,
) -> RunError {
    RunError::Setup(format!(
        "{} and {} both hold {n} samples of model {label} (e.g. request {} seed {}): pooled, \
         they would count twice. Score them apart, merge shards with `runner merge`, or pass \
         --keep-first to keep the first run's samples",
        job.dirs[first].display(),
        job.dirs[k].display(),
        request,
        seed,
    ))
}

/// Rewrites one run's reports from its records alone, and hands the records back.
fn rescore_alone(
    job: &Rescore,
    dir: &Path,
    w: &dyn Workload,
    label: &str,
    records: Vec<SampleRecord>,
    on_event: &mut dyn FnMut(Event),
) -> Result<Vec<SampleRecord>, RunError> {
    let title = format!("{}: {label}", w.name());
    let one = [(label.to_string(), records)];
    let summary = w.report(&one, dir, &title)?;
    on_event(Event::Rescored {
        dir: dir.to_path_buf(),
        samples: one[0].1.len(),
        summary: (job.dirs.len() == 1).then_some(summary),
    });
    let [(_, records)] = one;
    Ok(records)
}

/// Says so when stored scores of `dir`'s records differ from the recomputed ones.
fn warn_if_scores_differ(
    dir: &Path,
    w: &dyn Workload,
    records: &[SampleRecord],
    on_event: &mut dyn FnMut(Event),
) {
    if let Some((samples, first)) = stored_scores_differ(w, records) {
        on_event(Event::ScoresDiffer {
            dir: dir.to_path_buf(),
            samples,
            first,
        });
    }
}

/// How many of `records` hold stored scores that rescoring their answers does not give
/// (edited, forged, or written by another scorer), and the first of them. Records
/// stored without scores, or that do not score, are not compared.
fn stored_scores_differ(
    w: &dyn Workload,
    records: &[SampleRecord],
) -> Option<(usize, (String, u64))> {
    let mut differ = records.iter().filter(|rec| {
        !rec.scores.is_null()
            && w.score(rec)
                .is_ok_and(|s| !same_bits(&s.scores, &rec.scores))
    });
    let first = differ.next()?;
    Some((1 + differ.count(), first.key()))
}

/// Whether two score trees are the same, every number to the bit: `0.0` and `-0.0`, or
/// two floats one bit apart, differ here (they compare equal, or nearly, as numbers).
pub fn same_bits(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_f64(), y.as_f64()) {
            _ if x.is_f64() != y.is_f64() => false,
            (Some(p), Some(q)) if x.is_f64() => p.to_bits() == q.to_bits(),
            _ => x == y,
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same_bits(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, p)| y.get(k).is_some_and(|q| same_bits(p, q)))
        }
        _ => a == b,
    }
}

/// A run as the combined report's provenance names it: its manifest, with the batch
/// figures of its invocations.
fn source_of(label: &str, dir: &Path, m: &Manifest) -> Value {
    let mut source =
        json!({"label": label, "dir": dir, "identity": m.identity, "context": m.context});
    match journal::batches::read(dir) {
        Ok(i) if i.is_empty() => {}
        Ok(i) => source["invocations"] = json!(i),
        Err(e) => source["invocations_error"] = json!(e.to_string()),
    }
    source
}

/// Which run first holds each (model, request, seed): pooled runs must not count a
/// sample twice.
type Holder = HashMap<(String, String, u64), usize>;

/// The runs pooled so far, with what the combined report needs of each.
#[derive(Default)]
struct Pool {
    runs: Vec<(String, Vec<SampleRecord>)>,
    manifests: Vec<Value>,
    holder: Holder,
}

impl Pool {
    /// Pools run `k`'s records under `label`, less the samples an earlier run holds;
    /// those are refused unless `keep_first` (and were refused before anything was
    /// written, see [`refuse_overlap`]).
    fn add(
        &mut self,
        job: &Rescore,
        k: usize,
        label: String,
        mut records: Vec<SampleRecord>,
        on_event: &mut dyn FnMut(Event),
    ) -> Result<(), RunError> {
        let mut overlap: Option<(usize, String, u64)> = None;
        let mut left_out = 0;
        records.retain(|rec| match claim(&mut self.holder, k, &label, rec) {
            Some(first) => {
                overlap.get_or_insert_with(|| (first, rec.request_id.clone(), rec.seed));
                left_out += 1;
                false
            }
            None => true,
        });
        if let Some((first, request, seed)) = overlap {
            if !job.keep_first {
                let sample = (request.as_str(), seed);
                return Err(overlap_error(job, (first, k), &label, sample, left_out));
            }
            on_event(Event::LeftOut {
                dir: job.dirs[k].clone(),
                samples: left_out,
                holder: job.dirs[first].clone(),
            });
        }
        self.runs.push((label, records));
        Ok(())
    }
}

/// The pooled runs' report in `out`, beside the manifests of the runs it
/// combines (its provenance).
fn write_combined(
    out: &Path,
    pool: &Pool,
    w: &dyn Workload,
    on_event: &mut dyn FnMut(Event),
) -> Result<(), RunError> {
    let sources = out.join(crate::report::provenance::RUNS_FILE);
    let text = serde_json::to_string_pretty(&pool.manifests).unwrap_or_default();
    std::fs::create_dir_all(out)
        .and_then(|_| crate::fsutil::write_atomic(&sources, text.as_bytes()))
        .map_err(|source| RunError::Report {
            path: sources.clone(),
            source,
        })?;
    let labels: Vec<&str> = pool.runs.iter().map(|(l, _)| l.as_str()).collect();
    let title = match labels.as_slice() {
        [one] => format!("{}: {one}", w.name()),
        _ => format!("{}: combined runs ({})", w.name(), labels.join(", ")),
    };
    let summary = w.report(&pool.runs, out, &title)?;
    on_event(Event::Combined {
        out: out.to_path_buf(),
        summary,
    });
    Ok(())
}
