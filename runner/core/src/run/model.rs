//! What `--model` names: a baseline system of the workload, else whatever the
//! command line's [`ModelSource`] finds (the engine's one resolver: a served model, a
//! panel model, a folder or a GGUF file); and what the run manifest records about it.
//! Core knows the `Backend` trait, not how a model is loaded.

use crate::run::{RunError, Workload};
pub use runner_engine::resolve::Asked;
pub use runner_engine::Loaded;
use runner_engine::Prompt;
use serde_json::json;

/// Where `--model` is looked up, around the workload's baselines.
pub trait ModelSource {
    /// Whether `model` is answered by this source ahead of the workload's baselines
    /// (a model behind a server: `--endpoint URL --model oracle` asks the server for
    /// its `oracle`); settings that fit no model of that name are refused here.
    fn ahead_of_baselines(&self, _model: &str) -> Result<bool, RunError> {
        Ok(false)
    }
    /// The model `model` names, loaded for what the run asks; `None` when it names
    /// nothing this source has.
    fn open(&self, model: &str, asked: &Asked) -> Result<Option<Loaded>, RunError>;
    /// The names it knows, for the message when nothing matches.
    fn names(&self) -> Vec<String>;
}

/// Resolves `model` for `workload`. The one precedence: a name the source answers
/// first (a served model), then a baseline, then the source's other models.
pub fn load(
    model: &str,
    workload: &dyn Workload,
    source: &dyn ModelSource,
) -> Result<Loaded, RunError> {
    if !source.ahead_of_baselines(model)? {
        if let Some(backend) = workload.baseline(model) {
            return Ok(Loaded {
                label: model.to_string(),
                identity: json!({"kind": "baseline", "name": model}),
                context: json!({"backend": backend.describe()}),
                backend,
                warnings: Vec::new(),
            });
        }
    }
    let jobs = workload.jobs();
    let prompts: Vec<&Prompt> = jobs.iter().map(|j| &j.request.prompt).collect();
    let asked = Asked {
        prompts: &prompts,
        max_new_tokens: jobs
            .iter()
            .map(|j| j.request.max_new_tokens)
            .max()
            .unwrap_or(0),
        sampling: jobs
            .first()
            .map_or(crate::protocol::SAMPLING, |j| j.request.sampling),
    };
    match source.open(model, &asked)? {
        Some(loaded) => Ok(loaded),
        None => {
            let names = source.names();
            let panel: Vec<&str> = names.iter().map(String::as_str).collect();
            Err(RunError::Setup(not_a_model(
                model,
                &panel,
                &workload.baselines(),
            )))
        }
    }
}

/// `--max-batch 0` refused before anything loads: the engine would run one row while
/// the manifest said 0.
pub fn check_max_batch(max_batch: Option<usize>) -> Result<(), RunError> {
    if max_batch == Some(0) {
        return Err(RunError::Setup(
            "--max-batch 0: a batch holds at least 1 sequence".into(),
        ));
    }
    Ok(())
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
