//! The model panel: `models.toml`'s pinned models (repository, commit, files and their
//! digests, licence, endpoint). Configuration that the candle loader and the served
//! backend both read (`crate::resolve` picks between them), so it is neither's.

pub mod commit;

use crate::EngineError;
use commit::Commit;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// One pinned model of `models.toml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PanelEntry {
    pub repo: String,
    pub revision: Commit,
    pub tokenizer_repo: String,
    pub tokenizer_revision: Commit,
    /// The registry row that runs it (`models/mod.rs`: qwen2, llama, gemma3 or phi3; the
    /// panel uses the first three), as `runner models` shows it. The loader does not read
    /// it: it picks the row by config.json's `model_type`.
    pub arch: String,
    pub dtype: String,
    pub gated: bool,
    pub license: String,
    #[serde(default)]
    pub files: Vec<PinnedFile>,
    /// Reference renderings of the chat template; `{system}` and `{user}` stand for the
    /// message contents.
    pub chat: GoldenChat,
    /// An OpenAI-compatible server that serves this model (`runner --model NAME` then
    /// runs through it, under the repo's name, with this entry's tokenizer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PinnedFile {
    pub name: String,
    pub bytes: u64,
    pub sha256: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GoldenChat {
    pub rendered_system_user: String,
    pub rendered_user_only: Option<String>,
}

/// One pinned GGUF file of `models.toml` (`[gguf.NAME]`): a single file of a repository
/// at a commit, checked against its size and SHA-256 before use. Its architecture,
/// tokenizer, chat template and end tokens are the file's own metadata.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GgufEntry {
    pub repo: String,
    pub revision: Commit,
    pub file: PinnedFile,
    pub gated: bool,
    pub license: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Panel {
    pub models: BTreeMap<String, PanelEntry>,
    /// GGUF files by name, beside the safetensors models.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub gguf: BTreeMap<String, GgufEntry>,
}

/// The project's `models.toml`, built into the binary.
pub const BUILTIN_PANEL: &str = include_str!("../../../../models.toml");

impl Panel {
    /// Every name `--model` accepts from the panel: the models, then the GGUF files.
    pub fn names(&self) -> Vec<&str> {
        self.models
            .keys()
            .chain(self.gguf.keys())
            .map(String::as_str)
            .collect()
    }

    /// The panel built into the binary.
    pub fn builtin() -> Result<Panel, EngineError> {
        Panel::parse(BUILTIN_PANEL, Path::new("models.toml"))
    }

    pub fn parse(text: &str, path: &Path) -> Result<Panel, EngineError> {
        let panel: Panel = toml::from_str(text).map_err(|e| EngineError::BadFile {
            what: "model panel",
            path: path.to_path_buf(),
            message: e.to_string(),
        })?;
        if let Some(name) = panel.gguf.keys().find(|n| panel.models.contains_key(*n)) {
            return Err(EngineError::BadFile {
                what: "model panel",
                path: path.to_path_buf(),
                message: format!(
                    "{name:?} is both a [models] and a [gguf] entry; names are unique"
                ),
            });
        }
        Ok(panel)
    }

    pub fn load(path: &Path) -> Result<Panel, EngineError> {
        let text = std::fs::read_to_string(path).map_err(|source| EngineError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Panel::parse(&text, path)
    }
}
