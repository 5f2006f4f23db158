//! `runner generate`, `runner fixture`, `runner models`, `runner bench`: the engine from
//! the command line.

use anyhow::{bail, Result};
use clap::Args;
use runner_core::run::model::{Asked, Loaded, ModelSource};
use runner_core::run::RunError;
use runner_engine::bench;
use runner_engine::bench::engine::{BenchModel, EngineBench, MixedWorkload};
use runner_engine::bench::sampler::SamplerBench;
use runner_engine::candle::fixture::{Arch, Size};
use runner_engine::candle::load::hub::{self, ModelFiles};
use runner_engine::candle::load::open::LocalOptions;
use runner_engine::candle::load::pins::{self, DigestMemory};
use runner_engine::candle::{Batching, Refill};
use runner_engine::panel::{GgufEntry, Panel};
use runner_engine::resolve::{self, ModelOptions, ResolveError, ServedSettings, Server};
use runner_engine::served::client::Traffic;
use serde_json::json;
use std::cell::OnceCell;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

/// The panel as built into the binary; `--panel` reads another file instead.
pub fn panel(path: Option<&Path>) -> Result<Panel> {
    Ok(match path {
        Some(p) => Panel::load(p)?,
        None => Panel::builtin()?,
    })
}

/// The engine's one resolver (`runner_engine::resolve`) as the source of `--model`s: a
/// served model ahead of the workload's baselines, a local one after them.
pub struct EngineModels<'a> {
    options: ModelOptions<'a>,
    /// A served model's request counters, once it is open.
    traffic: OnceCell<Arc<Traffic>>,
}

impl<'a> EngineModels<'a> {
    pub fn new(options: ModelOptions<'a>) -> Self {
        EngineModels {
            options,
            traffic: OnceCell::new(),
        }
    }

    /// Local models only, as far as the panel serves none (no served flags).
    pub fn local(local: LocalOptions<'a>) -> Self {
        Self::new(ModelOptions {
            local,
            served: ServedSettings::default(),
        })
    }

    /// The server that answers `model`, if one does (nothing is loaded).
    pub fn server(&self, model: &str) -> Result<Option<Server>> {
        Ok(resolve::server(model, &self.options)?)
    }

    /// The request counters of the served model opened, if it was one.
    pub fn traffic(&self) -> Option<Arc<Traffic>> {
        self.traffic.get().cloned()
    }
}

impl ModelSource for EngineModels<'_> {
    fn ahead_of_baselines(&self, model: &str) -> Result<bool, RunError> {
        Ok(resolve::server(model, &self.options)
            .map_err(run_error)?
            .is_some())
    }

    fn open(&self, model: &str, asked: &Asked) -> Result<Option<Loaded>, RunError> {
        let Some(opened) = resolve::open(model, asked, &self.options).map_err(run_error)? else {
            return Ok(None);
        };
        if let Some(t) = opened.traffic {
            self.traffic.set(t).ok();
        }
        Ok(Some(opened.loaded))
    }

    fn names(&self) -> Vec<String> {
        let panel = self.options.local.panel;
        panel.names().into_iter().map(String::from).collect()
    }
}

/// The resolver's error as core carries it: the engine's as it is, a served model's
/// with its causes in one line, as `main` says an error (a cause said once).
fn run_error(e: ResolveError) -> RunError {
    match e {
        ResolveError::Engine(e) => RunError::Engine(e),
        e => {
            let mut said = String::new();
            let mut cause: Option<&dyn std::error::Error> = Some(&e);
            while let Some(c) = cause {
                let text = c.to_string();
                if !said.contains(&text) {
                    if !said.is_empty() {
                        said.push_str(": ");
                    }
                    said.push_str(&text);
                }
                cause = c.source();
            }
            RunError::Setup(said)
        }
    }
}

/// A panel name or a local folder in the Hugging Face layout, in the library's one
/// resolution order (`hub::resolve`).
pub fn resolve(model: &str, panel_path: Option<&Path>) -> Result<(ModelFiles, String)> {
    let panel = panel(panel_path)?;
    let Some(found) = hub::resolve(model, &panel)? else {
        bail!(
            "{model:?} is neither a panel model ({}) nor a folder or GGUF file",
            panel.names().join(", ")
        );
    };
    Ok((found.files, found.label))
}

/// `--arch`'s values, from the architecture table: the help lists every architecture
/// the engine runs, an added one included.
pub fn arch_names() -> clap::builder::PossibleValuesParser {
    clap::builder::PossibleValuesParser::new(
        runner_engine::candle::models::ARCHITECTURES
            .iter()
            .map(|a| a.name),
    )
}

#[derive(Args, Debug)]
pub struct FixtureArgs {
    /// The architecture.
    #[arg(long, value_parser = arch_names())]
    arch: String,
    /// tiny, small or qwen7b-shape (Qwen2.5-7B's sizes, random bf16 weights, 15 GB)
    #[arg(long, default_value = "tiny")]
    size: String,
    #[arg(long)]
    out: PathBuf,
    /// Train the tokenizer on the suite's prompts to this many tokens (as the smoke run
    /// does), so suite prompts have realistic lengths on the fixture.
    #[arg(long)]
    suite_vocab: Option<usize>,
}

pub fn fixture(args: FixtureArgs) -> Result<ExitCode> {
    let arch: Arch = args.arch.parse().map_err(anyhow::Error::msg)?;
    let size: Size = args.size.parse().map_err(anyhow::Error::msg)?;
    let corpus = match args.suite_vocab {
        Some(vocab) => Some((creg::workload::tokenizer_corpus()?, vocab)),
        None => None,
    };
    runner_engine::candle::fixture::write_fixture_with(arch, size, &args.out, corpus)?;
    println!("{}", args.out.display());
    Ok(ExitCode::SUCCESS)
}

#[derive(Args, Debug)]
pub struct ModelsArgs {
    /// Show one model (its pinned files and where the cache holds it).
    name: Option<String>,
    #[arg(long)]
    panel: Option<PathBuf>,
}

pub fn models(args: ModelsArgs) -> Result<ExitCode> {
    let panel = panel(args.panel.as_deref())?;
    let cache = hub::hub_cache_dir();
    if let Some(name) = &args.name {
        if let Some(g) = panel.gguf.get(name) {
            show_gguf(name, g, &cache);
            return Ok(ExitCode::SUCCESS);
        }
        let Some(e) = panel.models.get(name) else {
            bail!(
                "unknown model {name:?}; the panel has {}",
                panel.names().join(", ")
            );
        };
        let snapshot = hub::cached_snapshot(&cache, &e.repo, &e.revision);
        println!(
            "{name}: {} at {} ({}, {})",
            e.repo, e.revision, e.arch, e.dtype
        );
        println!(
            "tokenizer: {} at {}",
            e.tokenizer_repo, e.tokenizer_revision
        );
        println!(
            "licence: {}{}",
            e.license,
            if e.gated {
                " (gated: accept it on the model page and set HF_TOKEN)"
            } else {
                ""
            }
        );
        let memory = DigestMemory::for_cache(&cache);
        for f in &e.files {
            let state = match &snapshot {
                Some(d) => pins::cached_state(&d.join(&f.name), f, &memory),
                None => "not cached".into(),
            };
            println!(
                "  {} {:>14} bytes sha256 {} {state}",
                f.name, f.bytes, f.sha256,
            );
        }
        match snapshot {
            Some(d) => println!("cache: {}", d.display()),
            None => println!(
                "cache: not in {} (the first run downloads it; HF_HUB_OFFLINE=1 forbids that)",
                cache.display()
            ),
        }
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "{:<14} {:<36} {:<42} {:<7} {:<6} cached",
        "name", "repo", "revision", "arch", "gated"
    );
    for (name, e) in &panel.models {
        let cached = hub::cached_snapshot(&cache, &e.repo, &e.revision)
            .and_then(|d| ModelFiles::from_dir(&d).ok())
            .is_some_and(|f| f.weights.iter().all(|w| w.is_file()));
        println!(
            "{:<14} {:<36} {:<42} {:<7} {:<6} {}",
            name,
            e.repo,
            e.revision,
            e.arch,
            if e.gated { "yes" } else { "no" },
            if cached { "yes" } else { "no" }
        );
    }
    if !panel.gguf.is_empty() {
        println!();
        println!(
            "{:<28} {:<36} {:<42} {:<6} cached",
            "GGUF file", "repo", "revision", "gated"
        );
        for (name, g) in &panel.gguf {
            let cached = hub::cached_snapshot(&cache, &g.repo, &g.revision)
                .is_some_and(|d| d.join(&g.file.name).is_file());
            println!(
                "{:<28} {:<36} {:<42} {:<6} {}",
                name,
                g.repo,
                g.revision,
                if g.gated { "yes" } else { "no" },
                if cached { "yes" } else { "no" }
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `runner models NAME` for a pinned GGUF file.
fn show_gguf(name: &str, g: &GgufEntry, cache: &Path) {
    println!(
        "{name}: {} of {} at {} (GGUF)",
        g.file.name, g.repo, g.revision
    );
    println!(
        "licence: {}{}",
        g.license,
        if g.gated {
            " (gated: accept it on the model page and set HF_TOKEN)"
        } else {
            ""
        }
    );
    let snapshot = hub::cached_snapshot(cache, &g.repo, &g.revision);
    let memory = DigestMemory::for_cache(cache);
    let state = match &snapshot {
        Some(d) => pins::cached_state(&d.join(&g.file.name), &g.file, &memory),
        None => "not cached".into(),
    };
    println!(
        "  {} {:>14} bytes sha256 {} {state}",
        g.file.name, g.file.bytes, g.file.sha256
    );
}

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// A model folder or GGUF file; without it a fixture of --arch and --size is written to a
    /// temporary folder.
    #[arg(long)]
    model: Option<PathBuf>,
    /// The fixture's architecture.
    #[arg(long, default_value = "qwen2", value_parser = arch_names())]
    arch: String,
    #[arg(long, default_value = "small")]
    size: String,
    /// Batch sizes, comma-separated; 0 stands for the row limit, the rows whose KV
    /// cache of prompt and new tokens fits the device's KV budget.
    #[arg(long, default_value = "1,8,32", value_delimiter = ',')]
    batch: Vec<usize>,
    #[arg(long, default_value_t = 1500)]
    prompt_tokens: usize,
    #[arg(long, default_value_t = 128)]
    new_tokens: usize,
    /// Prompt tokens (rows x longest prompt) per prefill pass.
    #[arg(long, default_value_t = 4096)]
    prefill_tokens: usize,
    #[arg(long, default_value = "auto")]
    device: String,
    #[command(flatten)]
    weights: crate::weights::WeightArgs,
    /// Also write the prompts' token ids as JSON, for a side-by-side run elsewhere.
    #[arg(long)]
    save_prompts: Option<PathBuf>,
    /// Runs per batch size; the medians are reported (a shared machine is noisy).
    #[arg(long, default_value_t = 3)]
    repeat: usize,
    /// Token choice in the decode steps: greedy, or the protocol's top-p sampling.
    #[arg(long, default_value = "greedy")]
    sampling: String,
    /// Only the sampler: time one decode step's token choice for each --batch size over
    /// --vocab synthetic logits: the full-vocabulary sampler beside the candidate-set one
    /// on the host, then logits held by --device read whole beside block reads (with the
    /// bytes they read back), in alternating rounds (--repeat of them). No model loads.
    #[arg(long)]
    sampler: bool,
    #[arg(long, default_value_t = 152_064)]
    vocab: usize,
    /// One JSON object per line instead of the Markdown table (for scripts).
    #[arg(long)]
    json: bool,
    /// `mixed`: a serving workload of --requests prompts with length caps of 16 to
    /// --longest-cap new tokens (median a quarter of it), decoded at a row limit of
    /// --mixed-rows (default: the largest --batch) by each --scheduler in alternating
    /// rounds (--repeat of them). `fixed,mixed`: both on one load of the model, the
    /// fixed batches first and the row limit (--batch 0) last.
    #[arg(long, value_delimiter = ',')]
    workload: Vec<String>,
    #[arg(long)]
    mixed_rows: Option<usize>,
    /// Print the GPU check's memory plan for a device (`h200`, or its memory in GiB)
    /// with Qwen2.5-7B in bf16: each step's peak, computed, nothing loaded. Exits 1
    /// when a step does not fit.
    #[arg(long)]
    memory_plan: Option<String>,
    #[arg(long, default_value_t = 96)]
    requests: usize,
    /// The mixed workload's longest length cap (the protocol's is 512).
    #[arg(long, default_value_t = 256)]
    longest_cap: usize,
    /// Schedulers to compare, comma-separated: continuous, static.
    #[arg(long, default_value = "continuous,static", value_delimiter = ',')]
    scheduler: Vec<String>,
    /// How continuous batching refills finished rows' places, comma-separated, each run
    /// in turn: in-place (the default), compact (drop them at once, for comparison).
    #[arg(long, value_delimiter = ',')]
    refill: Vec<String>,
}

/// The bench's workload as the library takes it.
fn engine_bench(args: &BenchArgs) -> Result<EngineBench> {
    let model = match &args.model {
        Some(dir) => BenchModel::Folder(dir.clone()),
        None => BenchModel::Fixture {
            arch: args.arch.parse().map_err(anyhow::Error::msg)?,
            size: args.size.parse().map_err(anyhow::Error::msg)?,
        },
    };
    Ok(EngineBench {
        model,
        device: args.device.parse().map_err(anyhow::Error::msg)?,
        load: args.weights.options(),
        batches: args.batch.clone(),
        prompt_tokens: args.prompt_tokens,
        new_tokens: args.new_tokens,
        prefill_tokens: args.prefill_tokens,
        repeat: args.repeat,
        sampling: args.sampling.parse().map_err(anyhow::Error::msg)?,
        save_prompts: args.save_prompts.clone(),
        fixed: args.workload.is_empty() || args.workload.iter().any(|w| w == "fixed"),
        mixed: mixed_workload(args)?,
    })
}

/// The mixed workload `--workload` asks for, if any.
fn mixed_workload(args: &BenchArgs) -> Result<Option<MixedWorkload>> {
    if let Some(bad) = args
        .workload
        .iter()
        .find(|w| !matches!(w.as_str(), "fixed" | "mixed"))
    {
        bail!("unknown --workload {bad:?} (fixed, mixed)")
    }
    if !args.workload.iter().any(|w| w == "mixed") {
        if !args.refill.is_empty() || args.mixed_rows.is_some() {
            bail!("--refill and --mixed-rows apply to the mixed workload only (--workload mixed)")
        }
        return Ok(None);
    }
    Ok(Some(MixedWorkload {
        rows: args.mixed_rows,
        requests: args.requests,
        longest_cap: args.longest_cap,
        schedulers: args
            .scheduler
            .iter()
            .map(|s| s.parse::<Batching>().map_err(anyhow::Error::msg))
            .collect::<Result<_>>()?,
        refills: args
            .refill
            .iter()
            .map(|s| s.parse::<Refill>().map_err(anyhow::Error::msg))
            .collect::<Result<_>>()?,
    }))
}

/// `--memory-plan`: the plan's table (or one JSON object per step), and whether it fits.
fn memory_plan(device: &str, json: bool) -> Result<ExitCode> {
    use runner_engine::candle::memory_plan::{
        gpu_check_plan, CheckWorkload, DeviceMemory, ModelShape,
    };
    let memory = match device.to_ascii_lowercase().as_str() {
        "h200" => DeviceMemory::H200,
        other => match other.trim_end_matches("gib").parse::<u64>() {
            Ok(gib) if gib > 0 => DeviceMemory {
                name: "GPU",
                bytes: gib << 30,
            },
            _ => bail!("--memory-plan {device:?}: expected h200 or the device's memory in GiB"),
        },
    };
    let plan = gpu_check_plan(memory, ModelShape::QWEN2_5_7B, &CheckWorkload::gpu_check());
    if json {
        for s in &plan.steps {
            println!(
                "{}",
                serde_json::json!({
                    "plan": plan.device.name, "step": s.step, "rows": s.rows,
                    "weights_bytes": s.weights, "kv_peak_bytes": s.kv,
                    "activation_bytes": s.activations, "total_bytes": s.total(),
                    "device_bytes": plan.device.bytes, "fits": s.total() <= plan.device.bytes,
                })
            );
        }
    } else {
        print!("{}", plan.table());
    }
    let over = plan.overflows();
    if over.is_empty() {
        return Ok(ExitCode::SUCCESS);
    }
    let names: Vec<&str> = over.iter().map(|s| s.step.as_str()).collect();
    eprintln!(
        "error: the plan does not fit {}: {}",
        plan.device.name,
        names.join(", ")
    );
    Ok(ExitCode::FAILURE)
}

pub fn bench(args: BenchArgs) -> Result<ExitCode> {
    if let Some(device) = &args.memory_plan {
        return memory_plan(device, args.json);
    }
    if args.sampler {
        let rows = bench::sampler::run(&SamplerBench {
            device: args.device.parse().map_err(anyhow::Error::msg)?,
            rows: args.batch.clone(),
            vocab: args.vocab,
            rounds: args.repeat,
            sampling: args.sampling.parse().map_err(anyhow::Error::msg)?,
        })?;
        super::print_bench(&rows, args.json);
        return Ok(ExitCode::SUCCESS);
    }
    // JSON lines stream as each batch size finishes; the table needs them all, so
    // until it comes a line on stderr says how far the bench got.
    let json = args.json;
    let rows = bench::engine::run(&engine_bench(&args)?, &mut |row| {
        if json {
            println!("{row}");
        } else {
            match row.get("scheduler") {
                Some(s) => eprintln!("{s} round {} measured", row["round"]),
                None => eprintln!("batch {} measured", row["batch"]),
            }
        }
    })?;
    if !json {
        let (table, more) = compact(&rows);
        super::print_bench(&table, false);
        if !more.is_empty() {
            println!(
                "\nEvery field with --json (one object per line), also: {}",
                more.join(", ")
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The fixed batches' figures a reader looks for first, in the table's order; nested
/// keys are `outer.inner`. The rest of each row is in `--json` (whose keys do not change).
const COMPACT: [&str; 8] = [
    "batch",
    "row_limit",
    "prefill_tok_per_s",
    "decode_tok_per_s",
    "step_ms.forward",
    "step_ms.sampler",
    "kv_cache_mib",
    "peak_rss_mib",
];

/// The engine's rows cut to [`COMPACT`], with the workload (the same in every row) in
/// the caption, and the JSON keys left out; rows of another shape (the mixed workload's)
/// are kept whole.
fn compact(rows: &[serde_json::Value]) -> (Vec<serde_json::Value>, Vec<String>) {
    use serde_json::{Map, Value};
    let mut left_out: Vec<String> = Vec::new();
    let table = rows
        .iter()
        .map(|row| {
            let Some(full) = row.as_object().filter(|r| {
                r.contains_key("row_limit") && r.contains_key("step_ms") && r.contains_key("runs")
            }) else {
                return row.clone();
            };
            let mut out = Map::new();
            for key in ["engine", "sampling"] {
                if let Some(v) = full.get(key) {
                    out.insert(key.into(), v.clone());
                }
            }
            let runs = &full["runs"];
            out.insert(
                "workload".into(),
                json!(format!(
                    "{} prompt tokens, {} new tokens, {}",
                    full["prompt_tokens"],
                    full["new_tokens"],
                    if runs == 1 {
                        "1 run".to_string()
                    } else {
                        format!("medians of {runs} runs")
                    }
                )),
            );
            let shown = ["engine", "sampling", "prompt_tokens", "new_tokens", "runs"];
            for (key, value) in full {
                let names: Vec<String> = match value {
                    Value::Object(inner) => inner.keys().map(|k| format!("{key}.{k}")).collect(),
                    _ => vec![key.clone()],
                };
                for name in names {
                    let hidden =
                        !COMPACT.contains(&name.as_str()) && !shown.contains(&name.as_str());
                    if hidden && !left_out.contains(&name) {
                        left_out.push(name);
                    }
                }
            }
            for name in COMPACT {
                let pointer = format!("/{}", name.replace('.', "/"));
                let Some(v) = row.pointer(&pointer) else {
                    continue;
                };
                match name.split_once('.') {
                    Some((outer, inner)) => {
                        let slot = out.entry(outer).or_insert_with(|| json!({}));
                        slot[inner] = v.clone();
                    }
                    None => {
                        out.insert(name.into(), v.clone());
                    }
                }
            }
            Value::Object(out)
        })
        .collect();
    (table, left_out)
}
