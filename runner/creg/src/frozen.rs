//! The frozen evaluation-v1.0 suite as committed, and how a suite is written to disk.
//!
//! The committed JSONL is embedded so that the binary carries its default suite; a test
//! regenerates it and asserts byte identity, so any change to the generator, the model
//! or the specification shows up as a deliberate re-freeze.

use crate::generator::{self, GenerateError};
use crate::load::{self, LoadError};
use crate::record::Scenario;
use crate::spec::{NormativeSpec, NORMATIVE_SPEC_JSON};
use runner_engine::digest::sha256_hex;
use std::path::Path;

pub const SUITE_FILE: &str = "evaluation-v1.0.jsonl";
pub const SPEC_FILE: &str = "normative_spec.json";
pub const MANIFEST_FILE: &str = "SHA256SUMS";

/// The committed suite, byte for byte.
pub const FROZEN_JSONL: &str = include_str!("../data/evaluation-v1.0.jsonl");
/// The committed hash manifest.
pub const FROZEN_MANIFEST: &str = include_str!("../data/SHA256SUMS");

/// Parses the embedded frozen suite.
pub fn frozen_suite() -> Result<Vec<Scenario>, LoadError> {
    load::parse_jsonl(Path::new(SUITE_FILE), FROZEN_JSONL)
}

/// The frozen suite with the SHA-256 of its bytes.
pub fn frozen_suite_hashed() -> Result<(Vec<Scenario>, String), LoadError> {
    Ok((frozen_suite()?, sha256_hex(FROZEN_JSONL.as_bytes())))
}

/// Regenerates the suite from the embedded specification.
pub fn regenerate() -> Result<Vec<Scenario>, GenerateError> {
    generator::generate(NormativeSpec::frozen(), NormativeSpec::frozen_sha256())
}

/// `sha256sum`-compatible lines for the suite and its specification.
pub fn manifest(jsonl: &str) -> String {
    format!(
        "{}  {SUITE_FILE}\n{}  {SPEC_FILE}\n",
        sha256_hex(jsonl.as_bytes()),
        sha256_hex(NORMATIVE_SPEC_JSON.as_bytes())
    )
}

/// Writes the suite, its specification and the hash manifest into `dir`.
pub fn write_suite(dir: &Path, jsonl: &str) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    std::fs::write(dir.join(SUITE_FILE), jsonl)?;
    std::fs::write(dir.join(SPEC_FILE), NORMATIVE_SPEC_JSON)?;
    std::fs::write(dir.join(MANIFEST_FILE), manifest(jsonl))
}
