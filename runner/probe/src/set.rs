//! A Probe set as a run reads it: the project's generated `probe.json` and
//! `probe_pit.json`, or one file a user names, each with the SHA-256 of its bytes
//! (request ids and run manifests are keyed on it).

use crate::generator::{generate_pit, generate_probe, to_json};
use crate::load::{parse_any, LoadError, ProbeFile};
use crate::provenance::{provenance, SetProvenance};
use crate::record::{PitItem, ProbeItem};
use runner_core::fsutil::component;
use runner_engine::digest::sha256_hex;
use std::path::Path;

/// The name of the project's generated set (run folders, report titles).
pub const GENERATED_NAME: &str = "probe";

/// The items of one file, with the hash of its bytes (request ids are keyed on it) and
/// the name error messages use for it.
#[derive(Clone, Debug)]
pub struct Part<T> {
    pub file: String,
    pub sha256: String,
    pub items: Vec<T>,
}

/// What a Probe run asks: core items, PIT items, or both.
#[derive(Clone, Debug)]
pub struct ProbeSet {
    /// Run folder and report title, e.g. `probe` (generated) or `probe-v0`.
    pub name: String,
    /// The project's own generated files rather than a user's.
    pub generated: bool,
    pub core: Option<Part<ProbeItem>>,
    pub pit: Option<Part<PitItem>>,
}

impl ProbeSet {
    /// The project's generated `probe.json` and `probe_pit.json`, hashed as
    /// `runner probe generate` writes them.
    pub fn generated() -> ProbeSet {
        let core = generate_probe();
        let pit = generate_pit();
        ProbeSet {
            name: GENERATED_NAME.to_string(),
            generated: true,
            core: Some(Part {
                file: "probe.json (generated)".into(),
                sha256: sha256_hex(to_json(&core).as_bytes()),
                items: core,
            }),
            pit: Some(Part {
                file: "probe_pit.json (generated)".into(),
                sha256: sha256_hex(to_json(&pit).as_bytes()),
                items: pit,
            }),
        }
    }

    /// A user's `probe.json` or `probe_pit.json` (told apart by its ids), read from
    /// `path`, never copied.
    pub fn from_file(path: &Path) -> Result<ProbeSet, LoadError> {
        let file = path.display().to_string();
        let bytes = crate::load::read(path)?;
        ProbeSet::from_bytes(&bytes, &file, &name_for(path))
    }

    pub fn from_bytes(bytes: &[u8], file: &str, name: &str) -> Result<ProbeSet, LoadError> {
        let sha256 = sha256_hex(bytes);
        let file = file.to_string();
        let (core, pit) = match parse_any(bytes, &file)? {
            ProbeFile::Probe(items) => (
                Some(Part {
                    file,
                    sha256,
                    items,
                }),
                None,
            ),
            ProbeFile::Pit(items) => (
                None,
                Some(Part {
                    file,
                    sha256,
                    items,
                }),
            ),
        };
        Ok(ProbeSet {
            name: name.to_string(),
            generated: false,
            core,
            pit,
        })
    }

    pub fn core_items(&self) -> &[ProbeItem] {
        self.core.as_ref().map_or(&[], |p| &p.items)
    }

    pub fn pit_items(&self) -> &[PitItem] {
        self.pit.as_ref().map_or(&[], |p| &p.items)
    }

    /// Which set this is, for the reports.
    pub fn provenance(&self) -> SetProvenance {
        provenance(
            self.generated,
            self.core.as_ref().map(|p| p.sha256.as_str()),
            &self.files(),
        )
    }

    /// The files, for messages.
    pub fn files(&self) -> String {
        let names: Vec<&str> = self
            .core
            .as_ref()
            .map(|p| p.file.as_str())
            .into_iter()
            .chain(self.pit.as_ref().map(|p| p.file.as_str()))
            .collect();
        names.join(" and ")
    }
}

/// A user file's set name: `probe_v0.json` -> `probe-v0`, `probe_pit.json` ->
/// `probe-pit`, `mine.json` -> `probe-mine`; a file called `probe.json` gives
/// `probe-file`, because plain `probe` is the generated set.
pub fn name_for(path: &Path) -> String {
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    let separators = ['_', '-', '.', ' '];
    let rest = match stem.strip_prefix("probe") {
        Some(r) if r.is_empty() || r.starts_with(separators) => r.trim_start_matches(separators),
        _ => stem.as_str(),
    };
    if rest.is_empty() {
        return "probe-file".to_string();
    }
    format!("probe-{}", component(&rest.replace('_', "-")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn user_files_are_named_after_their_stem() {
        assert_eq!(name_for(Path::new("a/probe_v0.json")), "probe-v0");
        assert_eq!(name_for(Path::new("probe_pit.json")), "probe-pit");
        assert_eq!(name_for(Path::new("probe.json")), "probe-file");
        assert_eq!(name_for(Path::new("Mine.json")), "probe-mine");
        assert_eq!(name_for(Path::new("prober.json")), "probe-prober");
    }
}
