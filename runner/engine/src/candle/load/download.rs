//! Downloads a pinned model's files into the Hugging Face cache through paths the
//! runner builds itself. hf-hub 0.4 names the blob after the server's ETag and the
//! snapshot after its `X-Repo-Commit` header, both unchecked: a hostile `HF_ENDPOINT`
//! answering `ETag: ../../x` had the body written wherever it liked. Here the snapshot
//! is the pinned commit, the file name is checked, and the blob is named by the SHA-256
//! of the bytes received; no header names anything on disk.
//!
//! The layout is the cache's own (`blobs/`, `snapshots/<commit>/<file>` links), so the
//! Hugging Face tools read what this writes. No `refs/` are written: a pin is a commit.

use crate::candle::load::cache::repo_folder;
use crate::panel::commit::Commit;
use sha2::{Digest, Sha256};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// The public hub, when `HF_ENDPOINT` names no mirror.
pub const DEFAULT_ENDPOINT: &str = "https://huggingface.co";

/// Bytes a file other than a pinned weight file may have: the largest tokenizer.json of
/// the panel is about 33 MB. A body past the bound is a broken or hostile server.
pub const MAX_SMALL_FILE: u64 = 256 << 20;

/// Why a file was not fetched.
#[derive(Debug)]
pub enum Failure {
    /// No answer: no network, no DNS, a refused connection, a timeout.
    Unreachable(String),
    /// The hub answered 401 or 403.
    Denied(String),
    /// Anything else: another status, a bad name, a body over its bound, a disk error.
    Other(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Unreachable(m) | Failure::Denied(m) | Failure::Other(m) => f.write_str(m),
        }
    }
}

/// Where files come from and with which credentials.
pub struct Source {
    pub endpoint: String,
    pub token: Option<String>,
    agent: ureq::Agent,
}

impl Source {
    /// The hub, or the mirror `HF_ENDPOINT` names, with `HF_TOKEN`.
    pub fn from_env() -> Source {
        let endpoint = std::env::var("HF_ENDPOINT")
            .ok()
            .filter(|e| !e.is_empty())
            .unwrap_or_else(|| DEFAULT_ENDPOINT.to_string());
        let token = std::env::var("HF_TOKEN").ok().filter(|t| !t.is_empty());
        Source::new(endpoint, token)
    }

    pub fn new(endpoint: String, token: Option<String>) -> Source {
        let agent = ureq::builder()
            .try_proxy_from_env(true)
            // Large files redirect to a storage host with a signed address: the token
            // goes no further than the hub's own host.
            .redirect_auth_headers(ureq::RedirectAuthHeaders::SameHost)
            .user_agent(concat!("creg-runner/", env!("CARGO_PKG_VERSION")))
            .build();
        Source {
            endpoint: endpoint.trim_end_matches('/').to_string(),
            token,
            agent,
        }
    }
}

/// Whether `name` is a plain file name of a repository's top folder.
pub fn is_plain_file_name(name: &str) -> bool {
    !name.is_empty()
        && name != "."
        && name != ".."
        && !name.contains(['/', '\\', '\0'])
        && !name.starts_with('.')
}

/// Fetches `file` of `repo` at `commit` into `cache`, unless the snapshot holds it
/// already, and returns the snapshot's path of it. At most `max_bytes` are accepted.
pub fn fetch(
    source: &Source,
    cache: &Path,
    repo: &str,
    commit: &Commit,
    file: &str,
    max_bytes: u64,
) -> Result<PathBuf, Failure> {
    if !is_plain_file_name(file) {
        return Err(Failure::Other(format!(
            "{file:?} is not a file name of a repository's top folder"
        )));
    }
    let root = repo_folder(cache, repo);
    let snapshot = root.join("snapshots").join(commit.as_str());
    let target = snapshot.join(file);
    if target.is_file() {
        return Ok(target);
    }
    let url = format!("{}/{repo}/resolve/{commit}/{file}", source.endpoint);
    let mut request = source.agent.get(&url);
    if let Some(t) = &source.token {
        request = request.set("Authorization", &format!("Bearer {t}"));
    }
    let response = request.call().map_err(|e| match e {
        ureq::Error::Status(401 | 403, _) => Failure::Denied(format!("{url}: {e}")),
        ureq::Error::Status(..) => Failure::Other(format!("{url}: {e}")),
        ureq::Error::Transport(t) => Failure::Unreachable(format!("{url}: {t}")),
    })?;
    // The hub says which commit it served; a mirror that serves another is refused.
    if let Some(served) = response.header("x-repo-commit") {
        if !served.eq_ignore_ascii_case(commit.as_str()) {
            return Err(Failure::Other(format!(
                "{url}: the server answered with commit {:?}, not the pinned {commit}",
                served.chars().take(80).collect::<String>()
            )));
        }
    }
    let io = |what: &str, p: &Path, e: std::io::Error| {
        Failure::Other(format!("cannot {what} {}: {e}", p.display()))
    };
    let blobs = root.join("blobs");
    std::fs::create_dir_all(&blobs).map_err(|e| io("create", &blobs, e))?;
    std::fs::create_dir_all(&snapshot).map_err(|e| io("create", &snapshot, e))?;
    let partial = blobs.join(format!(".runner-{}-{file}.incomplete", std::process::id()));
    let digest = match receive(response.into_reader(), &partial, max_bytes, &url) {
        Ok(d) => d,
        Err(e) => {
            let _ = std::fs::remove_file(&partial);
            return Err(e);
        }
    };
    let blob = blobs.join(&digest);
    std::fs::rename(&partial, &blob).map_err(|e| io("write", &blob, e))?;
    // The link is made beside its place and renamed onto it: a reader never sees a
    // half-made one.
    let link = snapshot.join(format!(".runner-{}-{file}.link", std::process::id()));
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(Path::new("../../blobs").join(&digest), &link)
        .map_err(|e| io("link", &link, e))?;
    std::fs::rename(&link, &target).map_err(|e| io("link", &target, e))?;
    Ok(target)
}

/// Writes the body to `path`, refusing more than `max_bytes`; its SHA-256.
fn receive(mut body: impl Read, path: &Path, max_bytes: u64, url: &str) -> Result<String, Failure> {
    let io = |e: std::io::Error| Failure::Other(format!("{}: {e}", path.display()));
    let mut out = std::fs::File::create(path).map_err(io)?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        let n = body
            .read(&mut buf)
            .map_err(|e| Failure::Unreachable(format!("{url}: the download broke off: {e}")))?;
        if n == 0 {
            break;
        }
        total += n as u64;
        if total > max_bytes {
            return Err(Failure::Other(format!(
                "{url}: the server sent more than the {max_bytes} bytes expected"
            )));
        }
        hasher.update(&buf[..n]);
        out.write_all(&buf[..n]).map_err(io)?;
    }
    out.sync_all().map_err(io)?;
    Ok(format!("{:x}", hasher.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_names_of_the_top_folder_are_fetched() {
        for good in [
            "model.safetensors",
            "model-00001-of-00004.safetensors",
            "config.json",
        ] {
            assert!(is_plain_file_name(good), "{good}");
        }
        for bad in [
            "",
            ".",
            "..",
            "../x",
            "/etc/passwd",
            "a/b",
            "a\\b",
            ".hidden",
        ] {
            assert!(!is_plain_file_name(bad), "{bad}");
        }
    }
}
