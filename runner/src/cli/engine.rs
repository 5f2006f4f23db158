//! `runner generate`, `runner fixture`, `runner models`: the engine from the command line.

use anyhow::{bail, Context, Result};
use clap::Args;
use runner::engine::candle::bench::{sampler_bench, BenchTimes};
use runner::engine::candle::fixture::{write_fixture, Arch, Size};
use runner::engine::candle::loader::{self, ModelFiles, Panel};
use runner::engine::candle::workload::mixed_workload;
use runner::engine::candle::{select_device, BatchLimits, DeviceChoice, Engine, Scheduler};
use runner::engine::{Backend, Message, Prompt, Request, RequestId, Role, Sampling};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// The panel as built into the binary; `--panel` reads another file instead.
pub fn panel(path: Option<&Path>) -> Result<Panel> {
    Ok(match path {
        Some(p) => Panel::load(p)?,
        None => Panel::builtin()?,
    })
}

/// A panel name or a local folder in the Hugging Face layout, in the library's one
/// resolution order (`loader::resolve`).
fn resolve(model: &str, panel_path: Option<&Path>) -> Result<(ModelFiles, String)> {
    let panel = panel(panel_path)?;
    let Some(found) = loader::resolve(model, &panel)? else {
        let names: Vec<&str> = panel.models.keys().map(String::as_str).collect();
        bail!(
            "{model:?} is neither a panel model ({}) nor a folder",
            names.join(", ")
        );
    };
    Ok((found.files, found.label))
}

#[derive(Args, Debug)]
pub struct GenerateArgs {
    /// Panel name (see `runner models`) or a model folder.
    #[arg(long)]
    model: String,
    #[arg(long)]
    prompt: String,
    #[arg(long)]
    system: Option<String>,
    /// Highest-logit decoding instead of the protocol's sampling.
    #[arg(long)]
    greedy: bool,
    #[arg(long, default_value_t = 512)]
    max_new_tokens: usize,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// auto, cpu or cuda:N
    #[arg(long, default_value = "auto")]
    device: String,
    /// A model panel other than the built-in one.
    #[arg(long)]
    panel: Option<PathBuf>,
}

pub fn generate(args: GenerateArgs) -> Result<ExitCode> {
    let choice: DeviceChoice = args.device.parse().map_err(anyhow::Error::msg)?;
    let (device, warning) = select_device(choice)?;
    if let Some(w) = warning {
        eprintln!("warning: {w}");
    }
    let (files, label) = resolve(&args.model, args.panel.as_deref())?;
    let revision = files.revision.clone();
    let mut engine =
        Engine::load(&files, device, &label).with_context(|| format!("loading {label}"))?;
    let mut messages = Vec::new();
    if let Some(s) = args.system {
        messages.push(Message {
            role: Role::System,
            content: s,
        });
    }
    messages.push(Message {
        role: Role::User,
        content: args.prompt,
    });
    let request = Request {
        id: RequestId::new("generate"),
        prompt: Prompt::Chat(messages),
        seeds: vec![args.seed],
        max_new_tokens: args.max_new_tokens,
        sampling: if args.greedy {
            Sampling::Greedy
        } else {
            Sampling::PROTOCOL
        },
    };
    runner::run::limits::check_context(
        &engine,
        &files.config,
        &[&request.prompt],
        request.max_new_tokens,
    )?;
    let samples = engine.generate(std::slice::from_ref(&request))?;
    let s = samples.first().context("the engine returned no sample")?;
    let out = json!({
        "model": label,
        "revision": revision,
        "engine": engine.describe(),
        "seed": s.seed,
        "prompt_tokens": s.prompt_tokens,
        "text": s.text,
        "token_ids": s.token_ids,
        "finish_reason": s.finish_reason,
        "timings": s.timings,
    });
    println!("{out}");
    Ok(ExitCode::SUCCESS)
}

#[derive(Args, Debug)]
pub struct FixtureArgs {
    /// qwen2, llama or gemma3
    #[arg(long)]
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
        Some(vocab) => Some((runner::run::creg::tokenizer_corpus()?, vocab)),
        None => None,
    };
    runner::engine::candle::fixture::write_fixture_with(arch, size, &args.out, corpus)?;
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
    let cache = loader::hub_cache_dir();
    if let Some(name) = &args.name {
        let Some(e) = panel.models.get(name) else {
            let known: Vec<&str> = panel.models.keys().map(String::as_str).collect();
            bail!("unknown model {name:?}; the panel has {}", known.join(", "));
        };
        let snapshot = loader::cached_snapshot(&cache, &e.repo, &e.revision);
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
        for f in &e.files {
            let here = snapshot.as_ref().is_some_and(|d| d.join(&f.name).is_file());
            println!(
                "  {} {:>14} bytes sha256 {} {}",
                f.name,
                f.bytes,
                f.sha256,
                if here { "cached" } else { "not cached" }
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
        let cached = loader::cached_snapshot(&cache, &e.repo, &e.revision)
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
    Ok(ExitCode::SUCCESS)
}

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// A model folder; without it a fixture of --arch and --size is written to a
    /// temporary folder.
    #[arg(long)]
    model: Option<PathBuf>,
    #[arg(long, default_value = "qwen2")]
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
    /// --vocab synthetic logits, today's full-vocabulary sampler beside the
    /// candidate-set one, in alternating rounds (--repeat of them). No model is loaded.
    #[arg(long)]
    sampler: bool,
    #[arg(long, default_value_t = 152_064)]
    vocab: usize,
    /// `mixed`: a serving workload of --requests prompts with length caps of 16 to 256
    /// new tokens, decoded at a row limit of the largest --batch by each --scheduler in
    /// alternating rounds (--repeat of them).
    #[arg(long)]
    workload: Option<String>,
    #[arg(long, default_value_t = 96)]
    requests: usize,
    /// Schedulers to compare, comma-separated: continuous, static.
    #[arg(long, default_value = "continuous,static", value_delimiter = ',')]
    scheduler: Vec<String>,
}

fn bench_sampling(name: &str) -> Result<Sampling> {
    Ok(match name {
        "greedy" => Sampling::Greedy,
        "protocol" => Sampling::PROTOCOL,
        other => bail!("unknown --sampling {other:?} (greedy, protocol)"),
    })
}

/// `runner bench --sampler`: the sampler before and after, side by side.
fn bench_sampler(args: &BenchArgs) -> Result<ExitCode> {
    let sampling = bench_sampling(&args.sampling)?;
    for &rows in &args.batch {
        let t = sampler_bench(rows, args.vocab, args.repeat.max(1), sampling)?;
        println!(
            "{}",
            json!({
                "bench": "sampler",
                "sampling": args.sampling,
                "rows": rows,
                "vocab": args.vocab,
                "rounds": args.repeat.max(1),
                "threads": rayon::current_num_threads(),
                "reference_ms_per_step": t.reference_s * 1e3,
                "candidates_ms_per_step": t.candidates_s * 1e3,
                "speedup": t.reference_s / t.candidates_s,
                "decided_by_candidates": t.decided,
            })
        );
    }
    Ok(ExitCode::SUCCESS)
}

/// The median of some timings (the upper one of an even count).
fn median(xs: impl Iterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = xs.collect();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Peak resident memory of this process so far, from the kernel's high-water mark.
fn peak_rss_mib() -> Option<f64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib / 1024.0)
}

pub fn bench(args: BenchArgs) -> Result<ExitCode> {
    if args.sampler {
        return bench_sampler(&args);
    }
    let sampling = bench_sampling(&args.sampling)?;
    let choice: DeviceChoice = args.device.parse().map_err(anyhow::Error::msg)?;
    let (device, warning) = select_device(choice)?;
    if let Some(w) = warning {
        eprintln!("warning: {w}");
    }
    let (dir, temporary) = match &args.model {
        Some(d) => (d.clone(), false),
        None => {
            let arch: Arch = args.arch.parse().map_err(anyhow::Error::msg)?;
            let size: Size = args.size.parse().map_err(anyhow::Error::msg)?;
            let d = std::env::temp_dir().join(format!(
                "runner-bench-{}-{}-{}",
                args.arch,
                args.size,
                std::process::id()
            ));
            write_fixture(arch, size, &d)?;
            (d, true)
        }
    };
    let files = ModelFiles::from_dir(&dir)?;
    let engine = Engine::load(&files, device, &dir.display().to_string())?;
    let row_limit = engine.row_limit(args.prompt_tokens + args.new_tokens);
    let batches: Vec<usize> = args
        .batch
        .iter()
        .map(|&b| if b == 0 { row_limit } else { b })
        .collect();
    let max_batch = batches.iter().copied().max().unwrap_or(1);
    let limits = BatchLimits {
        max_rows: max_batch,
        prefill_tokens: args.prefill_tokens,
        ..engine.limits()
    };
    let mut engine = engine.with_limits(limits);
    if let Some(w) = &args.workload {
        if w != "mixed" {
            bail!("unknown --workload {w:?} (mixed)");
        }
        let schedulers = args
            .scheduler
            .iter()
            .map(|s| s.parse::<Scheduler>().map_err(anyhow::Error::msg))
            .collect::<Result<Vec<_>>>()?;
        let requests = mixed_workload(args.requests, 7);
        // One untimed pass warms allocators and thread pools.
        engine.bench_workload(&requests[..requests.len().min(4)], Scheduler::Continuous)?;
        for round in 0..args.repeat.max(1) {
            for &s in &schedulers {
                let run = engine.bench_workload(&requests, s)?;
                let mut line = serde_json::to_value(&run)?;
                line["engine"] = json!(engine.describe());
                line["workload"] = json!("mixed");
                line["round"] = json!(round);
                println!("{line}");
            }
        }
        if temporary {
            std::fs::remove_dir_all(&dir).ok();
        }
        return Ok(ExitCode::SUCCESS);
    }
    // Deterministic prompts of exactly the requested length; their content does not
    // change the work a forward pass does.
    let vocab = engine.vocab_size() as u64;
    let mut state = 0x6265_6e63_6820_7031u64;
    let mut next = || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((state >> 33) % vocab) as u32
    };
    let prompts: Vec<Vec<u32>> = (0..max_batch)
        .map(|_| (0..args.prompt_tokens).map(|_| next()).collect())
        .collect();
    if let Some(p) = &args.save_prompts {
        std::fs::write(p, serde_json::to_string(&prompts)?)
            .with_context(|| format!("writing {}", p.display()))?;
    }
    // One untimed pass warms allocators and thread pools.
    engine.bench_run(&prompts[..1], 2, sampling)?;
    for &b in &batches {
        let runs = (0..args.repeat.max(1))
            .map(|_| engine.bench_run(&prompts[..b], args.new_tokens, sampling))
            .collect::<Result<Vec<_>, _>>()?;
        let prefill_s = median(runs.iter().map(|t| t.prefill_s));
        let decode_s = median(runs.iter().map(|t| t.decode_s));
        let decoded = (b * args.new_tokens.saturating_sub(1)) as f64;
        let steps = args.new_tokens.max(1) as f64;
        let per_step_ms = |f: &dyn Fn(&BenchTimes) -> f64| median(runs.iter().map(f)) * 1e3 / steps;
        let choice = runs[0].breakdown.choice;
        println!(
            "{}",
            json!({
                "engine": engine.describe(),
                "batch": b,
                "row_limit": row_limit,
                "prompt_tokens": args.prompt_tokens,
                "new_tokens": args.new_tokens,
                "runs": runs.len(),
                "prefill_s": prefill_s,
                "decode_s": decode_s,
                "prefill_tok_per_s": (b * args.prompt_tokens) as f64 / prefill_s,
                "decode_tok_per_s": decoded / decode_s,
                "kv_cache_mib": runs[0].kv_bytes as f64 / (1024.0 * 1024.0),
                "peak_rss_mib": peak_rss_mib(),
                "sampling": args.sampling,
                "step_ms": {
                    "forward": per_step_ms(&|t| t.breakdown.forward_s),
                    "transfer": per_step_ms(&|t| t.breakdown.choice.transfer_s),
                    "sampler": per_step_ms(&|t| t.breakdown.choice.sampler_s),
                },
                "transfers_per_step": choice.transfers as f64 / steps,
                "transfer_bytes_per_step": choice.transfer_bytes as f64 / steps,
                "select_half_ms": median(runs.iter().map(|t| t.breakdown.select_s)) * 1e3,
                "select_half_whole_buffers_ms": median(runs.iter().map(|t| t.breakdown.select_whole_s)) * 1e3,
                "select_half_copied_mib": runs[0].breakdown.select_bytes as f64 / (1024.0 * 1024.0),
            })
        );
    }
    if temporary {
        std::fs::remove_dir_all(&dir).ok();
    }
    Ok(ExitCode::SUCCESS)
}
