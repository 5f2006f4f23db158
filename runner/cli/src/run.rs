//! `runner [run]`: a resumable batch job over the suite, streaming into the scorer;
//! `runner score RUN_DIR...` and `runner merge RUN_DIR...` on finished journals.

use super::engine::EngineModels;
use super::progress::Bar;
use super::served::Watch;
use anyhow::{bail, Context, Result};
use clap::Args;
use runner_core::journal;
use runner_core::plan::Shard;
use runner_core::run::model;
use runner_core::run::rescore::{self, Event, Rescore};
use runner_core::run::{execute_with, folder, manifest, Outcome, RunOptions, Workload};
use runner_core::suite::PlanRequest;
use runner_engine::batch::UTILIZATION_MEANING;
use runner_engine::candle::load::open::LocalOptions;
use runner_engine::candle::DeviceChoice;
use runner_engine::panel::Panel;
use runner_engine::resolve::ModelOptions;
use runner_engine::served::client::Traffic;
use runner_engine::served::wire::redact;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    /// creg (the evaluation-v1.0 suite) or probe (the Probe diagnostic: the generated
    /// probe.json and probe_pit.json, or the file --suite-file names).
    #[arg(long, default_value = "creg",
          value_parser = clap::builder::PossibleValuesParser::new(runner::SUITES.names()))]
    pub suite: String,
    /// A panel model (see `runner models`), a baseline (oracle, confidence-only,
    /// no-relations, no-epochs, latest-wins, uniform) or a model folder.
    #[arg(long)]
    pub model: Option<String>,
    /// all (the nine), principal (the four), or names, comma-separated [default:
    /// principal].
    #[arg(long, value_delimiter = ',')]
    pub condition: Option<Vec<String>>,
    /// belief, endpoint (contradiction, action, explanation), single tasks, or all
    /// [default: all].
    #[arg(long, value_delimiter = ',')]
    pub tasks: Option<Vec<String>>,
    /// Seeds: --seeds 42 43 44, --seeds 42,43,44 or --seeds "42 43 44".
    #[arg(long, num_args = 1.., default_values_t = crate::seeds::protocol())]
    pub seeds: Vec<crate::seeds::Seeds>,
    /// auto, cpu or cuda:N.
    #[arg(long, default_value = "auto")]
    pub device: String,
    #[command(flatten)]
    pub weights: crate::weights::WeightArgs,
    /// Run slice I of N (0-based), by request id.
    #[arg(long)]
    pub shard: Option<Shard>,
    /// Keep the first N scenarios of every regime (Probe: the first N items of every domain).
    #[arg(long)]
    pub limit: Option<usize>,
    #[arg(long, default_value = "outputs")]
    pub out: PathBuf,
    /// The run's folder name under <out>/<model>/ (default: the suite's name, plus the shard).
    #[arg(long)]
    pub run: Option<String>,
    /// Start a new run beside an existing one instead of resuming it.
    #[arg(long)]
    pub fresh: bool,
    /// A CREG suite file (JSONL) instead of the frozen suite, e.g. the original data;
    /// with --suite probe, a probe.json or probe_pit.json instead of the generated pair.
    #[arg(long)]
    pub suite_file: Option<PathBuf>,
    /// New tokens per sample; the protocol's 512 unless a smoke run asks for fewer.
    #[arg(long, default_value_t = runner_core::protocol::MAX_NEW_TOKENS)]
    pub max_new_tokens: usize,
    /// Sequences decoded together (default: the engine's); at least 1.
    #[arg(long, value_parser = clap::builder::RangedU64ValueParser::<usize>::new().range(1..))]
    pub max_batch: Option<usize>,
    /// A Jinja chat template for the model in place of its own (a base model has none,
    /// and then runs its prompts as plain text after the tokenizer's BOS).
    #[arg(long, value_name = "FILE")]
    pub chat_template: Option<PathBuf>,
    /// A model panel other than the built-in one.
    #[arg(long)]
    pub panel: Option<PathBuf>,
    /// Print the summary only (no progress bar).
    #[arg(long)]
    pub quiet: bool,
    #[command(flatten)]
    pub served: super::served::ServedArgs,
}

impl RunArgs {
    /// Every seed of every `--seeds` value, in order.
    pub fn seeds(&self) -> Vec<u64> {
        crate::seeds::flat(&self.seeds)
    }
}

/// Settings refused before anything is loaded.
fn check_settings(args: &RunArgs) -> Result<()> {
    if args.max_new_tokens == 0 {
        bail!("--max-new-tokens must be at least 1");
    }
    let seeds = args.seeds();
    if seeds.is_empty() {
        bail!("--seeds needs at least one seed");
    }
    for (i, seed) in seeds.iter().enumerate() {
        if let Some(j) = seeds[..i].iter().position(|s| s == seed) {
            bail!(
                "--seeds: seed {seed} is given twice (positions {} and {}); each seed once",
                j + 1,
                i + 1
            );
        }
    }
    if args.limit == Some(0) {
        bail!("--limit 0 keeps nothing: give at least 1, or leave --limit out for the whole suite");
    }
    if let Some(run) = &args.run {
        let bad = run.is_empty() || run == "." || run == ".." || run.contains(['/', '\\']);
        if bad || runner_core::fsutil::component(run) != *run {
            bail!(
                "--run {run:?}: a run name is one folder name of letters, digits, '.', '-' and '_' \
                 (not empty, '.' or '..'), e.g. --run creg-v1.0-try2"
            );
        }
    }
    if args.out.exists() && !args.out.is_dir() {
        bail!(
            "--out {}: is a file, not a folder; give a folder for the runs",
            args.out.display()
        );
    }
    Ok(())
}

/// The workload the run asks for, planned by its suite (`runner::SUITES`).
fn workload(args: &RunArgs) -> Result<Box<dyn Workload>> {
    check_settings(args)?;
    let request = PlanRequest {
        conditions: args.condition.clone(),
        tasks: args.tasks.clone(),
        seeds: args.seeds(),
        limit: args.limit,
        shard: args.shard,
        suite_file: args.suite_file.clone(),
        max_new_tokens: args.max_new_tokens,
    };
    Ok(runner::SUITES.plan(&args.suite, &request)?)
}

/// Runs or resumes one run and prints its summary; returns the run folder.
pub fn run(args: RunArgs) -> Result<PathBuf> {
    let Some(model_name) = args.model.clone() else {
        bail!("--model is required: a panel model (see `runner models`), a baseline such as oracle, or a model folder; `runner smoke` runs a CPU smoke test");
    };
    let workload = workload(&args)?;
    let device: DeviceChoice = args.device.parse().map_err(anyhow::Error::msg)?;
    let panel = super::engine::panel(args.panel.as_deref())?;
    let (loaded, traffic, watch) =
        load_model(&args, &model_name, workload.as_ref(), device, &panel)?;
    for w in &loaded.warnings {
        eprintln!("warning: {w}");
    }
    let run_name = args.run.clone().unwrap_or_else(|| match args.shard {
        Some(s) => format!("{}.shard-{}-of-{}", workload.name(), s.index, s.count),
        None => workload.name().to_string(),
    });
    let dir = folder::run_dir(&args.out, &loaded.label, &run_name, args.fresh);
    let manifest = manifest::manifest(
        workload.as_ref(),
        &loaded.identity,
        &loaded.context,
        // Credentials in an endpoint URL are not recorded.
        &redact(&std::env::args().collect::<Vec<_>>().join(" ")),
    );
    let mut backend = loaded.backend;
    let mut bar = Bar::new(workload.headline(), args.quiet);
    bar.set_traffic(traffic.clone());
    bar.set_activity(backend.activity());
    if let Some(w) = &watch {
        w.set_bar(&bar.bar);
    }
    super::interrupt::watch_draining(
        &dir,
        backend.admission(),
        backend.activity(),
        args.max_new_tokens,
    );
    if !args.quiet {
        print_start(&dir, workload.as_ref(), Some(&backend.describe()));
        if let Some(bounds) = backend.memory_bounds() {
            eprintln!("{bounds}");
        }
    }
    let options = RunOptions {
        retry_failed: args.served.retry_failed,
    };
    let outcome = execute_with(
        backend.as_mut(),
        workload.as_ref(),
        &manifest,
        &dir,
        &loaded.label,
        &mut bar,
        &options,
    );
    drop(watch);
    bar.finish();
    if let Some(t) = &traffic {
        super::served::after_run(t);
    }
    let outcome = outcome?;
    if outcome.interrupted {
        // A first Ctrl-C: the work in flight is journaled; the reports wait for the resume.
        eprintln!("{}", super::interrupt::interrupted(&dir));
        std::process::exit(130);
    }
    print_outcome(&outcome, &dir);
    Ok(dir)
}

/// `--model` loaded through the engine's one resolver (`EngineModels`), with what the
/// run shows of it: a served model's request counters and the watch that says when its
/// server stops answering; for a baseline or a local model, the line that loading
/// started and the model's name on an error.
fn load_model(
    args: &RunArgs,
    name: &str,
    workload: &dyn Workload,
    device: DeviceChoice,
    panel: &Panel,
) -> Result<(model::Loaded, Option<Arc<Traffic>>, Option<Watch>)> {
    let traffic = Arc::new(Traffic::default());
    let models = EngineModels::new(ModelOptions {
        local: LocalOptions {
            device,
            load: args.weights.options(),
            max_batch: args.max_batch,
            panel,
            chat_template: args.chat_template.clone(),
        },
        served: args.served.settings(traffic.clone())?,
    });
    let server = models.server(name)?;
    // Started before the first connection, whose retries it tells of.
    let watch = server
        .as_ref()
        .map(|s| Watch::start(traffic, redact(&s.endpoint)));
    let loaded = if server.is_some() {
        model::load(name, workload, &models)?
    } else {
        if !args.quiet {
            // A large model's weights take a while to read and check: say what is happening.
            eprintln!("loading {name} ...");
        }
        model::check_max_batch(args.max_batch)
            .and_then(|()| model::load(name, workload, &models))
            .with_context(|| format!("loading {name}"))?
    };
    Ok((loaded, models.traffic(), watch))
}

/// A finished run's headline, its size and time, and where its reports are: the full
/// tables (hundreds of lines) are in the files, not on the terminal.
pub(super) fn print_outcome(outcome: &Outcome, dir: &Path) {
    print!("{}", headline_of(&outcome.summary));
    print!("{}", outcome.failed_note);
    println!(
        "\n{} samples ({} generated now, {} resumed from the journal) in {:.1} s",
        outcome.running.done, outcome.running.generated, outcome.recovered, outcome.seconds,
    );
    // The same words and figures as the run's summary.md (for this invocation alone).
    if let Some(u) = outcome.batch.as_ref().and_then(|b| b.describe()) {
        println!("Batch utilization ({UTILIZATION_MEANING}): {u}");
    }
    print_report_paths(dir);
}

/// The start of a run's summary.md up to its first section's end: the title, the
/// provenance and the headline table.
pub(super) fn headline_of(summary: &str) -> &str {
    let mut sections = summary.match_indices("\n## ").map(|(i, _)| i);
    match (sections.next(), sections.next()) {
        (Some(_), Some(second)) => &summary[..second + 1],
        _ => summary,
    }
}

/// Where a report folder's page and full tables are.
pub(super) fn print_report_paths(dir: &Path) {
    let page = dir.join("report.html");
    if page.is_file() {
        println!("Report: {}", page.display());
    }
    let beside: Vec<&str> = ["tables.tex", "scores.csv", "scores.json"]
        .into_iter()
        .filter(|f| dir.join(f).is_file())
        .collect();
    println!(
        "All tables: {}{}",
        dir.join("summary.md").display(),
        if beside.is_empty() {
            String::new()
        } else {
            format!(" (beside it {})", beside.join(", "))
        }
    );
}

/// The line a run starts with: its folder and size, and what answers it.
pub(super) fn print_start(dir: &Path, workload: &dyn Workload, backend: Option<&str>) {
    eprintln!(
        "run {}: {} requests, {} samples{}",
        dir.display(),
        workload.jobs().len(),
        workload
            .jobs()
            .iter()
            .map(|j| j.request.seeds.len())
            .sum::<usize>(),
        backend.map(|b| format!(", {b}")).unwrap_or_default()
    );
}

pub fn run_command(args: RunArgs) -> Result<ExitCode> {
    run(args).map(|_| ExitCode::SUCCESS)
}

#[derive(Args, Debug)]
pub struct ScoreArgs {
    /// Run folders (each with manifest.json and journal.jsonl).
    dirs: Vec<PathBuf>,
    /// Write one report of the runs here and only read the run folders. Without it each
    /// run's own reports are rewritten, and several runs pooled into outputs/combined.
    #[arg(long)]
    out: Option<PathBuf>,
    /// The suite file the runs used, when it is not the frozen CREG suite or the
    /// generated Probe set.
    #[arg(long)]
    suite_file: Option<PathBuf>,
    /// Time parsing+scoring and aggregation of 55,200 belief samples, and the answer
    /// extractor on degenerate outputs, instead.
    #[arg(long)]
    bench: bool,
    /// When several runs hold the same (model, request, seed), keep the first run's
    /// sample instead of refusing to pool them.
    #[arg(long)]
    keep_first: bool,
    /// Sizes in bytes of the degenerate outputs of --bench (default 1 MiB).
    #[arg(long, value_delimiter = ',', default_values_t = [1usize << 20])]
    bench_bytes: Vec<usize>,
}

/// `runner score RUN_DIR...`: rescores journals with the streaming scorer's code.
pub fn score(args: ScoreArgs) -> Result<ExitCode> {
    if args.bench {
        return super::score::bench(&args.bench_bytes);
    }
    let job = Rescore {
        dirs: &args.dirs,
        suite_file: args.suite_file.as_deref(),
        keep_first: args.keep_first,
        out: args.out.clone(),
        suites: &runner::SUITES,
    };
    rescore::rescore(&job, &mut |event| match event {
        Event::Rescored {
            dir,
            samples,
            summary,
        } => {
            if let Some(s) = summary {
                print!("{}", headline_of(&s));
                print_report_paths(&dir);
            }
            eprintln!(
                "{}: {samples} samples rescored; reports rewritten",
                dir.display()
            );
        }
        Event::LeftOut {
            dir,
            samples,
            holder,
        } => eprintln!(
            "{}: {samples} samples already held by {} left out (--keep-first)",
            dir.display(),
            holder.display()
        ),
        Event::Combined { out, summary } => {
            print!("{}", headline_of(&summary));
            print_report_paths(&out);
            eprintln!(
                "reports of {} in {}",
                if args.dirs.len() == 1 {
                    "the run"
                } else {
                    "the runs together"
                },
                out.display()
            );
        }
        Event::ScoresDiffer {
            dir,
            samples,
            first: (request, seed),
        } => eprintln!(
            "warning: {}: {samples} samples carry stored scores that differ from the scores \
             of their answers (first: request {request} seed {seed}); the journal was edited \
             or written by another scorer. The reports use the recomputed scores",
            dir.display()
        ),
        Event::Strays { dir, lines, first } => eprintln!(
            "warning: {}: {} belong to the manifest's plan (first: {first}); the journal \
             was edited. {} left out of the reports",
            dir.join(journal::JOURNAL_FILE).display(),
            if lines == 1 {
                "1 line does not".to_string()
            } else {
                format!("{lines} lines do not")
            },
            if lines == 1 { "It is" } else { "They are" },
        ),
    })?;
    Ok(ExitCode::SUCCESS)
}

#[derive(Args, Debug)]
pub struct MergeArgs {
    /// Shard run folders of one run.
    dirs: Vec<PathBuf>,
    /// The merged run's folder.
    #[arg(long)]
    out: PathBuf,
    #[arg(long)]
    suite_file: Option<PathBuf>,
}

/// `runner merge RUN_DIR... --out DIR`: shard journals into one run, then its reports.
pub fn merge(args: MergeArgs) -> Result<ExitCode> {
    if args.dirs.is_empty() {
        bail!("give the shard run folders to merge");
    }
    let n = journal::merge(&args.dirs, &args.out)?;
    let m = journal::read_manifest(&args.out)?
        .with_context(|| format!("{}: the merge wrote no manifest", args.out.display()))?;
    let w = rescore::workload_of(&runner::SUITES, &args.out, &m, args.suite_file.as_deref())?;
    let planned: usize = w.jobs().iter().map(|j| j.request.seeds.len()).sum();
    eprintln!(
        "{n} samples from {} shard runs merged into {}",
        args.dirs.len(),
        args.out.display()
    );
    let missing = (n < planned).then(|| {
        format!(
            "warning: the plan has {planned} samples; {} are missing (a shard is unfinished or \
             not given): the merged reports cover {n}",
            planned - n
        )
    });
    if let Some(w) = &missing {
        eprintln!("{w}");
    }
    let code = score(ScoreArgs {
        dirs: vec![args.out],
        out: None,
        suite_file: args.suite_file,
        keep_first: false,
        bench: false,
        bench_bytes: Vec::new(),
    })?;
    // Said again below the summary, where the eye ends up.
    if let Some(w) = &missing {
        std::io::Write::flush(&mut std::io::stdout()).ok();
        eprintln!("{w}");
    }
    Ok(code)
}
