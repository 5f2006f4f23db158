//! The output contract against a grader's verdicts on labelled replies
//! (`tests/data/labelled_creg.jsonl`): real replies of the real checkpoints
//! (docs/real-models.md) on the frozen suite, and hand-written ones in the styles of
//! larger instruction models. A grader read each reply and decided, under the rule in
//! docs/suite.md ("How a reply is read"), whether it keeps the contract and what answer
//! it gives.
//!
//! Every line is asserted: the contract gives the grader's verdict and answer, or, on a
//! line that documents a disagreement (`scorer` and `disagreement`), exactly the verdict
//! named there, so that a fix shows up as a test to update. The confusion counts
//! (grader x contract, per source and task) are printed.

use creg::score::contract::{
    parse_action, parse_belief, parse_contradiction, parse_explanation, Category,
};
use runner_engine::finish::FinishReason;
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;

#[derive(Deserialize)]
#[allow(dead_code)] // `scenario`, `condition`, `step` and `reason` are for the reader.
struct Line {
    /// `real:<model> seed <n>` or `hand-written`.
    source: String,
    scenario: String,
    condition: String,
    task: String,
    step: usize,
    /// `stop` or `length`, as the run recorded it.
    finish: String,
    reply: String,
    /// `pass` or `fail`: whether the reply keeps the contract, as the grader reads it.
    verdict: String,
    /// The answer's deciding fields as the grader reads them (null on a failure).
    answer: Option<Value>,
    reason: String,
    /// Where the contract differs: the verdict it gives, and why it is left so.
    #[serde(default)]
    scorer: Option<String>,
    #[serde(default)]
    disagreement: Option<String>,
}

fn lines() -> Vec<Line> {
    include_str!("data/labelled_creg.jsonl")
        .lines()
        .enumerate()
        .map(|(n, l)| {
            serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("labelled_creg.jsonl line {}: {e}", n + 1))
        })
        .collect()
}

/// The contract's reading: its category and the deciding fields of the answer.
fn read(line: &Line) -> (Category, Option<Value>) {
    let finish = match line.finish.as_str() {
        "length" => FinishReason::Length,
        _ => FinishReason::Stop,
    };
    let text = &line.reply;
    match line.task.as_str() {
        "belief" => {
            let p = parse_belief(text, finish);
            let a = p.answer.map(|a| {
                json!({"top_state": a.top_state, "p_anomalous": (a.p_anomalous * 1000.0).round() / 1000.0})
            });
            (p.category, a)
        }
        "action" => {
            let p = parse_action(text, finish);
            let a = p
                .answer
                .map(|a| json!({"action_type": a.action_type.name()}));
            (p.category, a)
        }
        "contradiction" => {
            let p = parse_contradiction(text, finish);
            let a = p
                .answer
                .map(|a| json!({"contradiction_present": a.contradiction_present}));
            (p.category, a)
        }
        "explanation" => {
            let p = parse_explanation(text, finish);
            let a = p.answer.map(|a| json!({"top_state": a.top_state}));
            (p.category, a)
        }
        other => panic!("unknown task {other}"),
    }
}

#[test]
fn the_contract_agrees_with_the_grader_on_every_labelled_reply() {
    let lines = lines();
    let real = lines
        .iter()
        .filter(|l| l.source.starts_with("real:"))
        .count();
    let hand = lines.len() - real;
    assert!(real >= 60 && hand >= 15, "{real} real, {hand} hand-written");
    // (source kind, task) -> (grader, contract) -> count
    let mut confusion: BTreeMap<(String, String), BTreeMap<(String, String), usize>> =
        BTreeMap::new();
    let mut wrong = Vec::new();
    for (n, l) in lines.iter().enumerate() {
        let (category, answer) = read(l);
        let verdict = if category.is_failure() {
            "fail"
        } else {
            "pass"
        };
        let kind = l.source.split(' ').next().unwrap_or("").to_string();
        *confusion
            .entry((kind, l.task.clone()))
            .or_default()
            .entry((l.verdict.clone(), verdict.to_string()))
            .or_default() += 1;
        let expected = l.scorer.as_deref().unwrap_or(&l.verdict);
        assert!(
            l.scorer.is_none() || l.disagreement.is_some(),
            "line {}: a disagreement needs its reason",
            n + 1
        );
        let agrees =
            verdict == expected && (l.scorer.is_some() || verdict == "fail" || answer == l.answer);
        if !agrees {
            wrong.push(format!(
                "line {} ({} {}): grader {} {:?}, contract {verdict} {answer:?} ({category:?}): {}",
                n + 1,
                l.source,
                l.task,
                l.verdict,
                l.answer,
                l.reason
            ));
        }
    }
    for ((kind, task), cells) in &confusion {
        println!("{kind} {task}: {cells:?}");
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn every_label_is_complete() {
    for (n, l) in lines().iter().enumerate() {
        assert!(
            matches!(l.verdict.as_str(), "pass" | "fail"),
            "line {}: verdict {}",
            n + 1,
            l.verdict
        );
        assert_eq!(
            l.verdict == "pass",
            l.answer.is_some(),
            "line {}: a pass gives an answer, a failure none",
            n + 1
        );
        assert!(!l.reason.is_empty(), "line {}", n + 1);
    }
}
