//! Finding the answer object in whatever a model wrote: prose around it, code fences,
//! a tail cut off by the token budget. Pure and total: every input gives a result.

use crate::json_strings::Strings;
use serde_json::Value;

/// A change the extractor had to make before the text parsed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Repair {
    /// Trailing commas before `}` or `]` were dropped.
    TrailingComma,
    /// The object was cut off; open strings, arrays and objects were closed.
    ClosedTruncation,
    /// The distribution did not sum to 1 and was divided by its sum.
    RenormalizedDistribution,
    /// A state or id was written in another case or with surrounding spaces.
    NormalizedSpelling,
    /// A field was named otherwise than the contract names it.
    RenamedField,
    /// The object carried fields the contract does not define.
    ExtraField,
}

/// Why no object could be recovered.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NoObject {
    /// The text has no `{` at all.
    NoBrace,
    /// Braces were found but nothing between them parses, even after repair.
    Unparseable,
}

#[derive(Clone, Debug, PartialEq)]
pub struct Extracted {
    pub value: Value,
    pub repairs: Vec<Repair>,
}

/// How many balanced openings may get a second try without trailing commas, and how
/// many cut-off openings may be closed, before the text is given up on. Each is a pass
/// over the rest of the text, so the caps are what keep a degenerate output (a megabyte
/// of `{`) linear in its length. A cut-off answer is almost always the first opening
/// still open at the end, so few closing tries are needed.
const COMMA_TRIES: usize = 16;
const CLOSING_TRIES: usize = 4;

/// The first JSON object in `text` that parses, trying each `{` in turn: first as it
/// stands, then with trailing commas dropped, then with a truncated tail closed.
///
/// One pass over the text finds where every opening closes (braces in strings do not
/// count); a try that parses as it stands costs only as far as serde reads before it
/// fails, and at most [`COMMA_TRIES`] and [`CLOSING_TRIES`] openings get a repair pass.
pub fn extract_object(text: &str) -> Result<Extracted, NoObject> {
    let openings = openings(text);
    if openings.is_empty() {
        return Err(NoObject::NoBrace);
    }
    let (mut comma_tries, mut closing_tries) = (COMMA_TRIES, CLOSING_TRIES);
    // Left to right: a balanced object is tried as it stands and without trailing
    // commas; an unbalanced one is a cut-off tail and is closed.
    for (start, end) in openings {
        if let Some(end) = end {
            let candidate = &text[start..end];
            match serde_json::from_str::<Value>(candidate) {
                Ok(v @ Value::Object(_)) => {
                    return Ok(Extracted {
                        value: v,
                        repairs: Vec::new(),
                    })
                }
                // Dropping trailing commas can only help when a trailing comma is the
                // first thing serde trips on: the text before it is left as it was.
                Err(e) if is_trailing_comma(&e) && comma_tries > 0 => {
                    comma_tries -= 1;
                    let cleaned = drop_trailing_commas(candidate);
                    if let Ok(v @ Value::Object(_)) = serde_json::from_str::<Value>(&cleaned) {
                        return Ok(Extracted {
                            value: v,
                            repairs: vec![Repair::TrailingComma],
                        });
                    }
                }
                _ => {}
            }
            continue;
        }
        if closing_tries == 0 {
            continue;
        }
        closing_tries -= 1;
        let tail = &text[start..];
        let mut repairs = vec![Repair::ClosedTruncation];
        let mut parsed = serde_json::from_str::<Value>(&close_truncated(tail));
        if matches!(&parsed, Err(e) if is_trailing_comma(e)) {
            parsed = serde_json::from_str::<Value>(&close_truncated(&drop_trailing_commas(tail)));
            repairs.insert(0, Repair::TrailingComma);
        }
        if let Ok(v @ Value::Object(_)) = parsed {
            return Ok(Extracted { value: v, repairs });
        }
    }
    Err(NoObject::Unparseable)
}

fn is_trailing_comma(e: &serde_json::Error) -> bool {
    e.to_string().starts_with("trailing comma")
}

/// Every `{` that may open the answer, in order, with the end of its balanced `{...}`
/// (`None`: still open at the end of the text). Outside any opening the text is prose,
/// so quotes there do not start strings; inside, `{` and `[` nest alike and braces in
/// strings do not count. A `{` inside a string is no opening.
fn openings(text: &str) -> Vec<(usize, Option<usize>)> {
    let mut out: Vec<(usize, Option<usize>)> = Vec::new();
    // Open brackets: the index into `out` for a `{`, `None` for a `[`.
    let mut stack: Vec<Option<usize>> = Vec::new();
    let mut strings = Strings::default();
    for (i, b) in text.bytes().enumerate() {
        if strings.take_byte(b) {
            continue;
        }
        match b {
            b'{' => {
                stack.push(Some(out.len()));
                out.push((i, None));
            }
            _ if stack.is_empty() => {}
            b'"' => strings.open(),
            b'[' => stack.push(None),
            b'}' | b']' => {
                if let Some(Some(k)) = stack.pop() {
                    out[k].1 = Some(i + 1);
                }
            }
            _ => {}
        }
    }
    out
}

/// Removes commas that directly precede `}` or `]` (outside strings).
fn drop_trailing_commas(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut strings = Strings::default();
    let mut pending_comma: Option<String> = None;
    for c in s.chars() {
        if strings.take(c) {
            out.push(c);
            continue;
        }
        if let Some(buf) = pending_comma.as_mut() {
            if c.is_whitespace() {
                buf.push(c);
                continue;
            }
            let buf = pending_comma.take().unwrap_or_default();
            if c == '}' || c == ']' {
                out.push_str(&buf[1..]);
            } else {
                out.push_str(&buf);
            }
        }
        match c {
            ',' => pending_comma = Some(String::from(",")),
            '"' => {
                strings.open();
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    if let Some(buf) = pending_comma {
        out.push_str(&buf);
    }
    out
}

/// Closes whatever a cut-off JSON text left open. A dangling key or separator is cut
/// back to the last complete value first. One pass: the brackets open at the last
/// complete value are the ones still open at the end, as only brackets change them.
fn close_truncated(s: &str) -> String {
    let mut stack: Vec<char> = Vec::new();
    let mut strings = Strings::default();
    // The byte offset after the last complete value or opener.
    let mut safe = 0usize;
    let mut string_is_key = false;
    // The last character before the current one that is not whitespace.
    let mut last_visible: Option<char> = None;
    for (i, c) in s.char_indices() {
        let next = i + c.len_utf8();
        let before = last_visible;
        if !c.is_whitespace() {
            last_visible = Some(c);
        }
        if strings.take(c) {
            if !strings.is_open() && !string_is_key {
                safe = next;
            }
            continue;
        }
        match c {
            '"' => {
                strings.open();
                // A string right after `{` or `,` inside an object is a key.
                string_is_key =
                    stack.last() == Some(&'}') && matches!(before, Some('{') | Some(','));
            }
            '{' => {
                stack.push('}');
                safe = next;
            }
            '[' => {
                stack.push(']');
                safe = next;
            }
            '}' | ']' => {
                stack.pop();
                safe = next;
            }
            c if c.is_ascii_alphanumeric() || c == '.' || c == '-' || c == '+' => {
                // Part of a number or literal; complete once the next token starts.
                let rest = &s[next..];
                let ends = rest.chars().next().is_none_or(|n| {
                    !(n.is_ascii_alphanumeric() || n == '.' || n == '-' || n == '+')
                });
                if ends && !rest.is_empty() {
                    safe = next;
                }
            }
            _ => {}
        }
    }
    let mut out = s[..safe].trim_end().trim_end_matches(',').to_string();
    // A value cut right after its key's colon has no value: drop the key too.
    if out.ends_with(':') {
        if let Some(pos) = out.rfind([',', '{']) {
            out.truncate(if out.as_bytes()[pos] == b'{' {
                pos + 1
            } else {
                pos
            });
        }
    }
    for closer in stack.iter().rev() {
        out.push(*closer);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn finds_an_object_in_prose_and_code_fences() {
        let text = "Sure! Here is the answer:\n```json\n{\"a\": 1, \"b\": \"x}\"}\n```\nHope it helps {not json}";
        let got = extract_object(text).unwrap();
        assert_eq!(got.value, json!({"a": 1, "b": "x}"}));
        assert!(got.repairs.is_empty());
    }

    #[test]
    fn drops_trailing_commas_and_says_so() {
        let got = extract_object("{\"a\": [1, 2,], \"b\": 2,}").unwrap();
        assert_eq!(got.value, json!({"a": [1, 2], "b": 2}));
        assert_eq!(got.repairs, vec![Repair::TrailingComma]);
    }

    #[test]
    fn closes_a_truncated_tail() {
        let got = extract_object(
            "{\"d\": {\"anomalous\": 0.2, \"normal\": 0.8}, \"ids\": [\"obs-1\", \"ob",
        )
        .unwrap();
        assert_eq!(
            got.value,
            json!({"d": {"anomalous": 0.2, "normal": 0.8}, "ids": ["obs-1"]})
        );
        assert_eq!(got.repairs, vec![Repair::ClosedTruncation]);
        let got = extract_object("{\"a\": 1, \"b\":").unwrap();
        assert_eq!(got.value, json!({"a": 1}));
        let got = extract_object("{\"a\": 0.5").unwrap();
        assert_eq!(
            got.value,
            json!({}),
            "a number that may be cut is not trusted"
        );
    }

    #[test]
    fn an_object_inside_a_broken_one_is_still_found() {
        let got = extract_object("{answer: {\"a\": 1}} and {\"b\": 2}").unwrap();
        assert_eq!(got.value, json!({"a": 1}));
        let got = extract_object("{{{{ {\"a\": [1,],}").unwrap();
        assert_eq!(got.value, json!({"a": [1]}));
        assert_eq!(got.repairs, vec![Repair::TrailingComma]);
    }

    #[test]
    fn degenerate_inputs_take_time_linear_in_their_length() {
        // The old extractor took seconds on 2 KB of `{` and hours on 1 MB; the bound
        // is loose for a busy machine and an unoptimised build.
        let mb = 1 << 20;
        for text in [
            "{".repeat(mb),
            format!("{{\"a\": {}{}}}", "[".repeat(mb / 2), "]".repeat(mb / 2)),
            "{\"a\": [1,],".repeat(mb / 12),
        ] {
            let t = std::time::Instant::now();
            let _ = extract_object(&text);
            assert!(t.elapsed().as_secs_f64() < 5.0, "{:?}", &text[..10]);
        }
    }

    #[test]
    fn reports_why_nothing_was_found() {
        assert_eq!(extract_object("no braces here"), Err(NoObject::NoBrace));
        assert_eq!(extract_object("{{{ ]]] }"), Err(NoObject::Unparseable));
    }

    #[test]
    fn arbitrary_text_gives_an_object_or_a_reason() {
        // A deterministic fuzz over JSON-ish alphabets, including multi-byte characters.
        let alphabet: Vec<char> = "{}[]\",:\\ 0.5-eE+truefalsnl\u{e9}\u{1F600}abc\n"
            .chars()
            .collect();
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..20_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let len = (state % 40) as usize;
            let mut s = String::new();
            let mut x = state;
            for _ in 0..len {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                s.push(alphabet[(x >> 33) as usize % alphabet.len()]);
            }
            match extract_object(&s) {
                Ok(found) => assert!(found.value.is_object(), "{s:?} -> {:?}", found.value),
                Err(NoObject::NoBrace) => assert!(!s.contains('{'), "{s:?}"),
                Err(NoObject::Unparseable) => assert!(s.contains('{'), "{s:?}"),
            }
        }
    }
}
