//! What a suite says about each of its requests (CREG: scenario, condition, task and
//! arrival step; Probe: item, phase, query), carried by a [`crate::run::Job`] and
//! journaled with every sample, so that a journal can be rescored without re-planning.
//! Core only carries them: the keys, their order and their meaning are the suite's,
//! which reads them back through its own accessors.

use serde::de::{Deserializer, MapAccess, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use thiserror::Error;

/// Named values in the order the suite gave them (journal lines keep that order).
/// A handful per request, held in a list: a map's table would cost more than its
/// lookups save, on every one of a report's tens of thousands of samples.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Facets(Vec<(String, Value)>);

/// The most facets a record read from a file may carry. A suite gives a handful (CREG
/// four, Probe three); a journal line with thousands more fields is not a sample's, and
/// looking each up among the others would cost the square of their number (100,000
/// fields once took 44 s to read).
pub const MAX_FACETS: usize = 64;

/// A facet a suite asked for that the record lacks or holds as another kind.
#[derive(Debug, Error, PartialEq)]
pub enum FacetError {
    #[error("the record has no `{0}`")]
    Missing(String),
    #[error("the record's `{key}` is {found}, not {wanted}")]
    Kind {
        key: String,
        wanted: &'static str,
        found: String,
    },
}

impl Facets {
    pub fn new() -> Facets {
        Facets::default()
    }

    /// These facets with `key` set to `value` (appended if new).
    pub fn with(mut self, key: &str, value: impl Into<Value>) -> Facets {
        self.insert(key.to_string(), value.into());
        self
    }

    /// Sets `key` to `value`, in its place if it is there, else at the end.
    pub fn insert(&mut self, key: String, value: Value) {
        match self.0.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => *v = value,
            None => self.0.push((key, value)),
        }
    }

    /// How many facets there are.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// The text facet `key`.
    pub fn text(&self, key: &str) -> Result<&str, FacetError> {
        match self.found(key)? {
            Value::String(s) => Ok(s),
            other => Err(kind(key, "text", other)),
        }
    }

    /// The facet `key` as a count (a non-negative integer).
    pub fn count(&self, key: &str) -> Result<usize, FacetError> {
        let v = self.found(key)?;
        v.as_u64()
            .and_then(|n| usize::try_from(n).ok())
            .ok_or_else(|| kind(key, "a count", v))
    }

    fn found(&self, key: &str) -> Result<&Value, FacetError> {
        self.get(key)
            .ok_or_else(|| FacetError::Missing(key.to_string()))
    }
}

impl Serialize for Facets {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

impl<'de> Deserialize<'de> for Facets {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Facets, D::Error> {
        struct Entries;
        impl<'de> Visitor<'de> for Entries {
            type Value = Facets;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an object of facets")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Facets, A::Error> {
                let mut out = Facets::new();
                while let Some((k, v)) = map.next_entry::<String, Value>()? {
                    if out.0.len() == MAX_FACETS && out.get(&k).is_none() {
                        return Err(serde::de::Error::custom(too_many()));
                    }
                    out.insert(k, v);
                }
                Ok(out)
            }
        }
        d.deserialize_map(Entries)
    }
}

/// The refusal of a record with more than [`MAX_FACETS`] facets.
pub fn too_many() -> String {
    format!(
        "more than {MAX_FACETS} fields besides the record's own: a sample carries a handful \
         of facets (scenario, condition, task, step), not thousands"
    )
}

fn kind(key: &str, wanted: &'static str, found: &Value) -> FacetError {
    let mut found = found.to_string();
    if found.len() > 40 {
        found = format!("{}…", found.chars().take(40).collect::<String>());
    }
    FacetError::Kind {
        key: key.to_string(),
        wanted,
        found,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facets_serialize_in_the_order_the_suite_gave_them() {
        let f = Facets::new()
            .with("scenario", "s-1")
            .with("condition", "full_graph")
            .with("step", 3);
        assert_eq!(
            serde_json::to_string(&f).unwrap(),
            r#"{"scenario":"s-1","condition":"full_graph","step":3}"#
        );
    }

    #[test]
    fn facets_read_back_in_their_order() {
        let text = r#"{"task":"belief","scenario":"s-1","step":3}"#;
        let f: Facets = serde_json::from_str(text).unwrap();
        assert_eq!(serde_json::to_string(&f).unwrap(), text);
        assert_eq!(f.with("task", "action").get("task"), Some(&"action".into()));
    }

    #[test]
    fn accessors_name_the_missing_or_mistyped_facet() {
        let f = Facets::new().with("task", "belief").with("step", -1);
        assert_eq!(f.text("task"), Ok("belief"));
        assert_eq!(
            f.text("scenario"),
            Err(FacetError::Missing("scenario".into()))
        );
        assert_eq!(
            f.count("step").unwrap_err().to_string(),
            "the record's `step` is -1, not a count"
        );
        assert_eq!(
            f.count("task").unwrap_err().to_string(),
            "the record's `task` is \"belief\", not a count"
        );
    }
}
