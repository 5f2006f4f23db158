//! A pinned revision: a full 40-hex git commit. The cache lays a revision out as a
//! folder name (`snapshots/<revision>`), so anything else in `models.toml` (a branch, a
//! tag, a path such as `../..` or `/some/folder`) would load files outside the pin, or
//! have a download write outside the cache.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Commit(String);

impl Commit {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Whether `s` is `len` lowercase or uppercase hex digits and nothing else.
pub fn is_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit())
}

impl TryFrom<String> for Commit {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        if is_hex(&s, 40) {
            Ok(Commit(s.to_ascii_lowercase()))
        } else {
            Err(format!(
                "revision {s:?} is not a commit: give the full 40-hex commit hash \
                 (a branch, a tag or a path is not a pin)"
            ))
        }
    }
}

impl std::str::FromStr for Commit {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Commit::try_from(s.to_string())
    }
}

impl From<Commit> for String {
    fn from(c: Commit) -> String {
        c.0
    }
}

impl std::fmt::Display for Commit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::ops::Deref for Commit {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_full_hex_commit_is_a_revision() {
        let c: Commit = "989AA7980E4CF806F80C7FEF2B1ADB7BC71AA306".parse().unwrap();
        assert_eq!(c.as_str(), "989aa7980e4cf806f80c7fef2b1adb7bc71aa306");
        for bad in [
            "main",
            "/some/folder",
            "../../..",
            "989aa79",
            "989aa7980e4cf806f80c7fef2b1adb7bc71aa306/..",
            "989aa7980e4cf806f80c7fef2b1adb7bc71aa30g",
            "",
        ] {
            let err = bad.parse::<Commit>().unwrap_err();
            assert!(err.contains("40-hex"), "{bad:?}: {err}");
        }
    }
}
