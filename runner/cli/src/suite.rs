//! `runner suite ...`: generate, check and summarise the CREG suite.

use anyhow::Context;
use clap::Subcommand;
use creg::record::Scenario;
use creg::spec::NormativeSpec;
use creg::{checker, frozen, generator, load, stats};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

#[derive(Subcommand, Debug)]
pub enum SuiteCommand {
    /// Regenerate the suite from the normative specification and write it with its hashes.
    Generate {
        /// Output folder (the suite JSONL, normative_spec.json, SHA256SUMS).
        #[arg(long, default_value = "outputs/suite")]
        out: PathBuf,
    },
    /// Check a suite with the independent log-odds checker: every prefix, every regime
    /// constraint, the twins and the published statistics. Without FILE: regenerate the
    /// suite, compare it byte for byte with the frozen one, and check that.
    Check {
        /// A suite JSONL (ours or the original published file).
        file: Option<PathBuf>,
        /// How many findings to print.
        #[arg(long, default_value_t = 20)]
        show: usize,
    },
    /// Print the statistics table of a suite (default: the frozen one) next to the
    /// published figures.
    Stats { file: Option<PathBuf> },
    /// Time generation, parsing and checking of the whole suite (use a release build).
    Bench {
        #[arg(long, default_value_t = 30)]
        iters: usize,
        /// One JSON object per line instead of the Markdown table.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(cmd: SuiteCommand) -> anyhow::Result<ExitCode> {
    match cmd {
        SuiteCommand::Generate { out } => generate(out),
        SuiteCommand::Check { file, show } => check(file, show),
        SuiteCommand::Bench { iters, json } => bench(iters, json),
        SuiteCommand::Stats { file } => {
            let suite = load_or_frozen(file.as_ref())?;
            let report = checker::check(
                NormativeSpec::frozen(),
                NormativeSpec::frozen_sha256(),
                &suite,
            );
            print!("{}", stats::table(&report.figures));
            Ok(ExitCode::SUCCESS)
        }
    }
}

fn load_or_frozen(file: Option<&PathBuf>) -> anyhow::Result<Vec<Scenario>> {
    Ok(match file {
        Some(path) => load::load_file(path)?,
        None => frozen::frozen_suite().context("the embedded frozen suite")?,
    })
}

fn generate(out: PathBuf) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    let suite = frozen::regenerate()?;
    let jsonl = generator::to_jsonl(&suite);
    frozen::write_suite(&out, &jsonl)
        .with_context(|| format!("writing the suite into {}", out.display()))?;
    let same = jsonl == frozen::FROZEN_JSONL;
    println!(
        "wrote {} scenarios to {} in {:.0} ms; {} the frozen evaluation-v1.0 file",
        suite.len(),
        out.join(frozen::SUITE_FILE).display(),
        started.elapsed().as_secs_f64() * 1e3,
        if same {
            "byte-identical to"
        } else {
            "DIFFERENT from"
        }
    );
    print!("{}", frozen::manifest(&jsonl));
    Ok(ExitCode::SUCCESS)
}

fn check(file: Option<PathBuf>, show: usize) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    let (suite, origin, mut ok) = match &file {
        Some(path) => (load::load_file(path)?, path.display().to_string(), true),
        None => {
            let suite = frozen::regenerate()?;
            let identical = generator::to_jsonl(&suite) == frozen::FROZEN_JSONL;
            println!(
                "regenerated suite is {} the frozen file (sha256 {})",
                if identical {
                    "byte-identical to"
                } else {
                    "DIFFERENT from"
                },
                runner_engine::digest::sha256_hex(frozen::FROZEN_JSONL.as_bytes())
            );
            (suite, "the regenerated suite".to_string(), identical)
        }
    };
    let report = checker::check(
        NormativeSpec::frozen(),
        NormativeSpec::frozen_sha256(),
        &suite,
    );
    print!("{}", stats::table(&report.figures));
    println!(
        "\n{} ({}): {} scenarios, {} reference steps recomputed by {}, {} findings, {:.0} ms",
        origin,
        if report.passed() { "PASS" } else { "FAIL" },
        suite.len(),
        report.steps_checked,
        checker::CHECKER_VERSION,
        report.findings.len(),
        started.elapsed().as_secs_f64() * 1e3,
    );
    if report.foreign_spec > 0 {
        println!(
            "note: {} records carry another normative_spec_sha256 than this build's ({}); they were checked against this build's rules",
            report.foreign_spec,
            NormativeSpec::frozen_sha256()
        );
    }
    for f in report.findings.iter().take(show) {
        println!("  {f}");
    }
    if report.findings.len() > show {
        println!("  ... and {} more (--show N)", report.findings.len() - show);
    }
    let unique: BTreeSet<&str> = report
        .findings
        .iter()
        .map(|f| f.scenario.as_str())
        .collect();
    if !unique.is_empty() {
        println!("{} scenarios with findings", unique.len());
    }
    ok &= report.passed();
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn bench(iters: usize, json: bool) -> anyhow::Result<ExitCode> {
    let rows = creg::bench::suite::run(iters)?;
    super::print_bench(&rows, json);
    Ok(ExitCode::SUCCESS)
}
