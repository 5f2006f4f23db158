//! The pinned weight files of `models.toml` checked before first use: size, then
//! SHA-256. The cache's blob names are not evidence (anyone who can write the cache can
//! name a blob anything), so the digest is computed from the bytes. So that a rerun
//! does not rehash 15 GB, a computed digest is remembered, keyed by what no writer of
//! the file can set back (device, inode, size, modification and change times), in the
//! runner's own folder: never in the model cache, whose writers could otherwise write
//! the remembered digest too.

use crate::panel::{PanelEntry, PinnedFile};
use crate::EngineError;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The file, in the runner's own cache folder (`${XDG_CACHE_HOME:-~/.cache}/creg-runner/`),
/// that remembers digests.
pub const DIGEST_FILE: &str = "weight-digests.json";

/// The file in a model's cache folder where runner versions before this one remembered
/// digests. Anyone who can write the model cache can write it, so it is never read.
pub const OLD_DIGEST_FILE: &str = "runner-digests.json";

/// A remembered digest file larger than this is not read (it holds a few hundred bytes
/// per weight file).
const MAX_MEMORY_BYTES: u64 = 16 << 20;

/// What a file looked like when its digest was computed. The change time is kept too:
/// unlike the modification time, no user call can set it back, and the inode with the
/// device tell a file put in place of another (a rename) from the one that was hashed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Seen {
    dev: u64,
    ino: u64,
    bytes: u64,
    mtime: [i64; 2],
    ctime: [i64; 2],
    sha256: String,
}

impl Seen {
    fn of(meta: &std::fs::Metadata, sha256: String) -> Seen {
        Seen {
            dev: meta.dev(),
            ino: meta.ino(),
            bytes: meta.len(),
            mtime: [meta.mtime(), meta.mtime_nsec()],
            ctime: [meta.ctime(), meta.ctime_nsec()],
            sha256,
        }
    }

    fn matches(&self, meta: &std::fs::Metadata) -> bool {
        self.dev == meta.dev()
            && self.ino == meta.ino()
            && self.bytes == meta.len()
            && self.mtime == [meta.mtime(), meta.mtime_nsec()]
            && self.ctime == [meta.ctime(), meta.ctime_nsec()]
    }
}

/// Digests remembered by canonical path. A missing or unreadable file is an empty
/// memory, never an error: it only costs a rehash. A memory without a path (see
/// [`DigestMemory::for_cache`]) remembers for this process only.
#[derive(Debug, Default)]
pub struct DigestMemory {
    path: Option<PathBuf>,
    seen: BTreeMap<String, Seen>,
    changed: bool,
}

/// The runner's own cache folder: `$XDG_CACHE_HOME/creg-runner`, else
/// `$HOME/.cache/creg-runner`.
pub fn runner_cache_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|v| !v.is_empty())
                .map(|h| PathBuf::from(h).join(".cache"))
        })?;
    Some(base.join("creg-runner"))
}

/// Whether `meta` is this user's own and no one else may write it.
fn own_and_private(meta: &std::fs::Metadata) -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    let euid = unsafe { libc::geteuid() };
    meta.uid() == euid && meta.permissions().mode() & 0o022 == 0
}

/// The digest file in `dir` when it can be trusted: `dir` is a real folder (made, 0700,
/// when missing) of this user that no one else may write, outside the model cache
/// `hub_cache`, and the file, where it exists, a plain file of the same kind.
fn trusted_memory(dir: &Path, hub_cache: &Path) -> Option<PathBuf> {
    if !dir.exists() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .ok()?;
    }
    let meta = std::fs::symlink_metadata(dir).ok()?;
    if !meta.is_dir() || !own_and_private(&meta) {
        return None;
    }
    let real = dir.canonicalize().ok()?;
    let hub = hub_cache
        .canonicalize()
        .unwrap_or_else(|_| hub_cache.to_path_buf());
    if real.starts_with(&hub) {
        return None;
    }
    let file = real.join(DIGEST_FILE);
    match std::fs::symlink_metadata(&file) {
        Ok(m) if !m.is_file() || !own_and_private(&m) => None,
        _ => Some(file),
    }
}

fn read_seen(path: &Path) -> BTreeMap<String, Seen> {
    let Ok(file) = std::fs::File::open(path) else {
        return BTreeMap::new();
    };
    let mut bytes = Vec::new();
    if file
        .take(MAX_MEMORY_BYTES + 1)
        .read_to_end(&mut bytes)
        .is_err()
        || bytes.len() as u64 > MAX_MEMORY_BYTES
    {
        return BTreeMap::new();
    }
    serde_json::from_slice(&bytes).unwrap_or_default()
}

impl DigestMemory {
    /// The memory kept in `path`, trusted as it is (the tests' own files).
    pub fn open(path: &Path) -> DigestMemory {
        DigestMemory {
            seen: read_seen(path),
            path: Some(path.to_path_buf()),
            changed: false,
        }
    }

    /// The memory for files of the model cache `hub_cache`: kept in the runner's own
    /// cache folder ([`runner_cache_dir`]) when that folder is this user's and no one
    /// else's to write and lies outside the model cache; otherwise nothing is
    /// remembered beyond this process, and every run hashes again.
    pub fn for_cache(hub_cache: &Path) -> DigestMemory {
        match runner_cache_dir().and_then(|d| trusted_memory(&d, hub_cache)) {
            Some(path) => DigestMemory::open(&path),
            None => DigestMemory::default(),
        }
    }

    /// Where the memory is kept; None when it lasts only as long as this process.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The digest remembered for `file` while it is unchanged, without hashing it.
    pub fn remembered(&self, file: &Path) -> Option<&str> {
        let real = file.canonicalize().ok()?;
        let meta = std::fs::metadata(&real).ok()?;
        self.seen
            .get(real.to_string_lossy().as_ref())
            .filter(|s| s.matches(&meta))
            .map(|s| s.sha256.as_str())
    }

    /// The SHA-256 of `file` (links followed): remembered while the file is unchanged,
    /// computed otherwise. A file that changed while it was hashed is not remembered.
    pub fn sha256(&mut self, file: &Path) -> Result<String, EngineError> {
        let io = |source| EngineError::Io {
            path: file.to_path_buf(),
            source,
        };
        let real = file.canonicalize().map_err(io)?;
        let key = real.to_string_lossy().into_owned();
        let meta = std::fs::metadata(&real).map_err(io)?;
        if let Some(s) = self.seen.get(&key).filter(|s| s.matches(&meta)) {
            return Ok(s.sha256.clone());
        }
        let sha256 = sha256_file(&real)?;
        let seen = Seen::of(&meta, sha256.clone());
        match std::fs::metadata(&real) {
            Ok(after) if seen.matches(&after) => {
                self.seen.insert(key, seen);
                self.changed = true;
            }
            _ => {
                self.changed |= self.seen.remove(&key).is_some();
            }
        }
        Ok(sha256)
    }

    /// Writes what was learnt (merged with what other processes wrote meanwhile, less
    /// files that are gone), readable and writable by this user only. A folder that
    /// cannot be written only means the next run hashes again.
    pub fn save(&mut self) {
        let Some(path) = self.path.clone().filter(|_| self.changed) else {
            return;
        };
        let mut merged = read_seen(&path);
        merged.append(&mut self.seen.clone());
        merged.retain(|file, _| Path::new(file).exists());
        let Ok(text) = serde_json::to_vec_pretty(&merged) else {
            return;
        };
        let tmp = path.with_extension(format!("{}.tmp", std::process::id()));
        let written = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)
            .and_then(|mut f| f.write_all(&text));
        if written.is_ok() && std::fs::rename(&tmp, &path).is_ok() {
            self.seen = merged;
            self.changed = false;
        } else {
            let _ = std::fs::remove_file(&tmp);
        }
    }
}

/// What the cache holds for one pinned file, as `runner models` says it, without
/// hashing: a run checks the digest before first use.
pub fn cached_state(file: &Path, pin: &PinnedFile, memory: &DigestMemory) -> String {
    let Ok(meta) = std::fs::metadata(file) else {
        return "not cached".into();
    };
    if meta.len() != pin.bytes {
        return format!("cached, but {} bytes: not the pinned file", meta.len());
    }
    match memory.remembered(file) {
        Some(d) if d.eq_ignore_ascii_case(&pin.sha256) => "cached, sha256 verified".into(),
        Some(d) => format!("cached, but sha256 {d}: not the pinned file"),
        None => "cached, sha256 checked at first use".into(),
    }
}

pub fn sha256_file(path: &Path) -> Result<String, EngineError> {
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

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// How to get a good copy: the snapshot's entry and the blob behind it go, and the next
/// run downloads them again.
fn fetch_again(name: &str, file: &Path) -> String {
    let blob = file
        .canonicalize()
        .ok()
        .filter(|b| b.as_path() != file)
        .map(|b| format!(" and the blob it links to, {}", b.display()))
        .unwrap_or_default();
    format!(
        "delete {}{blob}, then fetch it again with `runner generate --model {name} --prompt hi` \
         on a machine with network (without HF_HUB_OFFLINE)",
        file.display()
    )
}

/// Checks `weights` against the pins of panel model `name` and returns the SHA-256 of
/// each file, by file name. The files must be exactly the pinned ones; each must have
/// its pinned size and digest. An entry without pins gets its digests computed only.
pub fn verify(
    name: &str,
    entry: &PanelEntry,
    weights: &[PathBuf],
    memory: &mut DigestMemory,
) -> Result<BTreeMap<String, String>, EngineError> {
    let origin = format!("{} at {}", entry.repo, entry.revision);
    verify_files(name, &origin, &entry.files, weights, memory)
}

/// [`verify`] for any pinned files: `origin` says where they come from in messages.
pub fn verify_files(
    name: &str,
    origin: &str,
    files: &[PinnedFile],
    weights: &[PathBuf],
    memory: &mut DigestMemory,
) -> Result<BTreeMap<String, String>, EngineError> {
    let pins: BTreeMap<&str, &PinnedFile> = files.iter().map(|f| (f.name.as_str(), f)).collect();
    if !pins.is_empty() {
        let found: Vec<String> = weights.iter().map(|w| file_name(w)).collect();
        let mut sorted = found.clone();
        sorted.sort();
        let pinned: Vec<&str> = pins.keys().copied().collect();
        if sorted != pinned {
            return Err(EngineError::Model(format!(
                "{name} ({origin}): the weight files found ({}) are not the pinned ones ({}); \
                 delete the model's snapshot folder and fetch it again with \
                 `runner generate --model {name} --prompt hi`",
                found.join(", "),
                pinned.join(", ")
            )));
        }
    }
    let mut digests = BTreeMap::new();
    for w in weights {
        let file = file_name(w);
        if let Some(pin) = pins.get(file.as_str()) {
            let bytes = std::fs::metadata(w)
                .map_err(|source| EngineError::Io {
                    path: w.clone(),
                    source,
                })?
                .len();
            if bytes != pin.bytes {
                return Err(EngineError::Model(format!(
                    "{name}: {} holds {bytes} bytes, but the pin in models.toml is {} bytes \
                     (sha256 {}); {}",
                    w.display(),
                    pin.bytes,
                    pin.sha256,
                    fetch_again(name, w)
                )));
            }
        }
        let digest = memory.sha256(w);
        memory.save();
        let digest = digest?;
        if let Some(pin) = pins.get(file.as_str()) {
            if !digest.eq_ignore_ascii_case(&pin.sha256) {
                return Err(EngineError::Model(format!(
                    "{name}: {} has sha256 {digest}, but the pin in models.toml is {}; {}",
                    w.display(),
                    pin.sha256,
                    fetch_again(name, w)
                )));
            }
        }
        digests.insert(file, digest);
    }
    Ok(digests)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::panel::Panel;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("engine-pins-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    /// A panel entry pinning `model.safetensors` to `bytes` and `sha256`.
    fn entry(bytes: u64, sha256: &str) -> PanelEntry {
        let mut e = Panel::builtin().unwrap().models["qwen2.5-1.5b"].clone();
        e.files = vec![PinnedFile {
            name: "model.safetensors".into(),
            bytes,
            sha256: sha256.into(),
        }];
        e
    }

    /// `model.safetensors` as the cache lays it out: a link to a blob named by `blob_name`.
    fn cached(dir: &Path, blob_name: &str, content: &[u8]) -> PathBuf {
        std::fs::create_dir_all(dir.join("blobs")).unwrap();
        std::fs::create_dir_all(dir.join("snap")).unwrap();
        std::fs::write(dir.join("blobs").join(blob_name), content).unwrap();
        let link = dir.join("snap/model.safetensors");
        std::os::unix::fs::symlink(format!("../blobs/{blob_name}"), &link).unwrap();
        link
    }

    fn sha(b: &[u8]) -> String {
        format!("{:x}", Sha256::digest(b))
    }

    #[test]
    fn a_blob_named_by_the_pin_but_holding_other_bytes_is_refused_with_both_digests() {
        let dir = scratch("forged");
        let pinned = sha(b"the real weights");
        // Same length as the pinned content, so the size check passes and the hash decides.
        let link = cached(&dir, &pinned, b"a fixture model!");
        let mut memory = DigestMemory::open(&dir.join(DIGEST_FILE));
        let err = verify(
            "qwen2.5-1.5b",
            &entry(16, &pinned),
            std::slice::from_ref(&link),
            &mut memory,
        )
        .unwrap_err()
        .to_string();
        for part in [
            link.display().to_string(),
            pinned.clone(),
            sha(b"a fixture model!"),
            "runner generate --model qwen2.5-1.5b".into(),
            dir.join("blobs").join(&pinned).display().to_string(),
        ] {
            assert!(err.contains(&part), "{part:?} missing from: {err}");
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_file_of_another_size_is_refused_before_it_is_hashed() {
        let dir = scratch("size");
        let link = cached(&dir, "blob", b"short");
        let mut memory = DigestMemory::open(&dir.join(DIGEST_FILE));
        let err = verify("m", &entry(3087467144, &sha(b"x")), &[link], &mut memory)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("holds 5 bytes") && err.contains("3087467144"),
            "{err}"
        );
        assert!(!dir.join(DIGEST_FILE).exists(), "nothing was hashed");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn files_other_than_the_pinned_ones_are_refused() {
        let dir = scratch("set");
        let link = cached(&dir, "blob", b"weights");
        let mut e = entry(7, &sha(b"weights"));
        e.files[0].name = "model-00001-of-00002.safetensors".into();
        let mut memory = DigestMemory::open(&dir.join(DIGEST_FILE));
        let err = verify("m", &e, &[link], &mut memory)
            .unwrap_err()
            .to_string();
        assert!(err.contains("not the pinned ones"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_verified_digest_is_remembered_until_the_file_changes() {
        let dir = scratch("memory");
        let link = cached(&dir, "blob", b"weights");
        let e = entry(7, &sha(b"weights"));
        let memo = dir.join(DIGEST_FILE);
        let digests = verify(
            "m",
            &e,
            std::slice::from_ref(&link),
            &mut DigestMemory::open(&memo),
        )
        .unwrap();
        assert_eq!(digests["model.safetensors"], sha(b"weights"));
        // The remembered digest is what a rerun uses: forge it, and the rerun reports the
        // forgery instead of rehashing (which is how a 15 GB file is not read again).
        let text = std::fs::read_to_string(&memo).unwrap();
        let forged = text.replace(&sha(b"weights"), &sha(b"remembered"));
        std::fs::write(&memo, forged).unwrap();
        let mut memory = DigestMemory::open(&memo);
        assert_eq!(memory.sha256(&link).unwrap(), sha(b"remembered"));
        // Rewritten (same size), the file is hashed again.
        std::fs::write(dir.join("blobs/blob"), b"Weights").unwrap();
        let mut memory = DigestMemory::open(&memo);
        assert_eq!(memory.sha256(&link).unwrap(), sha(b"Weights"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
