//! System responses as JSON lines, one per answered item (several lines per item for
//! several seeds):
//!
//! ```text
//! {"probe_id": "emp-d2-der-upda-adj-hi-r0", "pre": "Chicago", "post": {"answer": null, "abstain": true},
//!  "invalidated": ["workplace_city"], "axis_pred": "update"}
//! {"pit_id": "pit-emp-cor-adj", "answers": ["unknown", "Bellwether Labs", "Bellwether Labs"]}
//! ```
//!
//! Items with no line are paired with empty answers so that they count as wrong rather
//! than silently shrinking the denominator.

use crate::record::{Axis, PitItem, ProbeItem};
use crate::score::matching::Answer;
use crate::score::outcome::ProbeResponse;
use crate::score::pit_report::PitResponse;
use serde::Deserialize;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, thiserror::Error)]
pub enum ResponseError {
    #[error("{file}, line {line}: {message}")]
    Line {
        file: String,
        line: usize,
        message: String,
    },
}

// Fields are spelt out rather than flattened: a flattened struct loses the path of a
// bad field in the error.
#[derive(Deserialize)]
struct ProbeLine {
    probe_id: String,
    #[serde(default)]
    pre: Answer,
    #[serde(default)]
    post: Answer,
    #[serde(default)]
    invalidated: Option<Vec<String>>,
    #[serde(default)]
    axis_pred: Option<Axis>,
}

#[derive(Deserialize)]
struct PitLine {
    pit_id: String,
    #[serde(default)]
    answers: Vec<Answer>,
}

/// The non-blank lines of `text`, numbered from 1; a leading byte-order mark is read past.
fn lines<'a>(text: &'a str) -> impl Iterator<Item = (usize, &'a str)> + 'a {
    runner_core::strict::text_without_bom(text)
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty())
}

fn parse<T: serde::de::DeserializeOwned>(
    file: &str,
    line: usize,
    text: &str,
) -> Result<T, ResponseError> {
    let mut de = serde_json::Deserializer::from_str(text);
    serde_path_to_error::deserialize(&mut de).map_err(|e| ResponseError::Line {
        file: file.to_string(),
        line,
        message: format!("field `{}`: {}", e.path(), e.inner()),
    })
}

fn unknown_id(file: &str, line: usize, id: &str) -> ResponseError {
    ResponseError::Line {
        file: file.to_string(),
        line,
        message: format!("no item `{id}` in the scored file"),
    }
}

/// Pair core items with the responses read from `text`.
pub fn pair_probe<'a>(
    items: &'a [ProbeItem],
    text: &str,
    file: &str,
) -> Result<Vec<(&'a ProbeItem, ProbeResponse)>, ResponseError> {
    let index: BTreeMap<&str, &ProbeItem> =
        items.iter().map(|i| (i.probe_id.as_str(), i)).collect();
    let mut out = Vec::new();
    let mut answered = BTreeSet::new();
    for (n, l) in lines(text) {
        let line: ProbeLine = parse(file, n, l)?;
        let item = index
            .get(line.probe_id.as_str())
            .ok_or_else(|| unknown_id(file, n, &line.probe_id))?;
        answered.insert(item.probe_id.as_str());
        let response = ProbeResponse {
            pre: line.pre,
            post: line.post,
            invalidated: line.invalidated,
            axis_pred: line.axis_pred,
            followup_failed: false,
        };
        out.push((*item, response));
    }
    for item in items
        .iter()
        .filter(|i| !answered.contains(i.probe_id.as_str()))
    {
        out.push((item, ProbeResponse::default()));
    }
    Ok(out)
}

/// Pair PIT items with the responses read from `text`.
pub fn pair_pit<'a>(
    items: &'a [PitItem],
    text: &str,
    file: &str,
) -> Result<Vec<(&'a PitItem, PitResponse)>, ResponseError> {
    let index: BTreeMap<&str, &PitItem> = items.iter().map(|i| (i.pit_id.as_str(), i)).collect();
    let mut out = Vec::new();
    let mut answered = BTreeSet::new();
    for (n, l) in lines(text) {
        let line: PitLine = parse(file, n, l)?;
        let item = index
            .get(line.pit_id.as_str())
            .ok_or_else(|| unknown_id(file, n, &line.pit_id))?;
        answered.insert(item.pit_id.as_str());
        out.push((
            *item,
            PitResponse {
                answers: line.answers,
            },
        ));
    }
    for item in items
        .iter()
        .filter(|i| !answered.contains(i.pit_id.as_str()))
    {
        out.push((item, PitResponse::default()));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generator::{generate_pit, generate_probe};
    use crate::score::report::score_probe;

    #[test]
    fn missing_items_count_as_empty_answers() {
        let items = generate_probe();
        let first = &items[0];
        let text = format!(
            "{{\"probe_id\": \"{}\", \"pre\": \"{}\", \"post\": \"{}\"}}\n\n",
            first.probe_id, first.gold_pre, first.gold_post
        );
        let pairs = pair_probe(&items, &text, "r.jsonl").unwrap();
        assert_eq!(pairs.len(), 168);
        let refs: Vec<_> = pairs.iter().map(|(i, r)| (*i, r)).collect();
        let report = score_probe("one", &refs);
        assert_eq!(report.outcomes[&crate::score::Outcome::Empty], 167);
        assert!((report.post_acc.unwrap().mean - 1.0 / 168.0).abs() < 1e-12);
    }

    #[test]
    fn bad_lines_are_named() {
        let items = generate_probe();
        let e = pair_probe(&items, "\n{\"probe_id\": \"nope\"}", "r.jsonl").unwrap_err();
        assert_eq!(
            e.to_string(),
            "r.jsonl, line 2: no item `nope` in the scored file"
        );
        let line = format!("{{\"probe_id\": \"{}\", \"post\": 7}}", items[0].probe_id);
        let e = pair_probe(&items, &line, "r.jsonl")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("r.jsonl, line 1: field `post`"), "{e}");
        let pit = generate_pit();
        let line = format!(
            "{{\"pit_id\": \"{}\", \"answers\": [\"unknown\"]}}",
            pit[0].pit_id
        );
        assert_eq!(pair_pit(&pit, &line, "p").unwrap().len(), 8);
    }
}
