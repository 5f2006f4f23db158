//! The one way files that must never be seen half-written are written, and names safe
//! as one path component.

use std::io::Write;
use std::path::Path;

/// Writes `bytes` to a hidden file beside `path`, syncs it, and renames it into place:
/// a crash leaves either the old file or the new one, never a torn one.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::other(format!("{} names no file", path.display())))?;
    let tmp = path.with_file_name(format!(".{}.tmp", name.to_string_lossy()));
    let mut f = std::fs::File::create(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

/// A name safe as one path component: letters, digits, `.`, `-` and `_`; anything else
/// becomes `_`.
pub fn component(name: &str) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect();
    match cleaned.trim_matches('.') {
        "" => "_".to_string(),
        s => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_cannot_escape_the_output_folder() {
        assert_eq!(component("../../etc"), "_.._etc");
        assert_eq!(component("qwen2.5-7b"), "qwen2.5-7b");
        assert_eq!(component("a/b c"), "a_b_c");
        assert_eq!(component(".."), "_");
    }

    #[test]
    fn replaces_the_file_and_leaves_no_temporary_behind() {
        let dir = std::env::temp_dir().join(format!("fsutil-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("a.json");
        std::fs::write(&path, "old").unwrap();
        write_atomic(&path, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("a.json")]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
