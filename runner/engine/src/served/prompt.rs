//! Prompts rendered by the runner (completions mode): the model's chat template and
//! tokenizer, from a panel entry's pinned tokenizer or a model folder, so the server
//! sees the text the embedded engine would tokenize.

use crate::candle::chat_template::{self, ChatTemplate};
use crate::candle::load::hub::{cached_snapshot, hub_cache_dir, offline};
use crate::digest::sha256_hex;
use crate::panel::commit::Commit;
use crate::panel::Panel;
use crate::served::protocol::Payload;
use crate::{EngineError, Prompt};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use tokenizers::Tokenizer;

pub struct LocalPrompts {
    template: ChatTemplate,
    tokenizer: Tokenizer,
    /// The BOS text the server's tokenizer adds by itself; stripped from rendered
    /// prompts so it is not doubled.
    server_bos: Option<String>,
    /// What the manifest records about the tokenizer.
    pub identity: Value,
}

impl LocalPrompts {
    /// `which` is a panel model's name or a folder holding tokenizer.json and
    /// tokenizer_config.json.
    pub fn load(which: &str, panel: &Panel) -> Result<LocalPrompts, EngineError> {
        let (dir, mut identity) = if let Some(e) = panel.models.get(which) {
            let dir = pinned_tokenizer_dir(which, &e.tokenizer_repo, &e.tokenizer_revision)?;
            (
                dir,
                json!({"panel": which, "repo": e.tokenizer_repo, "revision": e.tokenizer_revision}),
            )
        } else if Path::new(which).is_dir() {
            (PathBuf::from(which), json!({"folder": folder_name(which)}))
        } else {
            return Err(EngineError::NotAvailable(format!(
                "--tokenizer {which:?} is neither a panel model nor a folder with tokenizer.json"
            )));
        };
        let tokenizer_file = dir.join("tokenizer.json");
        let tokenizer_bytes = std::fs::read(&tokenizer_file).map_err(|source| EngineError::Io {
            path: tokenizer_file.clone(),
            source,
        })?;
        let tokenizer = Tokenizer::from_bytes(&tokenizer_bytes)
            .map_err(|e| EngineError::Tokenizer(format!("{}: {e}", tokenizer_file.display())))?;
        let template =
            chat_template::for_model(&tokenizer, &dir.join("tokenizer_config.json"), None)?;
        // What the server's tokenizer adds around a text: a leading BOS here means the
        // rendered template's own BOS must go.
        let added = tokenizer
            .encode("", true)
            .map_err(|e| EngineError::Tokenizer(e.to_string()))?;
        let server_bos = added
            .get_ids()
            .first()
            .and_then(|&id| tokenizer.id_to_token(id));
        if let Some(obj) = identity.as_object_mut() {
            obj.insert(
                "tokenizer_sha256".into(),
                json!(sha256_hex(&tokenizer_bytes)),
            );
            obj.insert(
                "chat_template_sha256".into(),
                json!(sha256_hex(template.source().as_bytes())),
            );
            obj.insert(
                "bos".into(),
                json!(match &server_bos {
                    Some(_) => "added by the server's tokenizer (stripped from the rendered text)",
                    None => "as rendered",
                }),
            );
        }
        Ok(LocalPrompts {
            template,
            tokenizer,
            server_bos,
            identity,
        })
    }

    /// The rendered text, and its token ids as the embedded engine would see them.
    pub fn render(&self, prompt: &Prompt) -> Result<(String, Vec<u32>), EngineError> {
        let text = match prompt {
            Prompt::Chat(m) => self.template.render(m)?,
            Prompt::Raw(t) => t.clone(),
        };
        let ids = self.encode(&text)?;
        Ok((text, ids))
    }

    /// The text to send for a rendered prompt.
    pub fn payload(&self, rendered: &str) -> Payload {
        let text = match &self.server_bos {
            Some(bos) => rendered.strip_prefix(bos.as_str()).unwrap_or(rendered),
            None => rendered,
        };
        Payload::Text(text.to_string())
    }

    pub fn encode(&self, text: &str) -> Result<Vec<u32>, EngineError> {
        self.tokenizer
            .encode(text, false)
            .map(|e| e.get_ids().to_vec())
            .map_err(|e| EngineError::Tokenizer(e.to_string()))
    }
}

fn folder_name(dir: &str) -> String {
    Path::new(dir)
        .canonicalize()
        .ok()
        .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| dir.to_string())
}

/// The pinned tokenizer's folder: the cache's snapshot, or its two files downloaded.
fn pinned_tokenizer_dir(name: &str, repo: &str, revision: &Commit) -> Result<PathBuf, EngineError> {
    let cache = hub_cache_dir();
    let complete = |d: &Path| {
        ["tokenizer.json", "tokenizer_config.json"]
            .iter()
            .all(|f| d.join(f).is_file())
    };
    if let Some(dir) = cached_snapshot(&cache, repo, revision).filter(|d| complete(d)) {
        return Ok(dir);
    }
    if offline() {
        return Err(EngineError::NotAvailable(format!(
            "the tokenizer of {name} ({repo} at {revision}) is not in the cache {} and \
             HF_HUB_OFFLINE is set",
            cache.display()
        )));
    }
    // Through the runner's own downloader, as the weights are (load::download: hf-hub
    // lets a hostile mirror's headers choose the paths it writes).
    use crate::candle::load::download::{fetch, Source, MAX_SMALL_FILE};
    let source = Source::from_env();
    let mut dir = None;
    for f in ["tokenizer.json", "tokenizer_config.json"] {
        let path = fetch(&source, &cache, repo, revision, f, MAX_SMALL_FILE).map_err(|e| {
            EngineError::NotAvailable(format!("downloading {f} of {repo} failed: {e}"))
        })?;
        dir = path.parent().map(Path::to_path_buf);
    }
    dir.ok_or_else(|| EngineError::NotAvailable(format!("{repo}: no tokenizer folder")))
}
