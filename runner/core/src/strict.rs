//! Strict reading of user files: a field the record type does not know is an error
//! that names it and the nearest known name, instead of being dropped in silence (a
//! misspelled optional field would otherwise read as absent).
//!
//! The check compares the JSON as written with the record serialized back: every key
//! that did not survive the round trip is unknown. It needs no list of names per type,
//! and the names it suggests are the ones the type actually serializes.

use serde_json::Value;

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

/// The first key of `written` that `read_back` (the parsed record, serialized) lacks.
pub fn first_unknown(written: &Value, read_back: &Value) -> Option<Unknown> {
    walk("", written, read_back)
}

fn walk(path: &str, written: &Value, read_back: &Value) -> Option<Unknown> {
    match (written, read_back) {
        (Value::Object(w), Value::Object(r)) => {
            for (k, v) in w {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                match r.get(k) {
                    Some(rv) => {
                        if let Some(u) = walk(&p, v, rv) {
                            return Some(u);
                        }
                    }
                    // A null the type leaves out when it writes (an absent optional).
                    None if v.is_null() => {}
                    None => {
                        return Some(Unknown {
                            path: p,
                            suggestion: nearest(k, r.keys().filter(|n| !w.contains_key(*n))),
                        })
                    }
                }
            }
            None
        }
        (Value::Array(w), Value::Array(r)) => w
            .iter()
            .zip(r)
            .enumerate()
            .find_map(|(i, (a, b))| walk(&format!("{path}[{i}]"), a, b)),
        _ => None,
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
    let (mut in_string, mut escaped) = (false, false);
    for (i, b) in bytes.iter().enumerate() {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
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

    #[test]
    fn a_misspelled_nested_field_is_found_with_its_nearest_name() {
        let written = json!({"a": 1, "steps": [{"x": 1}, {"x": 2, "stale_evidence_idz": []}]});
        let back = json!({"a": 1, "steps": [{"x": 1, "stale_evidence_ids": []}, {"x": 2, "stale_evidence_ids": []}]});
        assert_eq!(
            first_unknown(&written, &back),
            Some(Unknown {
                path: "steps[1].stale_evidence_idz".into(),
                suggestion: Some("stale_evidence_ids".into())
            })
        );
        assert_eq!(first_unknown(&back, &back), None);
        let far = first_unknown(&json!({"zzz": 1}), &json!({"target": 1})).unwrap();
        assert_eq!(far.suggestion, None);
        assert_eq!(far.message(), "unknown field");
    }

    #[test]
    fn edit_distance_counts_single_edits() {
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("idz", "ids"), 1);
    }
}
