//! `runner render ...`: write the prompts of the frozen suite, print their length
//! statistics, or time the renderers.

use anyhow::Context;
use clap::Args;
use creg::frozen;
use creg::record::Scenario;
use creg::render::manifest::{self, FileEntry};
use creg::render::{stats, Condition, Renderer, Task};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

#[derive(Args, Debug)]
pub struct RenderArgs {
    /// A condition name, or `all`.
    #[arg(long, default_value = "all")]
    condition: String,
    /// belief, contradiction, action, explanation, or `all`.
    #[arg(long, default_value = "all")]
    task: String,
    /// Output folder for `<task>/<condition>.jsonl` and manifest.json.
    #[arg(long, default_value = "outputs/prompts")]
    out: PathBuf,
    /// Print the mean body length of every condition next to the published figures,
    /// and whole-prompt lengths per task, instead of writing prompts.
    #[arg(long, conflicts_with = "bench")]
    stats: bool,
    /// Print one prompt of this scenario instead (with one --condition and one --task).
    #[arg(long, conflicts_with_all = ["stats", "bench"])]
    scenario: Option<String>,
    /// With --scenario: the arrival step (default: the last).
    #[arg(long, requires = "scenario")]
    step: Option<usize>,
    /// Time rendering every prompt of the selected conditions and tasks (use a release
    /// build) instead of writing them.
    #[arg(long)]
    bench: bool,
    /// With --bench: one JSON object per line instead of the Markdown table.
    #[arg(long, requires = "bench")]
    json: bool,
}

pub fn run(args: RenderArgs) -> anyhow::Result<ExitCode> {
    let conditions: Vec<Condition> = if args.condition == "all" {
        Condition::ALL.to_vec()
    } else {
        vec![args.condition.parse()?]
    };
    let tasks: Vec<Task> = if args.task == "all" {
        Task::ALL.to_vec()
    } else {
        vec![args.task.parse()?]
    };
    if args.bench {
        return bench(&conditions, &tasks, args.json);
    }
    let suite = frozen::frozen_suite().context("the embedded frozen suite")?;
    let renderer = Renderer::frozen()?;
    if args.stats {
        return Ok(print_stats(&renderer, &suite));
    }
    if let Some(id) = &args.scenario {
        let ([c], [task]) = (conditions.as_slice(), tasks.as_slice()) else {
            anyhow::bail!("--scenario needs one --condition NAME and one --task NAME");
        };
        print_prompt(&renderer, &suite, id, *c, *task, args.step)?;
        return Ok(ExitCode::SUCCESS);
    }
    write_prompts(&renderer, &suite, &conditions, &tasks, &args.out)?;
    Ok(ExitCode::SUCCESS)
}

/// Body lengths against the published figures, then whole-prompt lengths; failure when
/// a body length is off by more than the tolerance.
fn print_stats(renderer: &Renderer, suite: &[Scenario]) -> ExitCode {
    let rows = stats::body_lengths(renderer, suite);
    print!("{}", stats::table(&rows));
    let within = rows
        .iter()
        .all(|r| r.deviation().abs() <= 0.03 && r.ratio_error().abs() <= 0.01);
    println!(
        "mean over every belief prefix (scenario x arrival step); tolerance 3% and 0.01: {}",
        if within { "all within" } else { "NOT within" }
    );
    println!("\nwhole prompts (instructions, body, question), all nine conditions:");
    print!(
        "{}",
        stats::prompt_table(&stats::prompt_lengths(renderer, suite))
    );
    if within {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

/// The prompt of scenario `id` at `step` (default: the last arrival), on stdout.
fn print_prompt(
    renderer: &Renderer,
    suite: &[Scenario],
    id: &str,
    c: Condition,
    task: Task,
    step: Option<usize>,
) -> anyhow::Result<()> {
    let s = suite
        .iter()
        .find(|s| s.id.as_str() == id)
        .with_context(|| format!("no scenario {id} in the frozen suite"))?;
    let step = step.unwrap_or(s.observations.len());
    let mut found = None;
    renderer.prompts(s, c, task, &mut |p| {
        if p.step == step {
            found = Some(p);
        }
    });
    let p = found.with_context(|| {
        format!(
            "{task} is asked at steps {:?} of {id}",
            task.steps(s.observations.len())
        )
    })?;
    println!("{}", p.text);
    eprintln!("request id {}", p.request_id);
    Ok(())
}

/// `<task>/<condition>.jsonl` for every selected pair, then `manifest.json`, into `out`.
fn write_prompts(
    renderer: &Renderer,
    suite: &[Scenario],
    conditions: &[Condition],
    tasks: &[Task],
    out: &Path,
) -> anyhow::Result<()> {
    let started = Instant::now();
    let mut entries: Vec<FileEntry> = Vec::new();
    for &task in tasks {
        for &c in conditions {
            let file = manifest::render_file(renderer, suite, c, task);
            let path = out.join(file.path());
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)
                    .with_context(|| format!("creating {}", dir.display()))?;
            }
            std::fs::write(&path, &file.jsonl)
                .with_context(|| format!("writing {}", path.display()))?;
            entries.push(file.entry());
        }
    }
    let m = manifest::manifest(renderer, entries);
    let path = out.join("manifest.json");
    std::fs::write(&path, serde_json::to_string_pretty(&m)? + "\n")
        .with_context(|| format!("writing {}", path.display()))?;
    println!(
        "wrote {} prompts in {} files to {} in {:.0} ms; bundle sha256 {}",
        m.total_prompts,
        m.files.len(),
        out.display(),
        started.elapsed().as_secs_f64() * 1e3,
        m.bundle_sha256
    );
    Ok(())
}

fn bench(conditions: &[Condition], tasks: &[Task], json: bool) -> anyhow::Result<ExitCode> {
    let rows = creg::bench::render::run(conditions, tasks)?;
    super::print_bench(&rows, json);
    Ok(ExitCode::SUCCESS)
}
