//! The one resolution of `--model` into the embedded engine: a model of the pinned panel
//! (from the Hugging Face cache), a local folder in the Hugging Face layout or a GGUF
//! file, checked against the prompts it must hold, loaded on the device chosen once, and
//! described as the run manifest records it.

use crate::candle::load::encoder::PromptEncoder;
use crate::candle::load::hub;
use crate::candle::load::limits::{check_context, Remedy};
use crate::candle::weights::LoadOptions;
use crate::candle::{select_device, BatchLimits, DeviceChoice, Engine};
use crate::digest::sha256_hex;
use crate::panel::Panel;
use crate::{Backend, EngineError, Loaded, Prompt};
use serde_json::json;
use std::path::{Path, PathBuf};

/// How a local model is loaded.
pub struct LocalOptions<'a> {
    pub device: DeviceChoice,
    /// The weights' format (`--dtype`, `--quantization`).
    pub load: LoadOptions,
    /// Sequences decoded together; the engine's default when `None`.
    pub max_batch: Option<usize>,
    pub panel: &'a Panel,
    /// A chat template in place of the model's own (`--chat-template`).
    pub chat_template: Option<PathBuf>,
}

/// `model` as a panel name, a folder or a GGUF file, loaded for `prompts` and up to
/// `max_new_tokens` new tokens; `None` when it names none of these.
pub fn open(
    model: &str,
    prompts: &[&Prompt],
    max_new_tokens: usize,
    opts: &LocalOptions,
) -> Result<Option<Loaded>, EngineError> {
    let Some(hub::Resolved {
        mut files,
        label,
        entry,
    }) = hub::resolve(model, opts.panel)?
    else {
        return Ok(None);
    };
    files.chat_template.clone_from(&opts.chat_template);
    check_context(
        &PromptEncoder::load(&files)?,
        &files.config,
        prompts,
        max_new_tokens,
        Remedy::Run,
    )?;
    let (device, warning) = select_device(opts.device)?;
    let mut warnings: Vec<String> = warning.into_iter().collect();
    let device_name = crate::candle::runtime::device::name(&device);
    let mut engine = Engine::load_with(&files, device, &label, opts.load)?;
    if let Some(rows) = opts.max_batch {
        let limits = BatchLimits {
            max_rows: rows,
            ..engine.limits()
        };
        engine = engine.with_limits(limits);
    }
    if engine.template().is_plain() {
        warnings.push(plain_prompts_note(&label));
    }
    let mut identity = json!({
        "kind": "candle",
        "name": label,
        "repo": entry.map(|e| &e.repo),
        "revision": files.revision,
        "tokenizer_repo": entry.map(|e| &e.tokenizer_repo),
        "tokenizer_revision": entry.map(|e| &e.tokenizer_revision),
        "weights_sha256": files.weight_digests()?,
        "tokenizer_sha256": file_sha256(&files.tokenizer)?,
        "chat_template_sha256": sha256_hex(engine.template().source().as_bytes()),
        "dtype": format!("{:?}", engine.dtype()).to_lowercase(),
        "weights": engine.weight_format().name(),
        // Batch composition may change the numbers of a row on some devices, so a run
        // resumed with another batch bound is another run.
        "max_batch": opts.max_batch,
    });
    // A GGUF file's tensor types, beside its digest: which blocks the answers came from.
    if let Some(gguf) = files.gguf() {
        let header = crate::candle::gguf::GgufHeader::read(gguf)?;
        identity["gguf_tensor_types"] = json!(header.tensor_types());
    }
    // Recorded only when it is f16, so that the identity of every run before the option
    // existed, and with it their resume, is unchanged.
    if engine.kv_dtype() != engine.dtype() {
        identity["kv_cache"] = json!(engine.kv_dtype().as_str());
    }
    // Recorded only for base models, so that the identity of every chat run, and with
    // it the resume of runs made before this key existed, is unchanged.
    if engine.template().is_plain() {
        identity["prompt_format"] = json!(PLAIN_PROMPT_FORMAT);
    }
    Ok(Some(Loaded {
        label,
        identity,
        context: json!({"device": device_name, "backend": engine.describe()}),
        backend: Box::new(engine),
        warnings,
    }))
}

/// The manifest's and the report's words for a base model's prompts.
pub const PLAIN_PROMPT_FORMAT: &str =
    "plain text after the tokenizer's BOS, messages joined by a blank line (no chat template)";

/// What a run of a base model says once on stderr.
pub fn plain_prompts_note(label: &str) -> String {
    format!(
        "{label} has no chat template (a base model): its prompts run as {PLAIN_PROMPT_FORMAT}, \
         as lm-eval runs base models; --chat-template FILE gives it one"
    )
}

fn file_sha256(path: &Path) -> Result<String, EngineError> {
    std::fs::read(path)
        .map(|b| sha256_hex(&b))
        .map_err(|source| EngineError::Io {
            path: path.to_path_buf(),
            source,
        })
}
