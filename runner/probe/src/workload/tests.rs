//! Unit tests of the Probe workload: jobs, ids, limits and shards, scoring, names.

use crate::generator::{generate_pit, generate_probe, to_json};
use crate::place::Place;
use crate::workload::*;
use runner_core::plan::Shard;

fn workload(limit: Option<usize>, shard: Option<Shard>) -> ProbeWorkload {
    ProbeWorkload::new(
        ProbeSet::generated(),
        ProbePlan {
            seeds: runner_core::protocol::SEEDS.to_vec(),
            limit_per_domain: limit,
            shard,
        },
        64,
        runner_core::protocol::SAMPLING,
    )
    .unwrap()
}

fn place(job: &Job) -> Place<'_> {
    Place::of(&job.facets).unwrap()
}

#[test]
fn every_question_is_one_job_with_a_content_id() {
    let w = workload(None, None);
    // 168 core items asked pre, post and the follow-up; 8 PIT items with 3 queries each.
    assert_eq!(w.jobs().len(), 3 * 168 + 24);
    let mut ids: Vec<&str> = w.jobs().iter().map(|j| j.request.id.as_str()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), w.jobs().len());
    assert!(ids.iter().all(|i| i.len() == 64));
    // The same set planned again gives the same ids and prompts.
    let again = workload(None, None);
    for (a, b) in w.jobs().iter().zip(again.jobs()) {
        assert_eq!(
            (&a.request.id, &a.prompt_sha256),
            (&b.request.id, &b.prompt_sha256)
        );
    }
    let pre = place(&w.jobs()[0]);
    assert_eq!((pre.condition, pre.label), (CONVERSATION, "pre"));
    let pit = place(w.jobs().last().unwrap());
    assert_eq!(
        (pit.condition, pit.label, pit.index),
        (POINT_IN_TIME, "after_second_fact", 2)
    );
}

#[test]
fn limit_keeps_the_first_items_of_every_domain_and_shards_partition() {
    let w = workload(Some(2), None);
    // 3 core domains x 2 items x 3 questions + 2 PIT domains x 2 items x 3 queries.
    assert_eq!(w.jobs().len(), 3 * 2 * 3 + 2 * 2 * 3);
    let all = workload(None, None);
    let mut union: Vec<String> = (0..3)
        .flat_map(|i| {
            workload(None, Some(Shard { index: i, count: 3 }))
                .jobs()
                .iter()
                .map(|j| j.request.id.to_string())
                .collect::<Vec<_>>()
        })
        .collect();
    union.sort_unstable();
    let mut want: Vec<String> = all
        .jobs()
        .iter()
        .map(|j| j.request.id.to_string())
        .collect();
    want.sort_unstable();
    assert_eq!(union, want);
}

#[test]
fn samples_score_by_outcome_and_unknown_records_are_named() {
    let w = workload(None, None);
    let item = w
        .set()
        .core_items()
        .iter()
        .find(|i| i.gold_post.is_unknown() && i.hop_depth.get() == 2)
        .unwrap();
    let job = w
        .jobs()
        .iter()
        .find(|j| place(j).item == item.probe_id.as_str() && place(j).label == "post")
        .unwrap();
    let record = |text: &str| SampleRecord {
        request_id: job.request.id.to_string(),
        seed: 42,
        facets: job.facets.clone(),
        prompt_sha256: job.prompt_sha256.clone(),
        text: text.to_string(),
        tokens: 0,
        finish_reason: runner_engine::FinishReason::Stop,
        prefill_ms: 0.0,
        decode_ms: 0.0,
        scores: Value::Null,
    };
    let stale = w.score(&record(item.gold_pre.as_str())).unwrap();
    assert_eq!(stale.correct, Some(false));
    assert_eq!(stale.scores["outcome"], "stale");
    let abstain = w.score(&record("I don't know any more.")).unwrap();
    assert_eq!(abstain.correct, Some(true));
    let empty = w.score(&record("  ")).unwrap();
    assert!(empty.contract_failure && empty.correct == Some(false));
    let mut bad = record("x");
    bad.facets = Place {
        item: "nope",
        ..place(job)
    }
    .facets();
    assert!(w.score(&bad).unwrap_err().contains("\"nope\""));
    let mut bad = record("x");
    bad.facets = Place {
        label: "middle",
        ..place(job)
    }
    .facets();
    assert!(w.score(&bad).is_err());
    // A record of another suite is named as such.
    bad.facets = runner_core::facets::Facets::new().with("item", 1);
    assert_eq!(
        w.score(&bad).unwrap_err(),
        "not a Probe sample: the record has no `scenario`"
    );
}

#[test]
fn repeated_ids_and_labels_are_refused_with_file_and_field() {
    let mut items = generate_probe();
    items[3].probe_id = items[0].probe_id.clone();
    // A repeated item id is refused by the loader, which names both lines.
    let e = ProbeSet::from_bytes(to_json(&items).as_bytes(), "dup.json", "probe-dup")
        .err()
        .unwrap()
        .to_string();
    assert!(e.starts_with("dup.json:"), "{e}");
    assert!(
        e.contains("field `probe_id`: given twice (first on line"),
        "{e}"
    );
    let plan = ProbePlan {
        seeds: vec![1],
        limit_per_domain: None,
        shard: None,
    };
    let mut pit = generate_pit();
    pit[1].queries[2].label = pit[1].queries[0].label.clone();
    let set = ProbeSet::from_bytes(to_json(&pit).as_bytes(), "pit.json", "probe-pit").unwrap();
    let e = ProbeWorkload::new(set, plan.clone(), 8, Sampling::Greedy)
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("field `queries[2].label`"), "{e}");
    let set = ProbeSet::from_bytes(b"[]", "empty.json", "probe-empty").unwrap();
    let e = ProbeWorkload::new(set, plan, 8, Sampling::Greedy)
        .err()
        .unwrap()
        .to_string();
    assert_eq!(e, "empty.json: the Probe file holds no items");
}

#[test]
fn followups_are_scored_and_contract_failures_counted_not_dropped() {
    let w = workload(Some(1), None);
    let item = &w.set().core_items()[0];
    let jobs: Vec<&Job> = w
        .jobs()
        .iter()
        .filter(|j| place(j).item == item.probe_id.as_str())
        .collect();
    let record = |job: &Job, seed: u64, text: &str| SampleRecord {
        request_id: job.request.id.to_string(),
        seed,
        facets: job.facets.clone(),
        prompt_sha256: job.prompt_sha256.clone(),
        text: text.to_string(),
        tokens: 0,
        finish_reason: runner_engine::FinishReason::Stop,
        prefill_ms: 0.0,
        decode_ms: 0.0,
        scores: Value::Null,
    };
    let followup = jobs.iter().find(|j| place(j).label == "followup").unwrap();
    let gold: Vec<String> = item.gold_invalidated.iter().map(|r| r.0.clone()).collect();
    let right = serde_json::json!({"invalidated": gold, "axis": item.gold_axis}).to_string();
    let s = w.score(&record(followup, 1, &right)).unwrap();
    assert_eq!((s.correct, s.contract_failure), (Some(true), false));
    let s = w
        .score(&record(followup, 1, "It was an update, I think."))
        .unwrap();
    assert_eq!((s.correct, s.contract_failure), (Some(false), true));
    assert_eq!(s.scores["category"], "invalid");

    // Seed 1 answers the follow-up right, seed 2 breaks the contract.
    let mut records = Vec::new();
    for seed in [1, 2] {
        for job in &jobs {
            let text = match (place(job).label, seed) {
                ("pre", _) => item.gold_pre.to_string(),
                ("post", _) => item.gold_post.to_string(),
                (_, 1) => right.clone(),
                _ => "no idea".to_string(),
            };
            records.push(record(job, seed, &text));
        }
    }
    let report = w.run_report(&[("m".into(), records)], "t").unwrap();
    let probe = report.systems[0].probe.as_ref().unwrap();
    assert_eq!(probe.followup_contract_failures, 1);
    assert_eq!(probe.axis_acc, Some(0.5));
    let inv = probe.invalidation.as_ref().unwrap();
    assert_eq!(inv.macro_recall, 0.5);
    assert_eq!(inv.micro_precision, Some(1.0));
}
