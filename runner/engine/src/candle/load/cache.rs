//! The Hugging Face cache's layout: where it is, and a repository's folder and pinned
//! snapshot in it.

use crate::panel::commit::Commit;
use std::path::{Path, PathBuf};

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

/// The cache's folder of `repo`: `models--org--name`.
pub fn repo_folder(cache: &Path, repo: &str) -> PathBuf {
    cache.join(format!("models--{}", repo.replace('/', "--")))
}

/// The snapshot folder of `repo` at the commit `revision` in the cache, if present.
/// Branch names (`refs/<name>`) are never followed: a pin is a commit.
pub fn cached_snapshot(cache: &Path, repo: &str, revision: &Commit) -> Option<PathBuf> {
    let snap = repo_folder(cache, repo)
        .join("snapshots")
        .join(revision.as_str());
    snap.is_dir().then_some(snap)
}
