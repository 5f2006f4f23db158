//! Limits checked before any work: a plan that asks nothing, and new tokens that cannot
//! fit the model's context beside the longest prompt (refused before the weights load,
//! minutes for a panel model on the CPU, and before the KV cache is allocated, which
//! for a huge `--max-new-tokens` would abort the process).

use crate::candle::load::encoder::PromptEncoder;
use crate::{EngineError, Prompt};
use std::path::Path;

/// How many of the longest prompts (by bytes) are tokenized to find the longest in
/// tokens: tokenizing every prompt of a full plan would cost seconds on each resume,
/// and token counts follow byte lengths closely within one template.
const LONGEST_TRIED: usize = 16;

/// The model's context, `max_position_embeddings` in its config.json (or its
/// `text_config`), or its architecture's default where the config class has one. A
/// value that is missing otherwise, negative, fractional or zero is refused: without
/// it the context check is skipped, and a huge `--max-new-tokens` then aborts the
/// process on allocating the KV cache.
pub fn context_length(config: &Path) -> Result<usize, EngineError> {
    if crate::candle::gguf::is_gguf(config) {
        return crate::candle::gguf::GgufHeader::read(config)?.context_length();
    }
    let text = std::fs::read_to_string(config)
        .map_err(|e| EngineError::Limit(format!("{}: cannot read: {e}", config.display())))?;
    let value: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| EngineError::Limit(format!("{}: not JSON: {e}", config.display())))?;
    let field = value
        .get("max_position_embeddings")
        .or_else(|| value.pointer("/text_config/max_position_embeddings"));
    match field {
        Some(v) => v
            .as_u64()
            .filter(|&n| n > 0)
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| {
                EngineError::Limit(format!(
                    "{}: max_position_embeddings is {v}, not a positive whole number of positions",
                    config.display()
                ))
            }),
        None => value
            .get("model_type")
            .and_then(serde_json::Value::as_str)
            .and_then(crate::candle::models::by_model_type)
            .and_then(|a| a.default_context)
            .ok_or_else(|| {
                EngineError::Limit(format!(
                    "{}: max_position_embeddings is missing, so the model's context is \
                     unknown and no run can check that the prompts and --max-new-tokens fit \
                     it; add the model's context length there",
                    config.display()
                ))
            }),
    }
}

fn bytes(p: &Prompt) -> usize {
    match p {
        Prompt::Chat(messages) => messages.iter().map(|m| m.content.len()).sum(),
        Prompt::Raw(s) => s.len(),
    }
}

/// What the command that checks its prompts offers a user whose prompt is too long:
/// `run`'s flags or `generate`'s.
#[derive(Debug, Clone, Copy)]
pub enum Remedy {
    Run,
    Generate,
}

impl Remedy {
    fn shorter(self) -> &'static str {
        match self {
            Remedy::Run => {
                "Run fewer prompts (--condition, --limit) or a model with a longer context; a \
                 fixture from `runner fixture` needs `--suite-vocab 4096` to tokenize the \
                 suite's prompts at a real model's lengths"
            }
            Remedy::Generate => {
                "Give a shorter --prompt (or --prompt-file) and --system, or a model with a \
                 longer context"
            }
        }
    }
}

/// Refuses `max_new_tokens` that do not fit the model's context after the longest of
/// `prompts` (rendered with the model's chat template).
pub fn check_context(
    encoder: &PromptEncoder,
    config: &Path,
    prompts: &[&Prompt],
    max_new_tokens: usize,
    remedy: Remedy,
) -> Result<(), EngineError> {
    let context = context_length(config)?;
    let mut by_size: Vec<&&Prompt> = prompts.iter().collect();
    by_size.sort_by_key(|p| std::cmp::Reverse(bytes(p)));
    let mut longest = 0;
    for p in by_size.into_iter().take(LONGEST_TRIED) {
        longest = longest.max(encoder.encode(p)?.len());
    }
    if longest >= context {
        // No number of new tokens helps: say what does.
        return Err(EngineError::Limit(format!(
            "the longest prompt takes {longest} tokens, and the model has {context} positions \
             (max_position_embeddings in {}): it does not fit the model's context whatever \
             --max-new-tokens is. {}",
            config.display(),
            remedy.shorter()
        )));
    }
    if longest.saturating_add(max_new_tokens) > context {
        return Err(EngineError::Limit(format!(
            "--max-new-tokens {max_new_tokens} does not fit the model's context: the longest \
             prompt takes {longest} tokens and the model has {context} positions \
             (max_position_embeddings in {}); give at most {}",
            config.display(),
            context - longest
        )));
    }
    Ok(())
}
