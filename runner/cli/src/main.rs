//! The `runner` command line: argument parsing and dispatch to the library crates.
//! Each subcommand lives in its own file.

use clap::{Parser, Subcommand};
use std::process::ExitCode;

mod engine;
mod generate;
mod interrupt;
mod journal;
mod probe;
mod progress;
mod render;
mod run;
mod score;
mod seeds;
mod served;
mod smoke;
mod suite;
mod weights;

#[derive(Parser, Debug)]
#[command(
    name = "runner",
    version,
    about = "Local inference runner for the CREG suite and the Probe diagnostic"
)]
#[command(args_conflicts_with_subcommands = true)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// Without a subcommand, `runner` is `runner run`.
    #[command(flatten)]
    run: run::RunArgs,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run (or resume) a model or baseline over the suite, streaming into the scorer.
    Run(run::RunArgs),
    /// Rescore run journals offline and rewrite their reports.
    Score(run::ScoreArgs),
    /// Merge shard runs into one run and write its reports.
    Merge(run::MergeArgs),
    /// Repair a run's journal.
    #[command(subcommand)]
    Journal(journal::JournalCommand),
    /// A CPU smoke run of the whole path: a fixture model and the oracle, end to end.
    Smoke(smoke::SmokeArgs),
    /// Generate, check and summarise the CREG evaluation-v1.0 suite.
    #[command(subcommand)]
    Suite(suite::SuiteCommand),
    /// Generate, check and score the Probe diagnostic.
    #[command(subcommand)]
    Probe(probe::ProbeCommand),
    /// Run a baseline system (no network) over the suite and write its reports.
    Baseline(score::BaselineArgs),
    /// Render the prompts of the nine representation conditions and four tasks.
    Render(render::RenderArgs),
    /// Decode one chat prompt and print the sample as JSON.
    Generate(generate::GenerateArgs),
    /// Write a deterministic random-weight model in the Hugging Face layout.
    Fixture(engine::FixtureArgs),
    /// List the pinned model panel and what the local cache holds.
    Models(engine::ModelsArgs),
    /// Prefill and decode throughput of the engine at several batch sizes.
    Bench(engine::BenchArgs),
}

fn run_cli() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let args: Vec<String> = std::env::args().collect();
            match (e.use_stderr(), seeds_hint(&args)) {
                (true, Some(hint)) => {
                    let _ = e.print();
                    eprintln!("hint: {hint}");
                    return ExitCode::from(2);
                }
                _ => e.exit(),
            }
        }
    };
    let result = match cli.command {
        None => run::run_command(cli.run),
        Some(command) => dispatch(command),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {}", describe(&err));
            ExitCode::from(2)
        }
    }
}

/// `--seeds=42 43`: the `=` form takes one value, so clap reads 43 as a subcommand and
/// says so, which points nowhere near the seeds.
fn seeds_hint(args: &[String]) -> Option<String> {
    let at = args.iter().position(|a| a.starts_with("--seeds="))?;
    let first = args[at].trim_start_matches("--seeds=");
    let rest: Vec<&str> = args[at + 1..]
        .iter()
        .map(String::as_str)
        .take_while(|a| a.parse::<u64>().is_ok())
        .collect();
    (!rest.is_empty()).then(|| {
        format!(
            "--seeds={first} takes one value, so {} was read as a command: write --seeds {first} {} \
             or --seeds={first},{}",
            rest.join(" "),
            rest.join(" "),
            rest.join(",")
        )
    })
}

/// The error and its causes, each said once: a cause whose text a message already
/// quotes (many library errors embed their source) is not repeated.
fn describe(err: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    if out.contains("downloading ") && out.contains(" failed") {
        out.push_str(
            "\nhint: the model hub could not be reached. Fetch the weights once on a connected \
             machine into the cache (HF_HOME or HF_HUB_CACHE), then run with HF_HUB_OFFLINE=1 \
             to read only the cache.",
        );
    }
    out
}

fn dispatch(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Run(args) => run::run_command(args),
        Command::Score(args) => run::score(args),
        Command::Merge(args) => run::merge(args),
        Command::Journal(cmd) => journal::run(cmd),
        Command::Smoke(args) => smoke::smoke(args),
        Command::Suite(cmd) => suite::run(cmd),
        Command::Probe(cmd) => probe::run(cmd),
        Command::Baseline(args) => score::baseline(args),
        Command::Render(args) => render::run(args),
        Command::Generate(args) => generate::generate(args),
        Command::Fixture(args) => engine::fixture(args),
        Command::Models(args) => engine::models(args),
        Command::Bench(args) => engine::bench(args),
    }
}

/// A bench's rows on stdout: JSON lines, or the Markdown table and the build's note.
fn print_bench(rows: &[serde_json::Value], json: bool) {
    if json {
        print!("{}", runner_core::bench_table::json_lines(rows));
    } else {
        print!("{}", runner_core::bench_table::markdown(rows));
        if let Some(note) = runner_engine::bench::build_note() {
            println!("\n{note}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::describe;
    use anyhow::Context;

    #[test]
    fn each_cause_is_printed_once() {
        let io = std::io::Error::from(std::io::ErrorKind::NotFound);
        let text = io.to_string();
        let err = Err::<(), _>(io)
            .with_context(|| format!("suite.jsonl: cannot read: {text}"))
            .context("loading the suite")
            .unwrap_err();
        let said = describe(&err);
        assert_eq!(
            said,
            format!("loading the suite: suite.jsonl: cannot read: {text}")
        );
        assert_eq!(said.matches(&text).count(), 1);
    }

    #[test]
    fn an_unreachable_hub_points_at_the_cache_and_offline_mode() {
        let err = anyhow::anyhow!(
            "downloading config.json of Qwen/Qwen2.5-7B-Instruct failed: io: Connection refused"
        )
        .context("loading qwen2.5-7b");
        let said = describe(&err);
        assert!(
            said.contains("HF_HUB_OFFLINE=1") && said.contains("HF_HOME"),
            "{said}"
        );
    }
}

/// Every heap allocation is counted, for `runner bench`'s allocations per decode step
/// (the `alloc-count` feature, on by default; without it the bench reports them as null).
/// It forwards to the system allocator (glibc's malloc here), so the tuning below holds.
#[cfg(feature = "alloc-count")]
#[global_allocator]
static HEAP: runner_engine::alloc_count::CountingAlloc =
    runner_engine::alloc_count::CountingAlloc::HEAP;

fn main() -> std::process::ExitCode {
    // Before any other thread exists: both set process-wide state.
    runner_engine::process::tune();
    interrupt::install();
    run_cli()
}
