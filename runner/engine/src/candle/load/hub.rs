//! Finds a model's files: a local folder in the Hugging Face layout, a GGUF file (named,
//! or the one in a folder without safetensors), or a pinned panel entry in the Hugging
//! Face cache (downloaded at the pinned revision when missing). Which architectures load
//! is the registry's business (`models/mod.rs`; for GGUF files `gguf::config`), not this
//! module's.
//!
//! The cache is searched first and, with HF_HUB_OFFLINE set, exclusively: the download
//! client does not honour that variable itself.

pub use crate::candle::load::cache::{cached_snapshot, hub_cache_dir, offline, repo_folder};
use crate::candle::load::pins::{self, sha256_file, DigestMemory};
use crate::panel::commit::Commit;
use crate::panel::{GgufEntry, Panel, PanelEntry};
use crate::EngineError;
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The files of one model, wherever they came from.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelFiles {
    pub config: PathBuf,
    pub generation_config: Option<PathBuf>,
    pub tokenizer: PathBuf,
    pub tokenizer_config: PathBuf,
    pub weights: Vec<PathBuf>,
    /// The commit the files belong to; None for a local folder.
    pub revision: Option<Commit>,
    /// A chat template chosen for the model (`--chat-template`), in place of its own.
    pub chat_template: Option<PathBuf>,
    /// The SHA-256 of each weight file by name, computed when a pinned model's files
    /// were checked against their pins; None for a local folder until asked.
    pub verified: Option<BTreeMap<String, String>>,
}

impl ModelFiles {
    /// A local folder: config.json, tokenizer files and model.safetensors or a sharded
    /// set named by model.safetensors.index.json.
    pub fn from_dir(dir: &Path) -> Result<ModelFiles, EngineError> {
        if !dir.join("model.safetensors").is_file()
            && !dir.join("model.safetensors.index.json").is_file()
        {
            if let Some(gguf) = single_gguf(dir)? {
                return Self::from_gguf(&gguf);
            }
        }
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
            verified: None,
        })
    }

    /// A GGUF file: weights, config, tokenizer and chat template in the one file
    /// (`config`, `tokenizer` and `tokenizer_config` all name it); only a
    /// generation_config.json is read from beside it, when there is one.
    pub fn from_gguf(path: &Path) -> Result<ModelFiles, EngineError> {
        let dir = path.parent().unwrap_or(Path::new("."));
        let generation = dir.join("generation_config.json");
        // The tokenizer, its chat template and end tokens are the file's own metadata
        // (`load::gguf_tokenizer`): config and tokenizer are the file itself.
        Ok(ModelFiles {
            config: path.to_path_buf(),
            generation_config: generation.is_file().then_some(generation),
            tokenizer: path.to_path_buf(),
            tokenizer_config: path.to_path_buf(),
            weights: vec![path.to_path_buf()],
            revision: None,
            chat_template: None,
            verified: None,
        })
    }

    /// The GGUF file these are, when they are one.
    pub fn gguf(&self) -> Option<&Path> {
        match self.weights.as_slice() {
            [one] if crate::candle::gguf::is_gguf(one) => Some(one),
            _ => None,
        }
    }

    /// sha256 of each weight file, by file name: as checked against the pins, or
    /// computed now for a local folder. Never read from a blob's name, which anyone who
    /// can write the cache can choose.
    pub fn weight_digests(&self) -> Result<BTreeMap<String, String>, EngineError> {
        if let Some(v) = &self.verified {
            return Ok(v.clone());
        }
        let mut out = BTreeMap::new();
        for w in &self.weights {
            let name = w
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            out.insert(name, sha256_file(w)?);
        }
        Ok(out)
    }
}

/// The one .gguf file in `dir`; an error when there are several.
fn single_gguf(dir: &Path) -> Result<Option<PathBuf>, EngineError> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(None);
    };
    let mut found: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| crate::candle::gguf::is_gguf(p) && p.is_file())
        .collect();
    found.sort();
    match found.len() {
        0 => Ok(None),
        1 => Ok(found.pop()),
        _ => Err(EngineError::NotAvailable(format!(
            "{} holds {} GGUF files; name one with --model {}",
            dir.display(),
            found.len(),
            found[0].display()
        ))),
    }
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
    // A shard is a file beside the index: a name with a folder in it would read (or,
    // downloaded, write) outside the model's folder.
    if let Some(bad) = names.iter().find(|n| {
        n.is_empty() || *n == "." || *n == ".." || n.contains(['/', '\\']) || n.contains('\0')
    }) {
        return Err(EngineError::BadFile {
            what: "safetensors index",
            path: index.to_path_buf(),
            message: format!("weight_map names the shard {bad:?}, which is not a file name"),
        });
    }
    Ok(names)
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
    if let Some(entry) = panel.gguf.get(model) {
        return Ok(Some(Resolved {
            files: resolve_pinned_gguf(model, entry, &hub_cache_dir(), offline())?,
            label: model.to_string(),
            entry: None,
        }));
    }
    let dir = Path::new(model);
    if dir.is_file() && crate::candle::gguf::is_gguf(dir) {
        let label = dir
            .file_stem()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| model.to_string());
        return Ok(Some(Resolved {
            files: ModelFiles::from_gguf(dir)?,
            label,
            entry: None,
        }));
    }
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
/// downloaded (never when offline); checked against their pins before any use.
pub fn resolve_pinned(name: &str, entry: &PanelEntry) -> Result<ModelFiles, EngineError> {
    let cache = hub_cache_dir();
    let files = match cached_snapshot(&cache, &entry.repo, &entry.revision)
        .and_then(|dir| ModelFiles::from_dir(&dir).ok())
        .filter(|f| f.weights.iter().all(|w| w.is_file()))
    {
        Some(files) => files,
        None if offline() => {
            return Err(EngineError::NotAvailable(format!(
                "{name} ({} at {}) is not in the cache {} and HF_HUB_OFFLINE is set; \
                 download it on a connected machine with `runner generate --model {name} --prompt hi`, \
                 or unset HF_HUB_OFFLINE",
                entry.repo,
                entry.revision,
                cache.display()
            )))
        }
        None => download(name, entry, &cache)?,
    };
    let mut memory = DigestMemory::for_cache(&cache);
    let verified = pins::verify(name, entry, &files.weights, &mut memory)?;
    Ok(ModelFiles {
        revision: Some(entry.revision.clone()),
        verified: Some(verified),
        ..files
    })
}

/// The file of a pinned GGUF entry, from the cache `cache` when there, otherwise
/// downloaded (never when `offline`); checked against its pin before any use.
pub fn resolve_pinned_gguf(
    name: &str,
    entry: &GgufEntry,
    cache: &Path,
    offline: bool,
) -> Result<ModelFiles, EngineError> {
    let cached = cached_snapshot(cache, &entry.repo, &entry.revision)
        .map(|dir| dir.join(&entry.file.name))
        .filter(|f| f.is_file());
    let path = match cached {
        Some(path) => path,
        None if offline => {
            return Err(EngineError::NotAvailable(format!(
                "{name} ({} of {} at {}) is not in the cache {} and HF_HUB_OFFLINE is set; \
                 download it on a connected machine with `runner generate --model {name} --prompt hi`, \
                 or unset HF_HUB_OFFLINE",
                entry.file.name,
                entry.repo,
                entry.revision,
                cache.display()
            )))
        }
        None => {
            use crate::candle::load::download::{fetch, Source};
            fetch(
                &Source::from_env(),
                cache,
                &entry.repo,
                &entry.revision,
                &entry.file.name,
                entry.file.bytes,
            )
            .map_err(|e| {
                let gated = if entry.gated {
                    " (gated: accept its licence on the model page and set HF_TOKEN)"
                } else {
                    ""
                };
                EngineError::NotAvailable(format!(
                    "{name}: downloading {} of {} failed{gated}: {e}",
                    entry.file.name, entry.repo
                ))
            })?
        }
    };
    let mut memory = DigestMemory::for_cache(cache);
    let origin = format!("{} at {}", entry.repo, entry.revision);
    let verified = pins::verify_files(
        name,
        &origin,
        std::slice::from_ref(&entry.file),
        std::slice::from_ref(&path),
        &mut memory,
    )?;
    Ok(ModelFiles {
        revision: Some(entry.revision.clone()),
        verified: Some(verified),
        ..ModelFiles::from_gguf(&path)?
    })
}

/// Downloads the entry's files at its pinned commit (see [`download`](super::download)
/// for why not through hf-hub); the weights are bounded by their pinned sizes.
fn download(name: &str, entry: &PanelEntry, cache: &Path) -> Result<ModelFiles, EngineError> {
    use crate::candle::load::download::{fetch, Failure, Source, MAX_SMALL_FILE};
    let source = Source::from_env();
    let has_token = source.token.is_some();
    let fetch = |file: &str, max_bytes: u64| -> Result<PathBuf, EngineError> {
        fetch(
            &source,
            cache,
            &entry.repo,
            &entry.revision,
            file,
            max_bytes,
        )
        .map_err(|e| {
            let denied = matches!(e, Failure::Denied(_)) || (entry.gated && !has_token);
            match e {
                Failure::Unreachable(text) => EngineError::NotAvailable(format!(
                    "{name} ({}): the Hugging Face hub cannot be reached ({text}); check the \
                     network (or HF_ENDPOINT), or download the model on a connected machine \
                     and copy its cache here (HF_HUB_OFFLINE=1 then reads the cache only)",
                    entry.repo
                )),
                e if denied => EngineError::NotAvailable(format!(
                    "{name} ({}) is gated: accept its licence on the model's Hugging Face page \
                     with your account, then set HF_TOKEN to a read token of that account ({e})",
                    entry.repo
                )),
                e => EngineError::NotAvailable(format!(
                    "downloading {file} of {} failed: {e}",
                    entry.repo
                )),
            }
        })
    };
    let pinned = |file: &str| {
        entry
            .files
            .iter()
            .find(|f| f.name == file)
            .map_or(MAX_SMALL_FILE, |f| f.bytes)
    };
    for f in MODEL_FILES {
        // generation_config.json is optional: not every repository has one.
        match fetch(f, MAX_SMALL_FILE) {
            Err(_) if f == "generation_config.json" => {}
            other => {
                other?;
            }
        }
    }
    let single =
        entry.files.is_empty() || entry.files.iter().any(|f| f.name == "model.safetensors");
    if single && fetch("model.safetensors", pinned("model.safetensors")).is_ok() {
        // One file holds the weights.
    } else {
        let index = fetch("model.safetensors.index.json", MAX_SMALL_FILE)?;
        for shard in shard_names(&index)? {
            fetch(&shard, pinned(&shard))?;
        }
    }
    let dir = cached_snapshot(cache, &entry.repo, &entry.revision).ok_or_else(|| {
        EngineError::NotAvailable(format!(
            "{} downloaded but not found in the cache",
            entry.repo
        ))
    })?;
    ModelFiles::from_dir(&dir)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::panel::BUILTIN_PANEL;

    #[test]
    fn cache_lookup_finds_commits_and_never_follows_refs() {
        let tmp = std::env::temp_dir().join(format!("engine-cache-{}", std::process::id()));
        let root = tmp.join("models--org--m");
        let abc: Commit = "abc1230000000000000000000000000000000000".parse().unwrap();
        let def: Commit = "def4560000000000000000000000000000000000".parse().unwrap();
        std::fs::create_dir_all(root.join("snapshots").join(abc.as_str())).unwrap();
        std::fs::create_dir_all(root.join("refs")).unwrap();
        std::fs::write(root.join("refs").join(def.as_str()), abc.as_str()).unwrap();
        assert_eq!(
            cached_snapshot(&tmp, "org/m", &abc),
            Some(root.join("snapshots").join(abc.as_str()))
        );
        assert_eq!(cached_snapshot(&tmp, "org/m", &def), None);
        assert_eq!(cached_snapshot(&tmp, "org/other", &abc), None);
        std::fs::remove_dir_all(&tmp).unwrap();
    }

    #[test]
    fn a_revision_that_is_not_a_commit_is_refused_for_weights_and_tokenizer() {
        let good = "989aa7980e4cf806f80c7fef2b1adb7bc71aa306";
        for (field, bad) in [
            ("revision", "/some/folder"),
            ("revision", "../../.."),
            ("tokenizer_revision", "main"),
            ("tokenizer_revision", "../../x"),
        ] {
            let text = BUILTIN_PANEL.replacen(
                &format!("{field} = \"{good}\""),
                &format!("{field} = \"{bad}\""),
                1,
            );
            assert_ne!(text, BUILTIN_PANEL, "{field} not found in the panel");
            let err = Panel::parse(&text, Path::new("panel.toml"))
                .unwrap_err()
                .to_string();
            assert!(
                err.contains("panel.toml") && err.contains(field) && err.contains("40-hex"),
                "{field} = {bad:?}: {err}"
            );
        }
    }

    /// A panel with one `[gguf]` entry pinning `bytes` and `sha256`.
    fn gguf_panel(bytes: u64, sha256: &str) -> Panel {
        let text = format!(
            "[models]\n\n[gguf.\"tiny-q4\"]\nrepo = \"org/tiny-GGUF\"\n\
             revision = \"abc1230000000000000000000000000000000000\"\n\
             file = {{ name = \"tiny.Q4_1.gguf\", bytes = {bytes}, sha256 = \"{sha256}\" }}\n\
             gated = false\nlicense = \"apache-2.0\"\n"
        );
        Panel::parse(&text, Path::new("panel.toml")).unwrap()
    }

    #[test]
    fn a_pinned_gguf_resolves_from_the_cache_only_with_its_size_and_digest() {
        let tmp = std::env::temp_dir().join(format!("engine-gguf-pin-{}", std::process::id()));
        let snapshot = tmp
            .join("models--org--tiny-GGUF/snapshots")
            .join("abc1230000000000000000000000000000000000");
        std::fs::create_dir_all(&snapshot).unwrap();
        let file = snapshot.join("tiny.Q4_1.gguf");
        std::fs::write(&file, b"GGUF stand-in bytes").unwrap();
        let digest = sha256_file(&file).unwrap();

        let panel = gguf_panel(19, &digest);
        assert!(panel.names().contains(&"tiny-q4"));
        let entry = &panel.gguf["tiny-q4"];
        let files = resolve_pinned_gguf("tiny-q4", entry, &tmp, true).unwrap();
        assert_eq!(
            files.gguf(),
            Some(file.as_path()),
            "read as a GGUF by its magic"
        );
        assert_eq!(files.revision, Some(entry.revision.clone()));
        assert_eq!(
            files.verified.as_ref().unwrap()["tiny.Q4_1.gguf"],
            digest,
            "the digest checked is the one recorded"
        );

        // Another digest, another size: refused, naming the file and the pin.
        let wrong = "0".repeat(64);
        let err = resolve_pinned_gguf(
            "tiny-q4",
            &gguf_panel(19, &wrong).gguf["tiny-q4"],
            &tmp,
            true,
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("tiny.Q4_1.gguf") && err.contains(&wrong),
            "{err}"
        );
        let err = resolve_pinned_gguf(
            "tiny-q4",
            &gguf_panel(20, &digest).gguf["tiny-q4"],
            &tmp,
            true,
        )
        .unwrap_err()
        .to_string();
        assert!(
            err.contains("19 bytes") && err.contains("20 bytes"),
            "{err}"
        );

        // Not cached and offline: says so, naming the file and the repository.
        std::fs::remove_file(&file).unwrap();
        let err = resolve_pinned_gguf("tiny-q4", entry, &tmp, true)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("tiny.Q4_1.gguf")
                && err.contains("org/tiny-GGUF")
                && err.contains("HF_HUB_OFFLINE"),
            "{err}"
        );
        std::fs::remove_dir_all(&tmp).unwrap();
    }

    #[test]
    fn a_name_in_both_tables_is_refused() {
        let text = format!(
            "{BUILTIN_PANEL}\n[gguf.\"qwen2.5-7b\"]\nrepo = \"org/x\"\n\
             revision = \"abc1230000000000000000000000000000000000\"\n\
             file = {{ name = \"x.gguf\", bytes = 1, sha256 = \"00\" }}\n\
             gated = false\nlicense = \"x\"\n"
        );
        let err = Panel::parse(&text, Path::new("panel.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("qwen2.5-7b") && err.contains("unique"),
            "{err}"
        );
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
