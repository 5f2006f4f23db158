//! The one way files that must never be seen half-written are written, and names safe
//! as one path component.

use std::collections::hash_map::RandomState;
use std::ffi::OsStr;
use std::fs::{File, OpenOptions};
use std::hash::{BuildHasher, Hasher};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Writes `bytes` to a new hidden file beside `path`, syncs it, and renames it into
/// place: a crash leaves either the old file or the new one, never a torn one.
///
/// Nothing planted in the folder can redirect the write: the temporary is created
/// exclusively (`create_new` refuses any existing name, a symlink included) under an
/// unpredictable name, and the rename replaces a symlink at `path` rather than writing
/// through it. On any failure the temporary is removed, and the error names `path`.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    replace(path, bytes).map_err(|cause| named(path, cause))
}

/// [`write_atomic`], its error the bare cause (with its OS error code), for callers that
/// name the file themselves.
pub fn replace(path: &Path, bytes: &[u8]) -> io::Result<()> {
    replace_with(path, |f| f.write_all(bytes))
}

/// The error of a failed [`write_atomic`]: `path: cause`, of the cause's kind.
fn named(path: &Path, cause: io::Error) -> io::Error {
    io::Error::new(cause.kind(), format!("{}: {cause}", path.display()))
}

fn replace_with(path: &Path, fill: impl FnOnce(&mut File) -> io::Result<()>) -> io::Result<()> {
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "names no file"))?;
    let (tmp, mut file) = create_temp(path, name)?;
    let done = fill(&mut file).and_then(|_| file.sync_all()).and_then(|_| {
        drop(file);
        std::fs::rename(&tmp, path)
    });
    if done.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    done
}

/// A new file `.<name>.<16 hex digits>.tmp` beside `path`, created exclusively.
fn create_temp(path: &Path, name: &OsStr) -> io::Result<(PathBuf, File)> {
    // Short enough that the suffix never takes the name past the 255 bytes allowed.
    let stem: String = name.to_string_lossy().chars().take(64).collect();
    for _ in 0..16 {
        let tmp = path.with_file_name(format!(".{stem}.{:016x}.tmp", unpredictable()));
        match OpenOptions::new().write(true).create_new(true).open(&tmp) {
            Ok(f) => return Ok((tmp, f)),
            // Taken (or planted): another name, never that file.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        "no free temporary name beside it",
    ))
}

/// 64 bits no one else can guess: the pid, the time and a counter, hashed with the
/// standard library's randomly keyed hasher (keys drawn from the OS).
fn unpredictable() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
    h.write_u128(now.map_or(0, |d| d.as_nanos()));
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.finish()
}

/// Opening options that refuse a symlink as the file's last component (`O_NOFOLLOW`):
/// the journal and its side files are opened for appending in place, where a symlink
/// planted in a shared run folder would otherwise redirect the writes anywhere the
/// runner's user can write.
pub fn no_follow(options: &mut std::fs::OpenOptions) -> &mut std::fs::OpenOptions {
    use std::os::unix::fs::OpenOptionsExt;
    options.custom_flags(libc::O_NOFOLLOW)
}

/// A name safe as one path component (the engine's rule, which a served label shares).
pub use runner_engine::folder_name::component;

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("fsutil-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn replaces_the_file_and_leaves_no_temporary_behind() {
        let dir = temp("replace");
        let path = dir.join("a.json");
        std::fs::write(&path, "old").unwrap();
        write_atomic(&path, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        assert_eq!(names(&dir), ["a.json"]);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn symlinks_planted_in_the_folder_are_never_written_through() {
        let dir = temp("symlinks");
        let victims = dir.with_extension("victims");
        let _ = std::fs::remove_dir_all(&victims);
        std::fs::create_dir_all(&victims).unwrap();
        let (at_tmp, at_target) = (victims.join("tmp"), victims.join("target"));
        std::fs::write(&at_tmp, "precious 1").unwrap();
        std::fs::write(&at_target, "precious 2").unwrap();
        let path = dir.join("report.html");
        // The old fixed temporary name, and the target itself.
        std::os::unix::fs::symlink(&at_tmp, dir.join(".report.html.tmp")).unwrap();
        std::os::unix::fs::symlink(&at_target, &path).unwrap();
        write_atomic(&path, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&at_tmp).unwrap(), "precious 1");
        assert_eq!(std::fs::read_to_string(&at_target).unwrap(), "precious 2");
        let meta = std::fs::symlink_metadata(&path).unwrap();
        assert!(meta.file_type().is_file(), "{meta:?}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        assert_eq!(names(&dir), [".report.html.tmp", "report.html"]);
        std::fs::remove_dir_all(&dir).unwrap();
        std::fs::remove_dir_all(&victims).unwrap();
    }

    #[test]
    fn temporary_names_are_unpredictable() {
        let a: Vec<u64> = (0..64).map(|_| unpredictable()).collect();
        let mut b = a.clone();
        b.sort();
        b.dedup();
        assert_eq!(a.len(), b.len());
    }

    #[test]
    fn a_write_failing_part_way_names_the_file_and_leaves_no_temporary() {
        let dir = temp("fails");
        // The rename fails: a folder (not empty) stands at the target's name. (We may
        // run as root, to whom a read-only folder is no obstacle.)
        let path = dir.join("scores.json");
        std::fs::create_dir_all(path.join("inside")).unwrap();
        let err = write_atomic(&path, b"{}").unwrap_err().to_string();
        assert!(err.starts_with(&format!("{}: ", path.display())), "{err}");
        assert_eq!(names(&dir), ["scores.json"]);
        // The disk fills up part-way through the write: ENOSPC after the first bytes.
        let path = dir.join("summary.md");
        let err = replace_with(&path, |f| {
            f.write_all(b"half")?;
            Err(io::Error::from_raw_os_error(28))
        })
        .map_err(|cause| named(&path, cause))
        .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::StorageFull);
        let msg = err.to_string();
        assert!(
            msg.starts_with(&format!("{}: ", path.display()))
                && msg.contains("No space left on device"),
            "{msg}"
        );
        assert_eq!(names(&dir), ["scores.json"]);
        // A folder where nothing can be created: the error names the file too.
        let path = dir.join("missing").join("report.html");
        let err = write_atomic(&path, b"x").unwrap_err().to_string();
        assert!(err.starts_with(&format!("{}: ", path.display())), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
