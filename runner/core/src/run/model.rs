//! What `--model` names: a baseline system of the workload, a model of the pinned panel
//! (from the Hugging Face cache), or a local folder in the Hugging Face layout; and what
//! the run manifest records about it.

use crate::run::{RunError, Workload};
use runner_engine::candle::load::encoder::PromptEncoder;
use runner_engine::candle::load::hub::{self, Panel};
use runner_engine::candle::weights::LoadOptions;
use runner_engine::candle::{select_device, BatchLimits, DeviceChoice, Engine};
use runner_engine::digest::sha256_hex;
use runner_engine::Backend;
use serde_json::{json, Value};
use std::path::Path;

/// A backend ready to run, with its manifest entries.
pub struct Loaded {
    pub backend: Box<dyn Backend>,
    /// The name of the model's folder under `--out` and in reports.
    pub label: String,
    /// What defines the model's answers (part of the run's identity).
    pub identity: Value,
    /// Where it runs (may differ between sessions of one run).
    pub context: Value,
    /// Warnings to show once (the CPU fallback, a base model's plain-text prompts).
    pub warnings: Vec<String>,
}

pub struct ModelOptions<'a> {
    pub device: DeviceChoice,
    /// The weights' format (`--dtype`, `--quantization`).
    pub load: LoadOptions,
    /// Sequences decoded together; the engine's default when `None`.
    pub max_batch: Option<usize>,
    pub panel: &'a Panel,
    /// A chat template in place of the model's own (`--chat-template`).
    pub chat_template: Option<std::path::PathBuf>,
}

/// Resolves `model` for `workload`.
pub fn load(model: &str, workload: &dyn Workload, opts: &ModelOptions) -> Result<Loaded, RunError> {
    if opts.max_batch == Some(0) {
        // The engine would run one row while the manifest said 0.
        return Err(RunError::Setup(
            "--max-batch 0: a batch holds at least 1 sequence".into(),
        ));
    }
    if let Some(backend) = workload.baseline(model) {
        return Ok(Loaded {
            label: model.to_string(),
            identity: json!({"kind": "baseline", "name": model}),
            context: json!({"backend": backend.describe()}),
            backend,
            warnings: Vec::new(),
        });
    }
    let Some(hub::Resolved {
        mut files,
        label,
        entry,
    }) = hub::resolve(model, opts.panel)?
    else {
        let panel = opts.panel.names();
        let baselines = workload.baselines();
        return Err(RunError::Setup(not_a_model(model, &panel, &baselines)));
    };
    files.chat_template.clone_from(&opts.chat_template);
    let prompts: Vec<&runner_engine::Prompt> =
        workload.jobs().iter().map(|j| &j.request.prompt).collect();
    let max_new_tokens = workload
        .jobs()
        .iter()
        .map(|j| j.request.max_new_tokens)
        .max();
    crate::run::limits::check_context(
        &PromptEncoder::load(&files)?,
        &files.config,
        &prompts,
        max_new_tokens.unwrap_or(0),
        crate::run::limits::Remedy::Run,
    )?;
    let (device, warning) = select_device(opts.device)?;
    let mut warnings: Vec<String> = warning.into_iter().collect();
    let device_name = runner_engine::candle::runtime::device::name(&device);
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
        let header = runner_engine::candle::gguf::GgufHeader::read(gguf)?;
        identity["gguf_tensor_types"] = json!(header.tensor_types());
    }
    // Recorded only for base models, so that the identity of every chat run, and with
    // it the resume of runs made before this key existed, is unchanged.
    if engine.template().is_plain() {
        identity["prompt_format"] = json!(PLAIN_PROMPT_FORMAT);
    }
    Ok(Loaded {
        label,
        identity,
        context: json!({"device": device_name, "backend": engine.describe()}),
        backend: Box::new(engine),
        warnings,
    })
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

fn file_sha256(path: &Path) -> Result<String, RunError> {
    std::fs::read(path)
        .map(|b| sha256_hex(&b))
        .map_err(|e| RunError::Setup(format!("cannot read {}: {e}", path.display())))
}

/// Why `model` names nothing, and the likeliest fix: the name it was probably meant to
/// be, or that the folder it names does not exist.
fn not_a_model(model: &str, panel: &[&str], baselines: &[&str]) -> String {
    let known = panel.iter().chain(baselines);
    let near = known
        .map(|k| {
            (
                strsim::levenshtein(&model.to_lowercase(), &k.to_lowercase()),
                *k,
            )
        })
        .filter(|(d, _)| *d <= 2)
        .min();
    let path_like = model.contains('/') || model.starts_with('.') || model.starts_with('~');
    let hint = match near {
        Some((_, name)) => format!("; did you mean {name}?"),
        None if path_like && !std::path::Path::new(model).exists() => {
            format!("; {model} does not exist")
        }
        None => String::new(),
    };
    format!(
        "--model {model:?} is not a panel model ({}), a baseline ({}) or a model folder{hint}",
        panel.join(", "),
        baselines.join(", ")
    )
}

#[cfg(test)]
mod tests {
    use super::not_a_model;

    const PANEL: [&str; 2] = ["qwen2.5-7b", "llama-3.1-8b"];

    #[test]
    fn a_name_in_other_case_or_one_typo_off_gets_the_panel_name() {
        for typed in ["Qwen2.5-7B", "qwen2.5-7", "qwen-2.5-7b"] {
            let m = not_a_model(typed, &PANEL, &["oracle"]);
            assert!(m.ends_with("; did you mean qwen2.5-7b?"), "{typed}: {m}");
        }
        let m = not_a_model("orcale", &PANEL, &["oracle"]);
        assert!(m.ends_with("; did you mean oracle?"), "{m}");
        let m = not_a_model("mistral-7b", &PANEL, &["oracle"]);
        assert!(!m.contains("did you mean"), "{m}");
    }

    #[test]
    fn a_path_that_does_not_exist_is_said_to_be_missing() {
        let m = not_a_model("/nonexistent/creg/model", &PANEL, &[]);
        assert!(
            m.ends_with("; /nonexistent/creg/model does not exist"),
            "{m}"
        );
    }
}
