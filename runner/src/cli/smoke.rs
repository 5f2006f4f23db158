//! `runner smoke`: the whole path on the CPU without downloading anything. A
//! project-made fixture model (random weights, trained tokenizer, chat template) and
//! the oracle baseline each run the four principal conditions on the first scenarios
//! of every regime with seeds 42-44, through plan, engine, journal, scorer and reports.
//! It fails unless every run folder holds its manifest, a complete journal and the
//! reports, and the oracle scores perfectly.

use anyhow::{bail, Context, Result};
use clap::Args;
use runner::engine::candle::fixture::{write_fixture_with, Arch, Size};
use runner::journal::{self, JOURNAL_FILE, MANIFEST_FILE};
use runner::plan::PROTOCOL_SEEDS;
use runner::run::creg::{tokenizer_corpus, SMOKE_VOCAB};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Args, Debug)]
pub struct SmokeArgs {
    /// The smoke run's own folder; its previous smoke runs are replaced.
    #[arg(long, default_value = "outputs/smoke")]
    out: PathBuf,
    /// Scenarios per regime.
    #[arg(long, default_value_t = 1)]
    limit: usize,
    /// New tokens per fixture sample (the protocol's 512 would only make the smoke slow).
    #[arg(long, default_value_t = 16)]
    max_new_tokens: usize,
    /// The fixture model's architecture: qwen2, llama or gemma3.
    #[arg(long, default_value = "qwen2")]
    arch: String,
}

const RUN: &str = "smoke";
const REPORTS: [&str; 3] = ["scores.json", "summary.md", "scores.csv"];

pub fn smoke(args: SmokeArgs) -> Result<ExitCode> {
    let arch: Arch = args.arch.parse().map_err(anyhow::Error::msg)?;
    let model_dir = args
        .out
        .join("models")
        .join(format!("fixture-{}-tiny", args.arch));
    if !model_dir.join("model.safetensors").is_file() {
        write_fixture_with(
            arch,
            Size::Tiny,
            &model_dir,
            Some((tokenizer_corpus()?, SMOKE_VOCAB)),
        )
        .with_context(|| format!("writing the fixture model into {}", model_dir.display()))?;
    }
    let mut checks = Vec::new();
    for model in [model_dir.display().to_string(), "oracle".to_string()] {
        let run_args = super::run::RunArgs {
            suite: super::run::Suite::Creg,
            model: Some(model.clone()),
            condition: vec!["principal".into()],
            tasks: vec!["all".into()],
            seeds: PROTOCOL_SEEDS.to_vec(),
            device: "cpu".into(),
            shard: None,
            limit: Some(args.limit),
            out: args.out.clone(),
            run: Some(RUN.into()),
            fresh: false,
            suite_file: None,
            max_new_tokens: args.max_new_tokens,
            max_batch: None,
            panel: None,
            quiet: false,
            served: Default::default(),
        };
        let label = if model == "oracle" {
            model.clone()
        } else {
            format!("fixture-{}-tiny", args.arch)
        };
        let previous = args.out.join(&label).join(RUN);
        if previous.exists() {
            std::fs::remove_dir_all(&previous).with_context(|| {
                format!("clearing the previous smoke run {}", previous.display())
            })?;
        }
        println!("\n==> smoke run: {model}\n");
        let dir = super::run::run(run_args)?;
        checks.push((label, dir));
    }
    let mut failures = Vec::new();
    for (label, dir) in &checks {
        failures.extend(check_folder(dir));
        if label == "oracle" {
            failures.extend(oracle_is_perfect(dir)?);
        }
    }
    if !failures.is_empty() {
        bail!("smoke run failed:\n  {}", failures.join("\n  "));
    }
    println!(
        "\nsmoke run passed: {} runs with manifest, complete journal and reports; the oracle scores perfectly",
        checks.len()
    );
    Ok(ExitCode::SUCCESS)
}

/// What a finished run folder must hold.
fn check_folder(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    for f in [MANIFEST_FILE, JOURNAL_FILE]
        .into_iter()
        .chain(REPORTS)
        .chain(["reliability.svg", "regimes.svg", "contrasts.svg"])
    {
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

/// The oracle's pooled figures, read back from its scores.json, at their best values.
fn oracle_is_perfect(dir: &Path) -> Result<Vec<String>> {
    let path = dir.join("scores.json");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let v: serde_json::Value =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    let mut out = Vec::new();
    let estimates = v
        .get("estimates")
        .and_then(|e| e.as_array())
        .with_context(|| format!("{}: no estimates", path.display()))?;
    for e in estimates {
        if !e["regime"].is_null() || !e["seed"].is_null() {
            continue;
        }
        let metric = e["metric"].as_str().unwrap_or("?");
        let Some(best) = runner::score::aggregate::best_value(metric) else {
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
    Ok(out)
}
