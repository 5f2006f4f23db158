//! Indented JSON for one flat record at a given depth, written straight into a
//! string: the same text `serde_json::to_string_pretty` gives (two-space indent,
//! `[]` for an empty list), without building a value tree per record.

use crate::record::EvidenceId;

pub enum V<'a> {
    /// A JSON string.
    Str(&'a str),
    /// Text that already is a JSON number or literal.
    Raw(&'a str),
    /// A list of evidence ids.
    Ids(&'a [EvidenceId]),
    /// A list of strings.
    Strs(&'a [&'a str]),
}

/// Appends `{ "k": v, ... }` whose opening brace sits at `indent` spaces.
pub fn object(out: &mut String, indent: usize, fields: &[(&str, V<'_>)]) {
    pad(out, indent);
    out.push_str("{\n");
    for (n, (k, v)) in fields.iter().enumerate() {
        pad(out, indent + 2);
        string(out, k);
        out.push_str(": ");
        value(out, indent + 2, v);
        if n + 1 < fields.len() {
            out.push(',');
        }
        out.push('\n');
    }
    pad(out, indent);
    out.push('}');
}

/// Appends `"k": v` as a member line at `indent`, without a trailing comma.
pub fn member(out: &mut String, indent: usize, k: &str, v: &V<'_>) {
    pad(out, indent);
    string(out, k);
    out.push_str(": ");
    value(out, indent, v);
}

fn value(out: &mut String, indent: usize, v: &V<'_>) {
    match v {
        V::Str(s) => string(out, s),
        V::Raw(s) => out.push_str(s),
        V::Ids(ids) => list(out, indent, ids.iter().map(|i| i.as_str())),
        V::Strs(xs) => list(out, indent, xs.iter().copied()),
    }
}

fn list<'a>(out: &mut String, indent: usize, items: impl ExactSizeIterator<Item = &'a str>) {
    let len = items.len();
    if len == 0 {
        out.push_str("[]");
        return;
    }
    out.push_str("[\n");
    for (n, s) in items.enumerate() {
        pad(out, indent + 2);
        string(out, s);
        if n + 1 < len {
            out.push(',');
        }
        out.push('\n');
    }
    pad(out, indent);
    out.push(']');
}

pub fn pad(out: &mut String, n: usize) {
    out.extend(std::iter::repeat_n(' ', n));
}

/// A JSON string literal.
pub fn string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matches_serde_json_pretty_at_depth_zero() {
        let ids = vec![EvidenceId::new("obs-2"), EvidenceId::new("o\"x")];
        let mut out = String::new();
        object(
            &mut out,
            0,
            &[
                ("id", V::Str("obs-1")),
                ("confidence", V::Raw("0.83")),
                ("none", V::Ids(&[])),
                ("supersedes", V::Ids(&ids)),
                ("states", V::Strs(&["a", "b\n"])),
            ],
        );
        let expected = serde_json::to_string_pretty(&serde_json::json!({
            "id": "obs-1",
            "confidence": 0.83,
            "none": [],
            "supersedes": ["obs-2", "o\"x"],
            "states": ["a", "b\n"],
        }))
        .unwrap();
        assert_eq!(out, expected);
    }
}
