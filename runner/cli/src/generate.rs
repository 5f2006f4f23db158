//! `runner generate`: one prompt through the engine, its answer as JSON.

use crate::engine::resolve;
use anyhow::{bail, Context, Result};
use clap::Args;
use runner_engine::candle::load::encoder::PromptEncoder;
use runner_engine::candle::load::limits::{check_context, Remedy};
use runner_engine::candle::{select_device, DeviceChoice, Engine};
use runner_engine::{Backend, Message, Prompt, Request, RequestId, Role, Sampling};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Args, Debug)]
pub struct GenerateArgs {
    /// Panel name (see `runner models`) or a model folder.
    #[arg(long)]
    model: String,
    /// The user's message.
    #[arg(
        long,
        required_unless_present = "prompt_file",
        conflicts_with = "prompt_file"
    )]
    prompt: Option<String>,
    /// The user's message from a file, byte for byte (a shell's "$(cat FILE)" drops the
    /// final newlines).
    #[arg(long, value_name = "FILE")]
    prompt_file: Option<PathBuf>,
    #[arg(long, conflicts_with = "system_file")]
    system: Option<String>,
    /// The system message from a file, byte for byte.
    #[arg(long, value_name = "FILE")]
    system_file: Option<PathBuf>,
    /// A Jinja chat template in place of the model's own (a base model has none, and
    /// then runs the messages as plain text after the tokenizer's BOS).
    #[arg(long, value_name = "FILE")]
    chat_template: Option<PathBuf>,
    /// Highest-logit decoding instead of the protocol's sampling.
    #[arg(long)]
    greedy: bool,
    #[arg(long, default_value_t = 512)]
    max_new_tokens: usize,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Feed these token ids (comma-separated) after the prompt instead of choosing, and
    /// print the greedy token at each position (`greedy_at`): compares weight formats
    /// position by position on the same context.
    #[arg(long, value_delimiter = ',', num_args = 1..)]
    teacher_forced: Option<Vec<u32>>,
    /// auto, cpu or cuda:N
    #[arg(long, default_value = "auto")]
    device: String,
    #[command(flatten)]
    weights: crate::weights::WeightArgs,
    /// A model panel other than the built-in one.
    #[arg(long)]
    panel: Option<PathBuf>,
}

/// The largest message read from a file: 16 MiB of text is millions of tokens, past any
/// model's context (and `/dev/zero` would otherwise be read until the kernel kills us).
pub const MAX_MESSAGE_BYTES: u64 = 16 << 20;

/// A message given inline or from a file (read whole, as UTF-8, up to
/// [`MAX_MESSAGE_BYTES`]).
fn message_text(inline: Option<String>, file: Option<&Path>, flag: &str) -> Result<Option<String>> {
    match (inline, file) {
        (Some(text), _) => Ok(Some(text)),
        (None, Some(path)) => {
            use runner_engine::bounded::{read_text, BoundedReadError};
            match read_text(path, MAX_MESSAGE_BYTES, "a message") {
                Ok(text) => Ok(Some(text)),
                Err(BoundedReadError::Io { source, .. }) => Err(anyhow::Error::new(source)
                    .context(format!(
                        "{flag} {}: cannot read it as UTF-8 text",
                        path.display()
                    ))),
                Err(e) => bail!("{flag} {e}"),
            }
        }
        (None, None) => Ok(None),
    }
}

pub fn generate(args: GenerateArgs) -> Result<ExitCode> {
    let choice: DeviceChoice = args.device.parse().map_err(anyhow::Error::msg)?;
    if args.max_new_tokens == 0 && args.teacher_forced.is_none() {
        bail!("generate: --max-new-tokens must be at least 1");
    }
    let system = message_text(args.system, args.system_file.as_deref(), "--system-file")?;
    let prompt = message_text(args.prompt, args.prompt_file.as_deref(), "--prompt-file")?
        .context("generate needs --prompt TEXT or --prompt-file FILE")?;
    let (mut files, label) = resolve(&args.model, args.panel.as_deref())?;
    files.chat_template = args.chat_template;
    let (device, warning) = select_device(choice)?;
    if let Some(w) = warning {
        eprintln!("warning: {w}");
    }
    let revision = files.revision.clone();
    let mut messages = Vec::new();
    if let Some(s) = system {
        messages.push(Message {
            role: Role::System,
            content: s,
        });
    }
    messages.push(Message {
        role: Role::User,
        content: prompt,
    });
    let request = Request {
        id: RequestId::new("generate"),
        prompt: Prompt::Chat(messages),
        seeds: vec![args.seed],
        max_new_tokens: args
            .teacher_forced
            .as_ref()
            .map_or(args.max_new_tokens, Vec::len),
        sampling: if args.greedy {
            Sampling::Greedy
        } else {
            runner_core::protocol::SAMPLING
        },
    };
    let encoder = PromptEncoder::load(&files)?;
    if encoder.template().is_plain() {
        eprintln!(
            "warning: {}",
            runner_engine::candle::load::open::plain_prompts_note(&label)
        );
    }
    check_context(
        &encoder,
        &files.config,
        &[&request.prompt],
        request.max_new_tokens,
        Remedy::Generate,
    )?;
    let mut engine = Engine::load_with(&files, device, &label, args.weights.options())
        .with_context(|| format!("loading {label}"))?;
    if let Some(forced) = &args.teacher_forced {
        return teacher_forced(&engine, &request.prompt, forced, &label);
    }
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

/// `runner generate --teacher-forced`: the greedy token at each forced position.
fn teacher_forced(
    engine: &Engine,
    prompt: &Prompt,
    forced: &[u32],
    label: &str,
) -> Result<ExitCode> {
    let vocab = engine.vocab_size();
    if let Some(bad) = forced.iter().find(|&&t| t as usize >= vocab) {
        bail!("--teacher-forced: token id {bad} is outside the vocabulary of {vocab}");
    }
    let ids = engine.encode(prompt)?;
    let greedy_at = engine.teacher_forced(&ids, forced)?;
    let out = json!({
        "model": label,
        "engine": engine.describe(),
        "prompt_tokens": ids.len(),
        // A peer (llama.cpp, transformers) is given the same ids.
        "prompt_ids": ids,
        "forced": forced,
        "greedy_at": greedy_at,
    });
    println!("{out}");
    Ok(ExitCode::SUCCESS)
}
