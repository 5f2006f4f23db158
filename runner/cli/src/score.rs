//! `runner baseline` and `runner score ...`: the embedded scorer from the command line.

use anyhow::Context;
use clap::Args;
use creg::baseline::System;
use creg::frozen;
use creg::render::Condition;
use creg::report;
use creg::score::aggregate;
use creg::spec::NormativeSpec;
use creg::workload::SUITE_NAME;
use runner_core::bench_table as table;
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
    /// Seeds: --seeds 42 43 44, --seeds 42,43,44 or --seeds "42 43 44".
    #[arg(long, num_args = 1.., default_values_t = crate::seeds::protocol())]
    seeds: Vec<crate::seeds::Seeds>,
    /// Report folder (default outputs/<system>/baseline).
    #[arg(long)]
    out: Option<PathBuf>,
}

/// Runs a baseline system over the whole suite and writes its reports.
pub fn baseline(args: BaselineArgs) -> anyhow::Result<ExitCode> {
    let suite = frozen::frozen_suite()?;
    let started = Instant::now();
    let samples = creg::baseline_run::run_suite(
        args.system,
        &suite,
        &args.condition,
        &crate::seeds::flat(&args.seeds),
    )?;
    let agg = aggregate::aggregate(&samples, &suite);
    let out = args.out.unwrap_or_else(|| {
        PathBuf::from("outputs")
            .join(args.system.name())
            .join("baseline")
    });
    let title = format!("{SUITE_NAME}: {} (baseline, no journal)", args.system);
    let provenance = report::Provenance::new(
        Some(runner_engine::digest::sha256_hex(
            frozen::FROZEN_JSONL.as_bytes(),
        )),
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

/// `runner score --bench`: the scorer's timings as two tables.
pub fn bench(degenerate_bytes: &[usize]) -> anyhow::Result<ExitCode> {
    let results = creg::bench::score::run(degenerate_bytes)?;
    print!("{}", table::markdown(&results.phases));
    println!();
    print!("{}", table::markdown(&results.degenerate));
    if let Some(note) = runner_engine::bench::build_note() {
        println!("\n{note}");
    }
    Ok(ExitCode::SUCCESS)
}
