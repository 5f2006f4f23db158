//! Finds a model's files: a local folder in the Hugging Face layout, or a pinned panel
//! entry in the Hugging Face cache (downloaded at the pinned revision when missing).
//!
//! The cache is searched first and, with HF_HUB_OFFLINE set, exclusively: the download
//! client does not honour that variable itself.

use crate::EngineError;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

/// One pinned model of `models.toml`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PanelEntry {
    pub repo: String,
    pub revision: String,
    pub tokenizer_repo: String,
    pub tokenizer_revision: String,
    /// The model file that runs it: qwen2, llama or gemma3.
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

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Panel {
    pub models: BTreeMap<String, PanelEntry>,
}

/// The project's `models.toml`, built into the binary.
pub const BUILTIN_PANEL: &str = include_str!("../../../../../models.toml");

impl Panel {
    /// The panel built into the binary.
    pub fn builtin() -> Result<Panel, EngineError> {
        Panel::parse(BUILTIN_PANEL, Path::new("models.toml"))
    }

    pub fn parse(text: &str, path: &Path) -> Result<Panel, EngineError> {
        toml::from_str(text).map_err(|e| EngineError::BadFile {
            what: "model panel",
            path: path.to_path_buf(),
            message: e.to_string(),
        })
    }

    pub fn load(path: &Path) -> Result<Panel, EngineError> {
        let text = std::fs::read_to_string(path).map_err(|source| EngineError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Panel::parse(&text, path)
    }
}

/// The files of one model, wherever they came from.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelFiles {
    pub config: PathBuf,
    pub generation_config: Option<PathBuf>,
    pub tokenizer: PathBuf,
    pub tokenizer_config: PathBuf,
    pub weights: Vec<PathBuf>,
    /// The commit the files belong to; None for a local folder.
    pub revision: Option<String>,
    /// A chat template chosen for the model (`--chat-template`), in place of its own.
    pub chat_template: Option<PathBuf>,
}

impl ModelFiles {
    /// A local folder: config.json, tokenizer files and model.safetensors or a sharded
    /// set named by model.safetensors.index.json.
    pub fn from_dir(dir: &Path) -> Result<ModelFiles, EngineError> {
        let need = |name: &str| -> Result<PathBuf, EngineError> {
            let p = dir.join(name);
            if p.is_file() {
                Ok(p)
            } else {
                Err(EngineError::NotAvailable(format!(
                    "{} has no {name}",
                    dir.display()
                )))
            }
        };
        let weights = if dir.join("model.safetensors").is_file() {
            vec![dir.join("model.safetensors")]
        } else {
            let index = need("model.safetensors.index.json")?;
            shard_names(&index)?.iter().map(|n| dir.join(n)).collect()
        };
        let generation = dir.join("generation_config.json");
        Ok(ModelFiles {
            config: need("config.json")?,
            generation_config: generation.is_file().then_some(generation),
            tokenizer: need("tokenizer.json")?,
            tokenizer_config: need("tokenizer_config.json")?,
            weights,
            revision: None,
            chat_template: None,
        })
    }

    /// sha256 of each weight file, by file name. Files in the Hugging Face cache are
    /// links to blobs named by that hash, so only local folders need hashing.
    pub fn weight_digests(&self) -> Result<BTreeMap<String, String>, EngineError> {
        let mut out = BTreeMap::new();
        for w in &self.weights {
            let name = w
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let blob = std::fs::read_link(w)
                .ok()
                .and_then(|t| t.file_name().map(|n| n.to_string_lossy().into_owned()))
                .filter(|n| n.len() == 64 && n.chars().all(|c| c.is_ascii_hexdigit()));
            let digest = match blob {
                Some(h) => h,
                None => sha256_file(w)?,
            };
            out.insert(name, digest);
        }
        Ok(out)
    }
}

fn sha256_file(path: &Path) -> Result<String, EngineError> {
    let io = |source| EngineError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut f = std::fs::File::open(path).map_err(io)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).map_err(io)?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(format!("{:x}", hasher.finalize()))
}

fn shard_names(index: &Path) -> Result<Vec<String>, EngineError> {
    #[derive(Deserialize)]
    struct Index {
        weight_map: BTreeMap<String, String>,
    }
    let text = std::fs::read_to_string(index).map_err(|source| EngineError::Io {
        path: index.to_path_buf(),
        source,
    })?;
    let idx: Index = serde_json::from_str(&text).map_err(|e| EngineError::BadFile {
        what: "safetensors index",
        path: index.to_path_buf(),
        message: e.to_string(),
    })?;
    let mut names: Vec<String> = idx.weight_map.into_values().collect();
    names.sort();
    names.dedup();
    Ok(names)
}

/// The hub cache folder: HF_HUB_CACHE, else HF_HOME/hub, else ~/.cache/huggingface/hub.
pub fn hub_cache_dir() -> PathBuf {
    if let Some(p) = std::env::var_os("HF_HUB_CACHE") {
        return PathBuf::from(p);
    }
    if let Some(p) = std::env::var_os("HF_HOME") {
        return PathBuf::from(p).join("hub");
    }
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap_or_default();
    home.join(".cache").join("huggingface").join("hub")
}

pub fn offline() -> bool {
    matches!(
        std::env::var("HF_HUB_OFFLINE")
            .as_deref()
            .map(str::to_ascii_lowercase)
            .as_deref(),
        Ok("1" | "true" | "yes" | "on")
    )
}

/// The snapshot folder of `repo` at `revision` in the cache, if present. A revision is
/// a commit hash (snapshots/<hash>) or a branch name resolved through refs/<name>.
pub fn cached_snapshot(cache: &Path, repo: &str, revision: &str) -> Option<PathBuf> {
    let root = cache.join(format!("models--{}", repo.replace('/', "--")));
    let direct = root.join("snapshots").join(revision);
    if direct.is_dir() {
        return Some(direct);
    }
    let commit = std::fs::read_to_string(root.join("refs").join(revision)).ok()?;
    let snap = root.join("snapshots").join(commit.trim());
    snap.is_dir().then_some(snap)
}

const MODEL_FILES: [&str; 4] = [
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
];

/// A model named on the command line, resolved to its files.
pub struct Resolved<'p> {
    pub files: ModelFiles,
    /// The panel name, or a folder's own name.
    pub label: String,
    pub entry: Option<&'p PanelEntry>,
}

/// The one resolution order for `--model`: a panel name first (a folder that happens to
/// share a panel model's name never shadows its pinned revision), then a local folder in
/// the Hugging Face layout. `None` when it is neither; the caller says what else it
/// accepts.
pub fn resolve<'p>(model: &str, panel: &'p Panel) -> Result<Option<Resolved<'p>>, EngineError> {
    if let Some(entry) = panel.models.get(model) {
        return Ok(Some(Resolved {
            files: resolve_pinned(model, entry)?,
            label: model.to_string(),
            entry: Some(entry),
        }));
    }
    let dir = Path::new(model);
    if !dir.is_dir() {
        return Ok(None);
    }
    let label = dir
        .canonicalize()
        .ok()
        .and_then(|d| d.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_else(|| model.to_string());
    Ok(Some(Resolved {
        files: ModelFiles::from_dir(dir)?,
        label,
        entry: None,
    }))
}

/// The files of a pinned entry: from the cache when complete there, otherwise
/// downloaded (never when offline).
pub fn resolve_pinned(name: &str, entry: &PanelEntry) -> Result<ModelFiles, EngineError> {
    let cache = hub_cache_dir();
    if let Some(files) = cached_snapshot(&cache, &entry.repo, &entry.revision)
        .and_then(|dir| ModelFiles::from_dir(&dir).ok())
        .filter(|f| f.weights.iter().all(|w| w.is_file()))
    {
        return Ok(ModelFiles {
            revision: Some(entry.revision.clone()),
            ..files
        });
    }
    if offline() {
        return Err(EngineError::NotAvailable(format!(
            "{name} ({} at {}) is not in the cache {} and HF_HUB_OFFLINE is set; \
             download it on a connected machine with `runner generate --model {name} --prompt hi`, \
             or unset HF_HUB_OFFLINE",
            entry.repo,
            entry.revision,
            cache.display()
        )));
    }
    download(name, entry, &cache)
}

/// Why a file could not be fetched.
#[derive(Debug, PartialEq, Eq)]
enum Unfetched {
    /// No answer from the hub: no network, no DNS, a refused connection, a timeout.
    Unreachable,
    /// The hub answered and refused: a gated model without an accepted licence or a token.
    Gated,
    Other,
}

/// Reads hf-hub's error text. A connection that never got an answer says nothing about
/// a licence, whatever the model: blaming the licence sent users to the wrong fix.
fn why_not(text: &str, gated: bool, has_token: bool) -> Unfetched {
    let t = text.to_ascii_lowercase();
    let unreachable = [
        "transport",
        "connection refused",
        "connection reset",
        "failed to lookup",
        "dns",
        "timed out",
        "network is unreachable",
        "no route to host",
        "connect error",
    ]
    .iter()
    .any(|k| t.contains(k));
    if unreachable {
        return Unfetched::Unreachable;
    }
    let denied = ["401", "403", "gated", "unauthorized", "forbidden"]
        .iter()
        .any(|k| t.contains(k));
    if denied || (gated && !has_token) {
        return Unfetched::Gated;
    }
    Unfetched::Other
}

fn download(name: &str, entry: &PanelEntry, cache: &Path) -> Result<ModelFiles, EngineError> {
    use hf_hub::api::sync::ApiBuilder;
    use hf_hub::{Repo, RepoType};
    let token = std::env::var("HF_TOKEN").ok().filter(|t| !t.is_empty());
    let mut builder =
        ApiBuilder::from_cache(hf_hub::Cache::new(cache.to_path_buf())).with_progress(false);
    if token.is_some() {
        builder = builder.with_token(token.clone());
    }
    // A mirror, as the Hugging Face tools take it.
    if let Some(endpoint) = std::env::var("HF_ENDPOINT").ok().filter(|e| !e.is_empty()) {
        builder = builder.with_endpoint(endpoint);
    }
    let api = builder
        .build()
        .map_err(|e| EngineError::NotAvailable(e.to_string()))?;
    let repo = api.repo(Repo::with_revision(
        entry.repo.clone(),
        RepoType::Model,
        entry.revision.clone(),
    ));
    let fetch = |file: &str| -> Result<PathBuf, EngineError> {
        repo.get(file).map_err(|e| {
            let text = e.to_string();
            match why_not(&text, entry.gated, token.is_some()) {
                Unfetched::Unreachable => EngineError::NotAvailable(format!(
                    "{name} ({}): the Hugging Face hub cannot be reached ({text}); check the \
                     network (or HF_ENDPOINT), or download the model on a connected machine \
                     and copy its cache here (HF_HUB_OFFLINE=1 then reads the cache only)",
                    entry.repo
                )),
                Unfetched::Gated => EngineError::NotAvailable(format!(
                    "{name} ({}) is gated: accept its licence on the model's Hugging Face page \
                     with your account, then set HF_TOKEN to a read token of that account ({text})",
                    entry.repo
                )),
                Unfetched::Other => EngineError::NotAvailable(format!(
                    "downloading {file} of {} failed: {text}",
                    entry.repo
                )),
            }
        })
    };
    for f in MODEL_FILES {
        fetch(f)?;
    }
    if fetch("model.safetensors").is_err() {
        let index = fetch("model.safetensors.index.json")?;
        for shard in shard_names(&index)? {
            fetch(&shard)?;
        }
    }
    let dir = cached_snapshot(cache, &entry.repo, &entry.revision).ok_or_else(|| {
        EngineError::NotAvailable(format!(
            "{} downloaded but not found in the cache",
            entry.repo
        ))
    })?;
    Ok(ModelFiles {
        revision: Some(entry.revision.clone()),
        ..ModelFiles::from_dir(&dir)?
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cache_lookup_finds_commits_directly_and_branches_through_refs() {
        let tmp = std::env::temp_dir().join(format!("engine-cache-{}", std::process::id()));
        let root = tmp.join("models--org--m");
        std::fs::create_dir_all(root.join("snapshots/abc123")).unwrap();
        std::fs::create_dir_all(root.join("refs")).unwrap();
        std::fs::write(root.join("refs/main"), "abc123\n").unwrap();
        assert_eq!(
            cached_snapshot(&tmp, "org/m", "abc123"),
            Some(root.join("snapshots/abc123"))
        );
        assert_eq!(
            cached_snapshot(&tmp, "org/m", "main"),
            Some(root.join("snapshots/abc123"))
        );
        assert_eq!(cached_snapshot(&tmp, "org/m", "def456"), None);
        assert_eq!(cached_snapshot(&tmp, "org/other", "abc123"), None);
        std::fs::remove_dir_all(&tmp).unwrap();
    }

    #[test]
    fn a_folder_resolves_under_its_own_name_and_anything_else_to_none() {
        let tmp = std::env::temp_dir().join(format!("engine-resolve-{}", std::process::id()));
        let dir = tmp.join("my-model");
        crate::candle::fixture::write_fixture(
            crate::candle::fixture::Arch::Llama,
            crate::candle::fixture::Size::Tiny,
            &dir,
        )
        .unwrap();
        let panel = Panel::builtin().unwrap();
        let found = resolve(&dir.display().to_string(), &panel)
            .unwrap()
            .expect("a folder in the HF layout");
        assert_eq!(found.label, "my-model");
        assert!(found.entry.is_none() && found.files.revision.is_none());
        assert!(resolve("no-such-model-or-folder", &panel)
            .unwrap()
            .is_none());
        std::fs::remove_dir_all(&tmp).unwrap();
    }
}
