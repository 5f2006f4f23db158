//! The decline detector and the value matcher against a labelled corpus of post answers
//! (`tests/data/probe_abstention.jsonl`): for each answer, the outcome a careful reviewer
//! gives it under the Probe scoring rules. Every line is asserted exactly: the scorer
//! must give the reviewer's outcome, except on lines marked `known_miss`, where it must
//! still differ (so a fix shows up as a failing test to update the corpus). The
//! detector's precision and recall on the corpus are printed.

use probe::generator::generate_probe;
use probe::score::{score_probe_item, Answer, ProbeResponse};
use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Deserialize)]
struct Line {
    probe_id: String,
    question: String,
    gold_pre: String,
    gold_post: String,
    answer: String,
    label: String,
    outcome: String,
    #[serde(default)]
    known_miss: bool,
}

fn corpus() -> Vec<Line> {
    let text = include_str!("../data/probe_abstention.jsonl");
    text.lines()
        .enumerate()
        .map(|(n, l)| {
            serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("probe_abstention.jsonl line {}: {e}", n + 1))
        })
        .collect()
}

fn is_abstention(outcome: &str) -> bool {
    matches!(outcome, "abstain" | "over_abstain")
}

#[test]
fn corpus_answers_score_as_labelled_and_the_detector_is_measured() {
    let items: BTreeMap<String, _> = generate_probe()
        .into_iter()
        .map(|i| (i.probe_id.to_string(), i))
        .collect();
    let lines = corpus();
    let mut per_class: BTreeMap<&str, usize> = BTreeMap::new();
    let mut wrong = Vec::new();
    let (mut tp, mut fp, mut fn_) = (0usize, 0usize, 0usize);
    for (n, l) in lines.iter().enumerate() {
        let item = items
            .get(&l.probe_id)
            .unwrap_or_else(|| panic!("line {}: no item {}", n + 1, l.probe_id));
        // The corpus is written against the generated set; it must stay in step.
        assert_eq!(
            (
                item.question.as_str(),
                item.gold_pre.as_str(),
                item.gold_post.as_str()
            ),
            (
                l.question.as_str(),
                l.gold_pre.as_str(),
                l.gold_post.as_str()
            ),
            "line {}",
            n + 1
        );
        *per_class.entry(l.label.as_str()).or_default() += 1;
        let got = score_probe_item(
            item,
            &ProbeResponse {
                pre: Answer::text(item.gold_pre.as_str()),
                post: Answer::text(&l.answer),
                ..ProbeResponse::default()
            },
        )
        .post;
        let got = got.as_str();
        if (got == l.outcome) == l.known_miss {
            wrong.push(format!(
                "line {}: {:?} on {} scored {got}, labelled {}{}",
                n + 1,
                l.answer,
                l.probe_id,
                l.outcome,
                if l.known_miss {
                    " (marked a known miss)"
                } else {
                    ""
                }
            ));
        }
        match (is_abstention(got), is_abstention(&l.outcome)) {
            (true, true) => tp += 1,
            (true, false) => fp += 1,
            (false, true) => fn_ += 1,
            (false, false) => {}
        }
    }
    for class in ["abstain", "right", "stale", "other", "hedged"] {
        let n = per_class.get(class).copied().unwrap_or(0);
        assert!(n >= 100, "class {class} has {n} answers, fewer than 100");
    }
    let precision = tp as f64 / (tp + fp) as f64;
    let recall = tp as f64 / (tp + fn_) as f64;
    let misses = lines.iter().filter(|l| l.known_miss).count();
    println!(
        "decline detector on {} answers: precision {precision:.3} ({tp}/{}), recall {recall:.3} ({tp}/{}); outcome agreement {}/{}",
        lines.len(),
        tp + fp,
        tp + fn_,
        lines.len() - misses,
        lines.len()
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
