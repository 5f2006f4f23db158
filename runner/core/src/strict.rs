//! Strict reading of user files: a field the record type does not know is an error
//! that names it and the nearest known name, instead of being dropped in silence (a
//! misspelled optional field would otherwise read as absent), and a leading UTF-8
//! byte-order mark is read past rather than taken for bad JSON.
//!
//! The check compares the JSON as written with the record serialized back: every key
//! that did not survive the round trip is unknown. It needs no list of names per type,
//! and the names it suggests are the ones the type actually serializes. A key written
//! as `null` may also be a known optional field the type leaves out when it writes, so
//! such a key is tried once more with a value in place of the null: a known field then
//! refuses the value or keeps it; an unknown one is still dropped, whatever its value.

use crate::json_strings::Strings;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

/// The UTF-8 byte-order mark some editors put at the start of a text file.
pub const BOM: &str = "\u{feff}";

/// `bytes` without a leading UTF-8 byte-order mark: every user file is read through this
/// (or [`text_without_bom`]) before it is parsed.
pub fn without_bom(bytes: &[u8]) -> &[u8] {
    bytes.strip_prefix(BOM.as_bytes()).unwrap_or(bytes)
}

/// `text` without a leading UTF-8 byte-order mark.
pub fn text_without_bom(text: &str) -> &str {
    text.strip_prefix(BOM).unwrap_or(text)
}

/// The longest id a suite file may give, in bytes. Ids name request ids, journal lines
/// and report rows: a 10 MB id was read, rendered and journaled in full, costing
/// minutes and gigabytes, where a refusal costs nothing.
pub const MAX_ID_BYTES: usize = 256;

/// Deserializes an id, refusing one longer than [`MAX_ID_BYTES`]: the readers' field
/// paths then name it, with its line.
pub fn bounded_id<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let id = <String as serde::Deserialize>::deserialize(d)?;
    if id.len() > MAX_ID_BYTES {
        return Err(serde::de::Error::custom(format!(
            "an id of {} bytes (it starts {:?}); ids are at most {MAX_ID_BYTES} bytes",
            id.len(),
            id.chars().take(24).collect::<String>()
        )));
    }
    Ok(id)
}

/// An unknown field: its path (as `a.b[2].c`) and the nearest known name, if any is close.
#[derive(Debug, Clone, PartialEq)]
pub struct Unknown {
    pub path: String,
    pub suggestion: Option<String>,
}

impl Unknown {
    /// `unknown field, did you mean `x`?` or `unknown field; known: a, b`.
    pub fn message(&self) -> String {
        match &self.suggestion {
            Some(s) => format!("unknown field, did you mean `{s}`?"),
            None => "unknown field".to_string(),
        }
    }
}

/// One step of a path into a JSON value.
#[derive(Debug, Clone)]
enum Step {
    Key(String),
    Index(usize),
}

/// `a.b[2].c`.
fn render(path: &[Step]) -> String {
    let mut out = String::new();
    for step in path {
        match step {
            Step::Key(k) if out.is_empty() => out.push_str(k),
            Step::Key(k) => {
                out.push('.');
                out.push_str(k);
            }
            Step::Index(i) => out.push_str(&format!("[{i}]")),
        }
    }
    out
}

fn at<'a>(mut v: &'a Value, path: &[Step]) -> Option<&'a Value> {
    for step in path {
        v = match step {
            Step::Key(k) => v.get(k.as_str())?,
            Step::Index(i) => v.get(*i)?,
        };
    }
    Some(v)
}

fn at_mut<'a>(mut v: &'a mut Value, path: &[Step]) -> Option<&'a mut Value> {
    for step in path {
        v = match step {
            Step::Key(k) => v.get_mut(k.as_str())?,
            Step::Index(i) => v.get_mut(*i)?,
        };
    }
    Some(v)
}

/// What a `null` is replaced with to learn whether its key is a field of the type: not
/// empty, so that no `skip_serializing_if` for an empty or default value drops it.
const PROBE: &str = "\u{1}strict-probe";

/// The first key of `written` that the record type `T` does not know, whatever its value
/// (`null` included). `read_back` is the record `written` parsed into, serialized.
pub fn first_unknown<T: DeserializeOwned + Serialize>(
    written: &Value,
    read_back: &Value,
) -> Option<Unknown> {
    let reread = |changed: &Value| {
        serde_json::from_value::<T>(changed.clone())
            .ok()
            .and_then(|t| serde_json::to_value(t).ok())
    };
    Walk {
        root: written,
        reread: &reread,
    }
    .walk(&mut Vec::new(), written, read_back)
}

/// The round-trip comparison, with the written record and a way to read a changed copy
/// of it (the copy serialized back, or `None` if the type refuses it).
struct Walk<'a> {
    root: &'a Value,
    reread: &'a dyn Fn(&Value) -> Option<Value>,
}

impl Walk<'_> {
    fn walk(&self, path: &mut Vec<Step>, written: &Value, read_back: &Value) -> Option<Unknown> {
        match (written, read_back) {
            (Value::Object(w), Value::Object(r)) => {
                for (k, v) in w {
                    path.push(Step::Key(k.clone()));
                    let found = match r.get(k) {
                        Some(rv) => self.walk(path, v, rv),
                        // A null the type leaves out when it writes (an absent optional).
                        None if v.is_null() && self.is_field(path) => None,
                        None => Some(Unknown {
                            path: render(path),
                            suggestion: nearest(k, r.keys().filter(|n| !w.contains_key(*n))),
                        }),
                    };
                    path.pop();
                    if found.is_some() {
                        return found;
                    }
                }
                None
            }
            (Value::Array(w), Value::Array(r)) => {
                for (i, (a, b)) in w.iter().zip(r).enumerate() {
                    path.push(Step::Index(i));
                    let found = self.walk(path, a, b);
                    path.pop();
                    if found.is_some() {
                        return found;
                    }
                }
                None
            }
            _ => None,
        }
    }

    /// Whether the key at `path` (written as `null`, absent once read back) is a field
    /// of the type: with a value in place of the null, the type refuses the record or
    /// keeps the key. An unknown key is ignored whatever it holds.
    fn is_field(&self, path: &[Step]) -> bool {
        let mut changed = self.root.clone();
        match at_mut(&mut changed, path) {
            Some(slot) => *slot = Value::String(PROBE.to_string()),
            None => return false,
        }
        match (self.reread)(&changed) {
            None => true,
            Some(back) => at(&back, path).is_some(),
        }
    }
}

/// The known name nearest to `given` by edit distance, if within a third of its length
/// (at least 2 edits), so that only plausible misspellings are suggested.
pub fn nearest<'a>(given: &str, known: impl Iterator<Item = &'a String>) -> Option<String> {
    let limit = (given.chars().count() / 3).max(2);
    known
        .map(|k| (edit_distance(given, k), k))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k.clone())
}

/// Levenshtein distance over characters.
pub fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1)
                .min(row[j] + 1)
                .min(diagonal + usize::from(ca != *cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

/// The byte offsets of the objects directly inside a top-level JSON array (braces in
/// strings do not count), in order: where each item of an array file begins.
pub fn item_offsets(bytes: &[u8]) -> Vec<usize> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut strings = Strings::default();
    for (i, b) in bytes.iter().enumerate() {
        if strings.take_byte(*b) {
            continue;
        }
        match b {
            b'"' => strings.open(),
            b'{' | b'[' => {
                if depth == 1 && *b == b'{' {
                    out.push(i);
                }
                depth += 1;
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    out
}

/// The line of the first `"key"` at or after byte `from`, if the text has one.
pub fn line_of_key(bytes: &[u8], from: usize, key: &str) -> Option<usize> {
    let needle = format!("\"{key}\"");
    let rest = bytes.get(from..)?;
    rest.windows(needle.len())
        .position(|w| w == needle.as_bytes())
        .map(|p| line_at(bytes, from + p))
}

/// The 1-based line of `bytes` on which byte `offset` lies.
pub fn line_at(bytes: &[u8], offset: usize) -> usize {
    1 + bytes[..offset.min(bytes.len())]
        .iter()
        .filter(|b| **b == b'\n')
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Serialize, serde::Deserialize)]
    struct Step {
        x: u32,
        #[serde(default)]
        stale_evidence_ids: Vec<u32>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        note: Option<String>,
    }

    #[derive(Serialize, serde::Deserialize)]
    struct Record {
        a: u32,
        steps: Vec<Step>,
    }

    fn unknown(written: Value) -> Option<Unknown> {
        let record: Record = serde_json::from_value(written.clone()).unwrap();
        first_unknown::<Record>(&written, &serde_json::to_value(record).unwrap())
    }

    #[test]
    fn a_misspelled_nested_field_is_found_with_its_nearest_name() {
        let written = json!({"a": 1, "steps": [{"x": 1}, {"x": 2, "stale_evidence_idz": []}]});
        assert_eq!(
            unknown(written),
            Some(Unknown {
                path: "steps[1].stale_evidence_idz".into(),
                suggestion: Some("stale_evidence_ids".into())
            })
        );
        let back = json!({"a": 1, "steps": [{"x": 1, "stale_evidence_ids": []}]});
        assert_eq!(unknown(back), None);
        let far = unknown(json!({"a": 1, "steps": [], "zzz": 1})).unwrap();
        assert_eq!(far.suggestion, None);
        assert_eq!(far.message(), "unknown field");
    }

    #[test]
    fn a_misspelled_field_is_found_even_when_its_value_is_null() {
        let written = json!({"a": 1, "steps": [{"x": 1, "stale_evidence_idz": null}]});
        assert_eq!(
            unknown(written).map(|u| u.path),
            Some("steps[0].stale_evidence_idz".into())
        );
        let top = json!({"a": 1, "steps": [], "b": null});
        assert_eq!(unknown(top).map(|u| u.path), Some("b".into()));
        // A known optional field written as null reads back absent, and is no error.
        let known = json!({"a": 1, "steps": [{"x": 1, "note": null}]});
        assert_eq!(unknown(known), None);
        let misspelled = json!({"a": 1, "steps": [{"x": 1, "nota": null}]});
        assert_eq!(
            unknown(misspelled).map(|u| u.path),
            Some("steps[0].nota".into())
        );
    }

    #[test]
    fn a_leading_byte_order_mark_is_read_past() {
        assert_eq!(without_bom("\u{feff}[1]".as_bytes()), b"[1]");
        assert_eq!(without_bom(b"[1]"), b"[1]");
        assert_eq!(text_without_bom("\u{feff}{}"), "{}");
        assert_eq!(text_without_bom("{}\u{feff}"), "{}\u{feff}");
    }

    #[test]
    fn edit_distance_counts_single_edits() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("idz", "ids"), 1);
    }
}
