//! Files read whole, with a bound: a prompt, a chat template or a suite named on the
//! command line may be `/dev/zero`, `/dev/urandom` or a FIFO, and reading one of those
//! to its end does not end (or ends in the kernel's OOM kill).
//!
//! The bound is std's [`Read::take`]: at most `limit + 1` bytes are ever read, so a
//! file over the bound is refused after reading a bounded amount, whatever it is.

use std::io::Read;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum BoundedReadError {
    #[error("{}: cannot read it: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{}: larger than {}, the bound for {what} (no usable one is that large)",
        path.display(),
        show_bytes(*limit)
    )]
    TooLarge {
        path: PathBuf,
        what: &'static str,
        limit: u64,
    },
    #[error(
        "{}: {kind}, not a regular file; {what} is read again on resume and hashed, so it \
         must be a file on disk",
        path.display()
    )]
    NotAFile {
        path: PathBuf,
        what: &'static str,
        kind: &'static str,
    },
}

impl BoundedReadError {
    pub fn path(&self) -> &Path {
        match self {
            BoundedReadError::Io { path, .. }
            | BoundedReadError::TooLarge { path, .. }
            | BoundedReadError::NotAFile { path, .. } => path,
        }
    }
}

/// `1 MiB`, `16 MiB`, or bytes where the bound is not whole MiB.
pub fn show_bytes(n: u64) -> String {
    if n >= 1 << 20 && n.is_multiple_of(1 << 20) {
        format!("{} MiB", n >> 20)
    } else {
        format!("{n} bytes")
    }
}

/// The bytes of `path`, at most `limit` of them: a longer file (or a device that never
/// ends) is refused, naming `what` the file is and the bound. A pipe is read like a file
/// (`--prompt-file /dev/stdin`); a FIFO waits for its writer, as any reader does.
pub fn read(path: &Path, limit: u64, what: &'static str) -> Result<Vec<u8>, BoundedReadError> {
    let io = |source| BoundedReadError::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    // The length where the file says it (a regular file): the buffer is sized once, and
    // a file over the bound is refused before any of it is read.
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    if len > limit {
        return Err(BoundedReadError::TooLarge {
            path: path.to_path_buf(),
            what,
            limit,
        });
    }
    let mut bytes = Vec::with_capacity(len as usize);
    file.take(limit + 1).read_to_end(&mut bytes).map_err(io)?;
    if bytes.len() as u64 > limit {
        return Err(BoundedReadError::TooLarge {
            path: path.to_path_buf(),
            what,
            limit,
        });
    }
    Ok(bytes)
}

/// Like [`read`], for a file that must be a regular file on disk (a suite, which is
/// hashed and read again on resume): a FIFO, a device or a socket is refused before it
/// is opened, so a FIFO without a writer cannot block the run.
pub fn read_regular(
    path: &Path,
    limit: u64,
    what: &'static str,
) -> Result<Vec<u8>, BoundedReadError> {
    let meta = std::fs::metadata(path).map_err(|source| BoundedReadError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    if !meta.is_file() {
        return Err(BoundedReadError::NotAFile {
            path: path.to_path_buf(),
            what,
            kind: kind_of(&meta.file_type()),
        });
    }
    read(path, limit, what)
}

/// Like [`read`], as UTF-8 text.
pub fn read_text(path: &Path, limit: u64, what: &'static str) -> Result<String, BoundedReadError> {
    let bytes = read(path, limit, what)?;
    String::from_utf8(bytes).map_err(|e| BoundedReadError::Io {
        path: path.to_path_buf(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, e.utf8_error()),
    })
}

fn kind_of(t: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if t.is_fifo() {
            return "a FIFO (named pipe)";
        }
        if t.is_char_device() {
            return "a character device";
        }
        if t.is_block_device() {
            return "a block device";
        }
        if t.is_socket() {
            return "a socket";
        }
    }
    if t.is_dir() {
        "a folder"
    } else {
        "not a regular file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str, bytes: &[u8]) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("bounded-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("f");
        std::fs::write(&p, bytes).unwrap();
        p
    }

    #[test]
    fn a_file_at_the_bound_is_read_and_one_byte_more_is_refused() {
        let p = temp("at", b"abcd");
        assert_eq!(read(&p, 4, "a test file").unwrap(), b"abcd");
        let e = read(&p, 3, "a test file").unwrap_err();
        assert!(
            matches!(e, BoundedReadError::TooLarge { limit: 3, .. }),
            "{e}"
        );
        assert!(e
            .to_string()
            .contains("larger than 3 bytes, the bound for a test file"));
        let _ = std::fs::remove_dir_all(p.parent().unwrap());
    }

    #[cfg(unix)]
    #[test]
    fn an_endless_device_is_refused_after_the_bound() {
        let e = read(Path::new("/dev/zero"), 1 << 20, "a prompt").unwrap_err();
        assert!(
            e.to_string().starts_with("/dev/zero: larger than 1 MiB"),
            "{e}"
        );
        let e = read_regular(Path::new("/dev/zero"), 1 << 20, "a suite").unwrap_err();
        assert!(
            e.to_string()
                .contains("a character device, not a regular file"),
            "{e}"
        );
    }
}
