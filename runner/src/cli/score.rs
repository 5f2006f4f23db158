//! `runner baseline` and `runner score ...`: the embedded scorer from the command line.

use anyhow::Context;
use clap::Args;
use runner::engine::baseline::creg::{self as baseline, System};
use runner::engine::FinishReason;
use runner::plan::PROTOCOL_SEEDS;
use runner::render::question::{questions, Question};
use runner::render::Condition;
use runner::run::creg::SUITE_NAME;
use runner::score::aggregate::{self, Scored};
use runner::score::report;
use runner::score::sample::score_text;
use runner::suite::creg::frozen;
use runner::suite::creg::spec::NormativeSpec;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

/// The principal conditions' names, from the render stage's table.
fn principal() -> Vec<String> {
    Condition::ALL
        .iter()
        .filter(|c| c.is_principal())
        .map(|c| c.name().to_string())
        .collect()
}

#[derive(Args, Debug)]
pub struct BaselineArgs {
    /// oracle, confidence-only, no-relations, no-epochs, latest-wins or uniform.
    #[arg(long)]
    system: System,
    /// Conditions to label the samples with (a baseline reads the scenario, not the prompt).
    #[arg(long, value_delimiter = ',', default_values_t = principal())]
    condition: Vec<String>,
    #[arg(long, value_delimiter = ',', default_values_t = PROTOCOL_SEEDS)]
    seeds: Vec<u64>,
    /// Report folder (default outputs/<system>/baseline).
    #[arg(long)]
    out: Option<PathBuf>,
}

/// Runs a baseline system over the whole suite and writes its reports.
pub fn baseline(args: BaselineArgs) -> anyhow::Result<ExitCode> {
    let suite = frozen::frozen_suite()?;
    let started = Instant::now();
    let samples =
        runner::run::baseline::run_suite(args.system, &suite, &args.condition, &args.seeds)?;
    let agg = aggregate::aggregate(&samples, &suite);
    let out = args.out.unwrap_or_else(|| {
        PathBuf::from("outputs")
            .join(args.system.name())
            .join("baseline")
    });
    let title = format!("{SUITE_NAME}: {} (baseline, no journal)", args.system);
    let provenance = report::Provenance::new(
        Some(runner::digest::sha256_hex(frozen::FROZEN_JSONL.as_bytes())),
        Some(NormativeSpec::frozen_sha256().to_string()),
    );
    let inputs = report::ReportInputs {
        title: &title,
        provenance: &provenance,
        browser: None,
    };
    let written = report::write_reports(&out, &agg, &inputs)
        .with_context(|| format!("writing reports into {}", out.display()))?;
    print!("{}", report::summary(&agg, &title, &provenance));
    println!(
        "\n{} samples scored and aggregated in {:.2} s; reports: {}",
        samples.len(),
        started.elapsed().as_secs_f64(),
        written
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    );
    Ok(ExitCode::SUCCESS)
}

/// Times parsing+scoring and aggregation of 55,200 belief samples (4 conditions x
/// 1,150 prefixes x 3 seeds x 4 systems); use a release build.
pub fn bench(degenerate_bytes: &[usize]) -> anyhow::Result<ExitCode> {
    let suite = frozen::frozen_suite()?;
    let systems = [
        System::Oracle,
        System::ConfidenceOnly,
        System::LatestWins,
        System::Uniform,
    ];
    // The texts a model would have written, prepared before the clock starts.
    let mut texts = Vec::new();
    for system in systems {
        for s in &suite {
            for q in questions(s)
                .into_iter()
                .filter(|q| matches!(q, Question::Belief { .. }))
            {
                texts.push((system, s, q, baseline::answer(system, s, q)?));
            }
        }
    }
    let conditions = principal();
    let started = Instant::now();
    let mut samples: Vec<Scored> = Vec::with_capacity(texts.len() * 12);
    for (system, s, q, text) in &texts {
        for condition in &conditions {
            for seed in PROTOCOL_SEEDS {
                let score =
                    score_text(s, *q, text, FinishReason::Stop).context("every question exists")?;
                samples.push(Scored::new(system.name(), condition, seed, s, *q, score));
            }
        }
    }
    let scored = started.elapsed().as_secs_f64();
    let agg = aggregate::aggregate(&samples, &suite);
    let total = started.elapsed().as_secs_f64();
    println!("| phase | seconds | samples/s |\n|---|---:|---:|");
    println!(
        "| parse + score {} belief samples | {scored:.3} | {:.0} |",
        samples.len(),
        samples.len() as f64 / scored
    );
    println!(
        "| aggregate ({} estimates, {} contrasts, {} resamples each) | {:.3} | |",
        agg.estimates.len(),
        agg.contrasts.len(),
        aggregate::RESAMPLES,
        total - scored
    );
    println!(
        "| total | {total:.3} | {:.0} |",
        samples.len() as f64 / total
    );
    println!();
    bench_degenerate(degenerate_bytes);
    if cfg!(debug_assertions) {
        println!("(DEBUG build: use --release)");
    }
    Ok(ExitCode::SUCCESS)
}

/// Times parsing and scoring of outputs a degenerate model writes: runs of `{`, nested
/// arrays, an object cut off deep inside nesting. Each must stay linear in its length.
fn bench_degenerate(sizes: &[usize]) {
    let suite = match frozen::frozen_suite() {
        Ok(s) => s,
        Err(e) => {
            println!("(no suite: {e})");
            return;
        }
    };
    let s = &suite[0];
    let q = Question::Belief { step: 1 };
    println!("| degenerate output | bytes | seconds (parse + score) |\n|---|---:|---:|");
    for &n in sizes {
        let half = n / 2;
        let cases = [
            ("`{` repeated", "{".repeat(n)),
            (
                "nested arrays in an object",
                format!("{{\"a\": {}{}}}", "[".repeat(half), "]".repeat(half)),
            ),
            (
                "unclosed nested arrays",
                format!("{{\"a\": {}", "[".repeat(n)),
            ),
            ("`{\"a\":` repeated", "{\"a\":".repeat(n / 5)),
        ];
        for (name, text) in cases {
            let started = Instant::now();
            for finish in [FinishReason::Stop, FinishReason::Length] {
                let _ = score_text(s, q, &text, finish);
            }
            println!(
                "| {name} | {} | {:.4} |",
                text.len(),
                started.elapsed().as_secs_f64() / 2.0
            );
        }
    }
}
