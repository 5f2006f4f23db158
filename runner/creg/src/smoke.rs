//! The smoke run: the whole path on the CPU without downloading anything. A
//! project-made fixture model (random weights, trained tokenizer, chat template) and
//! the oracle baseline each run the four principal conditions on the first scenarios
//! of every regime with the protocol's seeds, through plan, engine, journal, scorer and
//! reports. It passes when every run folder holds its manifest, a complete journal and
//! the reports, and the oracle scores perfectly.

use crate::plan::PlanSpec;
use crate::render::{Condition, Task};
use crate::workload::{load_suite, tokenizer_corpus, CregWorkload, SMOKE_VOCAB};
use runner_core::journal::{self, JOURNAL_FILE, MANIFEST_FILE};
use runner_core::run::model::{self, ModelSource};
use runner_core::run::{execute, folder, manifest, Observer, Outcome, RunError, Workload};
use runner_engine::candle::fixture::{write_fixture_with, Arch, Size};
use std::path::{Path, PathBuf};

/// The run folder name of both smoke runs.
pub const RUN: &str = "smoke";
const REPORTS: [&str; 6] = [
    "scores.json",
    "summary.md",
    "scores.csv",
    "reliability.svg",
    "regimes.svg",
    "contrasts.svg",
];

#[derive(Clone, Debug)]
pub struct SmokeOptions {
    /// The smoke run's own folder; its previous smoke runs are replaced.
    pub out: PathBuf,
    /// Scenarios per regime.
    pub limit: usize,
    /// New tokens per fixture sample.
    pub max_new_tokens: usize,
    pub arch: Arch,
    /// A model folder (a real checkpoint) to run instead of the fixture.
    pub model: Option<PathBuf>,
    /// The conditions and tasks to run (the four principal conditions and all four
    /// tasks by default; a real model's prompts cost seconds each on a CPU).
    pub conditions: Vec<Condition>,
    pub tasks: Vec<Task>,
    /// The command line, for the manifests.
    pub command: String,
}

/// What the caller sees of the smoke run as it goes.
pub trait SmokeObserver: Observer {
    /// A run of `model` is about to start in `dir`.
    fn starting(&mut self, model: &str, dir: &Path, workload: &dyn Workload);
    fn finished(&mut self, dir: &Path, outcome: &Outcome);
}

/// The runs made and every check that failed (none when the smoke run passed).
#[derive(Debug)]
pub struct SmokeReport {
    pub runs: Vec<PathBuf>,
    pub failures: Vec<String>,
}

/// Writes the fixture model (once), runs it and the oracle, and checks both folders.
pub fn smoke(
    opts: &SmokeOptions,
    models: &dyn ModelSource,
    observer: &mut dyn SmokeObserver,
) -> Result<SmokeReport, RunError> {
    let name = opts.arch.row().name;
    let model_dir = match &opts.model {
        Some(dir) => dir.clone(),
        None => opts.out.join("models").join(format!("fixture-{name}-tiny")),
    };
    if opts.model.is_none() && !model_dir.join("model.safetensors").is_file() {
        write_fixture_with(
            opts.arch,
            Size::Tiny,
            &model_dir,
            Some((tokenizer_corpus()?, SMOKE_VOCAB)),
        )
        .map_err(|e| {
            RunError::Setup(format!(
                "writing the fixture model into {}: {e}",
                model_dir.display()
            ))
        })?;
    }
    let (suite, sha) = load_suite(None)?;
    let spec = PlanSpec {
        conditions: opts.conditions.clone(),
        tasks: opts.tasks.clone(),
        seeds: runner_core::protocol::SEEDS.to_vec(),
        limit_per_regime: Some(opts.limit),
        shard: None,
    };
    let workload = CregWorkload::new(
        suite,
        sha,
        spec,
        opts.max_new_tokens,
        runner_core::protocol::SAMPLING,
    )?;
    let mut report = SmokeReport {
        runs: Vec::new(),
        failures: Vec::new(),
    };
    for model in [model_dir.display().to_string(), "oracle".to_string()] {
        let loaded = model::load(&model, &workload, models)?;
        let dir = folder::run_dir(&opts.out, &loaded.label, RUN, false);
        if dir.exists() {
            std::fs::remove_dir_all(&dir).map_err(|e| {
                RunError::Setup(format!(
                    "clearing the previous smoke run {}: {e}",
                    dir.display()
                ))
            })?;
        }
        let manifest =
            manifest::manifest(&workload, &loaded.identity, &loaded.context, &opts.command);
        let mut backend = loaded.backend;
        observer.starting(&model, &dir, &workload);
        let outcome = execute(
            backend.as_mut(),
            &workload,
            &manifest,
            &dir,
            &loaded.label,
            observer,
        )?;
        observer.finished(&dir, &outcome);
        report.failures.extend(check_folder(&dir));
        if model == "oracle" {
            report.failures.extend(oracle_is_perfect(&dir));
        }
        report.runs.push(dir);
    }
    Ok(report)
}

/// What a finished run folder must hold.
fn check_folder(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for f in [MANIFEST_FILE, JOURNAL_FILE].into_iter().chain(REPORTS) {
        if !dir.join(f).is_file() {
            out.push(format!("{} is missing", dir.join(f).display()));
        }
    }
    match journal::read_records(&dir.join(JOURNAL_FILE), false) {
        Ok(r) if r.records.is_empty() => out.push(format!("{}: no samples", dir.display())),
        Ok(r) if r.duplicates > 0 => out.push(format!(
            "{}: {} duplicated samples",
            dir.display(),
            r.duplicates
        )),
        Ok(_) => {}
        Err(e) => out.push(e.to_string()),
    }
    out
}

/// The oracle's pooled figures, read back from its scores.json, away from their best values.
fn oracle_is_perfect(dir: &Path) -> Vec<String> {
    let path = dir.join("scores.json");
    let read = std::fs::read_to_string(&path)
        .map_err(|e| format!("reading {}: {e}", path.display()))
        .and_then(|text| {
            serde_json::from_str::<serde_json::Value>(&text)
                .map_err(|e| format!("parsing {}: {e}", path.display()))
        });
    let v = match read {
        Ok(v) => v,
        Err(e) => return vec![e],
    };
    let Some(estimates) = v.get("estimates").and_then(|e| e.as_array()) else {
        return vec![format!("{}: no estimates", path.display())];
    };
    let mut out = Vec::new();
    for e in estimates {
        if !e["regime"].is_null() || !e["seed"].is_null() {
            continue;
        }
        let metric = e["metric"].as_str().unwrap_or("?");
        let Some(best) = crate::score::aggregate::best_value(metric) else {
            continue;
        };
        let mean = e["mean"].as_f64().unwrap_or(f64::NAN);
        if (mean - best).abs() > 1e-9 {
            out.push(format!(
                "oracle {}/{}/{metric} = {mean} (best {best})",
                e["condition"].as_str().unwrap_or("?"),
                e["task"].as_str().unwrap_or("?"),
            ));
        }
    }
    if estimates.is_empty() {
        out.push(format!("{}: no estimates", path.display()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_empty_or_imperfect_run_folder_is_reported() {
        let dir = std::env::temp_dir().join(format!("smoke-check-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let missing = check_folder(&dir);
        assert_eq!(missing.len(), 2 + REPORTS.len() + 1, "{missing:?}");
        std::fs::write(
            dir.join("scores.json"),
            r#"{"estimates": [{"regime": null, "seed": null, "metric": "top_state_accuracy",
                "mean": 0.5, "condition": "full_graph", "task": "belief"}]}"#,
        )
        .unwrap();
        let wrong = oracle_is_perfect(&dir);
        assert_eq!(
            wrong,
            vec!["oracle full_graph/belief/top_state_accuracy = 0.5 (best 1)"]
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
