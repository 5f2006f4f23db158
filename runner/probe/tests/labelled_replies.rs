//! The scorer against a grader's verdicts on labelled replies
//! (`tests/data/labelled_probe.jsonl`): real replies of the real checkpoints
//! (docs/real-models.md) on the generated set, and hand-written ones in the styles of
//! larger instruction models. A grader read each reply and wrote the outcome it
//! deserves under docs/probe-answers.md, the answer it gives and why.
//!
//! Every line is asserted: the scorer gives the grader's verdict, or, on a line that
//! documents a disagreement (`scorer` and `disagreement`), exactly the outcome named
//! there, so that a fix shows up as a test to update. The confusion counts (grader x
//! scorer, per source and question kind) are printed.

use probe::generator::{generate_pit, generate_probe};
use probe::score::{score_pit_query, score_probe_item, Answer, ProbeResponse};
use serde::Deserialize;
use std::collections::BTreeMap;

#[derive(Deserialize)]
#[allow(dead_code)] // `answer` and `reason` are for the reader of the data file.
struct Line {
    /// `real:<model>` or `hand-written`.
    source: String,
    /// A core item's `probe_id` or a PIT item's `pit_id`.
    item: String,
    /// `pre`, `post`, or the PIT query's label.
    task: String,
    reply: String,
    /// The grader's outcome.
    verdict: String,
    /// The answer the reply gives, as the grader reads it (null: none).
    answer: Option<String>,
    reason: String,
    /// Where the scorer differs: the outcome it gives, and why it is left so.
    #[serde(default)]
    scorer: Option<String>,
    #[serde(default)]
    disagreement: Option<String>,
}

fn lines() -> Vec<Line> {
    include_str!("data/labelled_probe.jsonl")
        .lines()
        .enumerate()
        .map(|(n, l)| {
            serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("labelled_probe.jsonl line {}: {e}", n + 1))
        })
        .collect()
}

#[test]
fn the_scorer_agrees_with_the_grader_on_every_labelled_reply() {
    let core: BTreeMap<String, _> = generate_probe()
        .into_iter()
        .map(|i| (i.probe_id.to_string(), i))
        .collect();
    let pit: BTreeMap<String, _> = generate_pit()
        .into_iter()
        .map(|i| (i.pit_id.to_string(), i))
        .collect();
    let lines = lines();
    let mut confusion: BTreeMap<(String, String, String, String), usize> = BTreeMap::new();
    let mut wrong = Vec::new();
    let (mut real, mut agree) = (0, 0);
    for (n, l) in lines.iter().enumerate() {
        let got = if let Some(item) = core.get(&l.item) {
            let answer = Answer::text(&l.reply);
            let s = match l.task.as_str() {
                "pre" => {
                    score_probe_item(
                        item,
                        &ProbeResponse {
                            pre: answer,
                            ..ProbeResponse::default()
                        },
                    )
                    .pre
                }
                "post" => {
                    score_probe_item(
                        item,
                        &ProbeResponse {
                            post: answer,
                            ..ProbeResponse::default()
                        },
                    )
                    .post
                }
                t => panic!("line {}: core task {t} is neither pre nor post", n + 1),
            };
            s.as_str()
        } else if let Some(item) = pit.get(&l.item) {
            let q = item
                .queries
                .iter()
                .find(|q| q.label.to_string() == l.task)
                .unwrap_or_else(|| panic!("line {}: {} has no query {}", n + 1, l.item, l.task));
            score_pit_query(item, q, &Answer::text(&l.reply))
                .outcome
                .as_str()
        } else {
            panic!("line {}: no item {}", n + 1, l.item)
        };
        let kind = if core.contains_key(&l.item) {
            l.task.clone()
        } else {
            "pit".to_string()
        };
        let source = l.source.split(':').next().unwrap_or("").to_string();
        *confusion
            .entry((source, kind, l.verdict.clone(), got.to_string()))
            .or_default() += 1;
        real += usize::from(l.source.starts_with("real:"));
        agree += usize::from(got == l.verdict);
        let expected = l.scorer.as_deref().unwrap_or(&l.verdict);
        if got != expected || l.scorer.is_some() != l.disagreement.is_some() {
            wrong.push(format!(
                "line {}: {} {} scored {got}, grader {}{}: {:?}",
                n + 1,
                l.item,
                l.task,
                l.verdict,
                l.scorer
                    .as_ref()
                    .map(|s| format!(" (documented scorer outcome {s})"))
                    .unwrap_or_default(),
                l.reply.chars().take(120).collect::<String>()
            ));
        }
    }
    println!("source kind grader scorer count");
    for ((source, kind, grader, scorer), count) in &confusion {
        let mark = if grader == scorer { "" } else { " *" };
        println!("{source} {kind} {grader} {scorer} {count}{mark}");
    }
    println!(
        "agreement {agree}/{} ({real} real replies, {} hand-written)",
        lines.len(),
        lines.len() - real
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
