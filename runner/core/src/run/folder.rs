//! Where a run lives: `<out>/<model>/<run>/`. The default run name is the suite's
//! (plus the shard), so rerunning the same command finds and resumes the same folder;
//! `--fresh` takes the next free name beside it instead.

use crate::fsutil::component;
use crate::journal::MANIFEST_FILE;
use std::path::{Path, PathBuf};

/// The run folder. With `fresh`, a folder that already holds a run is left alone and
/// the first free `<run>.2`, `<run>.3`, ... is used.
pub fn run_dir(out: &Path, model: &str, run: &str, fresh: bool) -> PathBuf {
    let base = out.join(component(model));
    let first = base.join(component(run));
    if !fresh || !first.join(MANIFEST_FILE).exists() {
        return first;
    }
    (2..)
        .map(|n| base.join(format!("{}.{n}", component(run))))
        .find(|d| !d.join(MANIFEST_FILE).exists())
        .expect("some numbered folder is free")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_takes_the_next_free_folder_and_resume_keeps_the_first() {
        let out = std::env::temp_dir().join(format!("creg-folder-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&out);
        let first = run_dir(&out, "m", "creg-v1.0", true);
        assert_eq!(first, out.join("m").join("creg-v1.0"));
        std::fs::create_dir_all(&first).unwrap();
        std::fs::write(first.join(MANIFEST_FILE), "{}").unwrap();
        assert_eq!(run_dir(&out, "m", "creg-v1.0", false), first);
        let second = run_dir(&out, "m", "creg-v1.0", true);
        assert_eq!(second, out.join("m").join("creg-v1.0.2"));
        std::fs::remove_dir_all(&out).unwrap();
    }
}
