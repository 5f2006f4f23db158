//! The acceptance tests of the prompts: lengths, exact controls, ablations, no
//! leakage of later evidence or reference labels, determinism (pinned hashes).

use super::manifest::{self, render_file};
use super::{stats, Condition, Prompt, Renderer, Task};
use crate::suite::creg::frozen::frozen_suite;
use crate::suite::creg::record::Scenario;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

pub(crate) fn suite() -> &'static [Scenario] {
    static SUITE: OnceLock<Vec<Scenario>> = OnceLock::new();
    SUITE.get_or_init(|| frozen_suite().expect("the frozen suite parses"))
}

pub(crate) fn renderer() -> &'static Renderer {
    static R: OnceLock<Renderer> = OnceLock::new();
    R.get_or_init(|| Renderer::frozen().expect("the templates parse"))
}

/// Every (scenario, step, body-without-legend) of a condition, belief prefixes.
fn data_parts(c: Condition) -> Vec<(&'static Scenario, usize, String)> {
    let r = renderer();
    let mut out = Vec::new();
    for s in suite() {
        let layout = r.layout(s, c);
        for step in 1..=s.observations.len() {
            let body = layout.render(step);
            let data = body
                .strip_prefix(r.legend(c))
                .unwrap_or_else(|| panic!("{c}: the body starts with its legend"))
                .to_string();
            out.push((s, step, data));
        }
    }
    out
}

fn json(c: Condition) -> Vec<(&'static Scenario, usize, Value)> {
    data_parts(c)
        .into_iter()
        .map(|(s, step, d)| {
            let v = serde_json::from_str(&d)
                .unwrap_or_else(|e| panic!("{c} {} step {step}: {e}", s.id));
            (s, step, v)
        })
        .collect()
}

fn arr<'a>(v: &'a Value, key: &str) -> &'a Vec<Value> {
    v[key].as_array().unwrap()
}

fn of_type<'a>(v: &'a Value, key: &str, ty: &str) -> Vec<&'a Value> {
    arr(v, key).iter().filter(|n| n["type"] == ty).collect()
}

fn sorted_texts(vs: &[Value]) -> Vec<String> {
    let mut t: Vec<String> = vs.iter().map(Value::to_string).collect();
    t.sort();
    t
}

#[test]
fn mean_body_lengths_match_the_published_table() {
    let rows = stats::body_lengths(renderer(), suite());
    assert_eq!(rows.len(), 9);
    for row in &rows {
        assert_eq!(row.prefixes, 1150, "{}", row.condition);
        assert!(
            row.deviation().abs() <= 0.03,
            "{}: mean {:.1} is {:+.2}% off {}",
            row.condition,
            row.mean_chars,
            100.0 * row.deviation(),
            row.condition.published_mean_chars()
        );
        assert!(
            row.ratio_error().abs() <= 0.01,
            "{}: ratio {:.4} vs published {}",
            row.condition,
            row.ratio,
            row.condition.published_ratio()
        );
    }
}

#[test]
fn every_prefix_shows_exactly_the_arrived_reports_in_arrival_order() {
    for (s, step, v) in json(Condition::FullGraph) {
        let shown: Vec<&str> = of_type(&v, "nodes", "evidence")
            .iter()
            .map(|n| n["id"].as_str().unwrap())
            .collect();
        let arrived: Vec<&str> = s.arrival_order()[..step]
            .iter()
            .map(|o| o.id.as_str())
            .collect();
        assert_eq!(shown, arrived, "{} step {step}", s.id);
    }
}

#[test]
fn shuffled_graph_is_a_permutation_of_the_full_graph_records() {
    let full = json(Condition::FullGraph);
    let shuffled = json(Condition::ShuffledFullGraph);
    let full_text = data_parts(Condition::FullGraph);
    let shuffled_text = data_parts(Condition::ShuffledFullGraph);
    let mut reordered = 0;
    for ((a, b), (ta, tb)) in full
        .iter()
        .zip(&shuffled)
        .zip(full_text.iter().zip(&shuffled_text))
    {
        let (s, step) = (a.0, a.1);
        for key in ["nodes", "links"] {
            assert_eq!(
                sorted_texts(arr(&a.2, key)),
                sorted_texts(arr(&b.2, key)),
                "{} step {step}: {key}",
                s.id
            );
        }
        assert_eq!(a.2["graph"], b.2["graph"]);
        let chars = |t: &str| {
            let mut v: Vec<char> = t.chars().collect();
            v.sort_unstable();
            v
        };
        assert_eq!(chars(&ta.2), chars(&tb.2), "{} step {step}", s.id);
        reordered += usize::from(ta.2 != tb.2);
    }
    assert!(
        reordered * 100 >= full.len() * 95,
        "only {reordered} of {} prefixes reordered",
        full.len()
    );
    assert_eq!(
        renderer().legend(Condition::FullGraph),
        renderer().legend(Condition::ShuffledFullGraph)
    );
}

#[test]
fn shuffled_order_is_stable_across_the_prefixes_of_a_scenario() {
    let r = renderer();
    for s in suite().iter().step_by(7) {
        let layout = r.layout(s, Condition::ShuffledFullGraph);
        let last = layout.render(s.observations.len());
        for step in 1..s.observations.len() {
            let body = layout.render(step);
            let ids = |b: &str| -> Vec<String> {
                b.lines()
                    .filter(|l| l.starts_with("      \"id\""))
                    .map(str::to_string)
                    .collect()
            };
            let earlier = ids(&body);
            let later: Vec<String> = ids(&last)
                .into_iter()
                .filter(|l| earlier.contains(l))
                .collect();
            assert_eq!(earlier, later, "{} step {step}", s.id);
        }
    }
}

/// (source, predicate, target, confidence, evidence ids) of every semantic relation.
type RelationFact = (String, String, String, String, String);

#[test]
fn flat_edge_removed_keeps_every_fact_of_the_full_graph() {
    let full = json(Condition::FullGraph);
    let flat = json(Condition::FlatEdgeRemoved);
    for ((s, step, g), (_, _, f)) in full.iter().zip(&flat) {
        let records = arr(f, "records");
        let rel_graph: BTreeSet<RelationFact> = of_type(g, "links", "relation")
            .iter()
            .map(|l| {
                (
                    l["source"].to_string(),
                    l["predicate"].to_string(),
                    l["target"].to_string(),
                    l["confidence"].to_string(),
                    l["evidence_ids"].to_string(),
                )
            })
            .collect();
        let rel_flat: BTreeSet<RelationFact> = records
            .iter()
            .filter(|r| r["record"] == "relation")
            .map(|r| {
                (
                    r["subject_entity"].to_string(),
                    r["relation"].to_string(),
                    r["object_entity"].to_string(),
                    r["confidence"].to_string(),
                    r["evidence_ids"].to_string(),
                )
            })
            .collect();
        assert_eq!(rel_graph, rel_flat, "{} step {step}", s.id);
        assert_eq!(rel_flat.len(), s.relations.len());
        // Provenance and subject, which the graph carries as links.
        let by_link = |ty: &str, from_evidence: bool| -> BTreeSet<(String, String)> {
            of_type(g, "links", ty)
                .iter()
                .map(|l| {
                    let (src, dst) = (l["source"].to_string(), l["target"].to_string());
                    if from_evidence {
                        (src, dst)
                    } else {
                        (dst, src)
                    }
                })
                .collect()
        };
        let evidence: Vec<&Value> = records
            .iter()
            .filter(|r| r["record"] == "evidence")
            .collect();
        let field = |k: &str| -> BTreeSet<(String, String)> {
            evidence
                .iter()
                .map(|r| (r["evidence_id"].to_string(), r[k].to_string()))
                .collect()
        };
        assert_eq!(by_link("reported", false), field("reported_by_agent"));
        assert_eq!(by_link("about", true), field("subject_entity"));
        for node in of_type(g, "nodes", "evidence") {
            let rec = evidence
                .iter()
                .find(|r| r["evidence_id"] == node["id"])
                .expect("every report is a flat record");
            for (k, v) in node.as_object().unwrap() {
                if k != "id" && k != "type" {
                    assert_eq!(&rec[k.as_str()], v, "{} {k}", s.id);
                }
            }
        }
    }
}

#[test]
fn counterfactual_twins_differ_only_through_their_relations() {
    let r = renderer();
    let mut pairs: BTreeMap<&str, Vec<&Scenario>> = BTreeMap::new();
    for s in suite() {
        if let Some(p) = &s.metadata.counterfactual_pair_id {
            pairs.entry(p).or_default().push(s);
        }
    }
    assert_eq!(pairs.len(), 25);
    for (pair, twins) in &pairs {
        let [a, b] = twins.as_slice() else {
            panic!("{pair} is not a pair")
        };
        for task in Task::ALL {
            let texts = |s: &Scenario, c: Condition| {
                let mut v = Vec::new();
                r.prompts(s, c, task, &mut |p: Prompt| v.push(p.text));
                v
            };
            let (ga, gb) = (
                texts(a, Condition::GraphWithoutRelations),
                texts(b, Condition::GraphWithoutRelations),
            );
            assert_eq!(ga, gb, "{pair} {task}: graph_without_relations");
            let (fa, fb) = (
                texts(a, Condition::FullGraph),
                texts(b, Condition::FullGraph),
            );
            assert_eq!(fa.len(), fb.len());
            for (x, y) in fa.iter().zip(&fb) {
                assert_ne!(x, y, "{pair} {task}: full_graph");
            }
        }
    }
}

#[test]
fn no_timestamps_drops_every_time_and_keeps_every_state_epoch() {
    for (s, step, v) in json(Condition::NoTimestamps) {
        let text = v.to_string();
        for o in &s.observations {
            assert!(!text.contains(&o.timestamp), "{}: {}", s.id, o.timestamp);
            assert!(!text.contains(&o.metadata.arrival_time), "{}", s.id);
        }
        let nodes = of_type(&v, "nodes", "evidence");
        assert_eq!(nodes.len(), step);
        for n in nodes {
            let o = s
                .observations
                .iter()
                .find(|o| n["id"] == o.id.as_str())
                .unwrap();
            assert_eq!(n["state_epoch"], o.metadata.state_epoch, "{}", s.id);
            assert!(n.get("timestamp").is_none() && n.get("arrival_time").is_none());
            assert!(n.get("confidence").is_some());
        }
    }
}

#[test]
fn no_provenance_has_no_reliability_and_no_reported_edge() {
    for (s, _, v) in json(Condition::NoProvenance) {
        let text = v.to_string();
        assert!(!text.contains("reliability"), "{}", s.id);
        assert!(of_type(&v, "links", "reported").is_empty());
        for agent in of_type(&v, "nodes", "agent") {
            let keys: Vec<&String> = agent.as_object().unwrap().keys().collect();
            assert_eq!(keys, ["id", "type", "kind"], "{}", s.id);
        }
        // No agent id appears outside its own node: nothing says who sent a report.
        for a in &s.agents {
            assert_eq!(
                text.matches(&format!("\"{}\"", a.id)).count(),
                1,
                "{}",
                s.id
            );
        }
    }
    let legend = renderer().legend(Condition::NoProvenance);
    assert!(
        !legend.contains("reliability"),
        "the legend drops the field too"
    );
}

#[test]
fn no_confidence_has_no_report_confidence_and_keeps_relation_confidence() {
    for (s, _, v) in json(Condition::NoConfidence) {
        for n in of_type(&v, "nodes", "evidence") {
            assert!(n.get("confidence").is_none(), "{}", s.id);
            assert!(n.get("timestamp").is_some());
        }
        let relations = of_type(&v, "links", "relation");
        assert_eq!(relations.len(), s.relations.len());
        assert!(relations.iter().all(|l| l.get("confidence").is_some()));
        for a in of_type(&v, "nodes", "agent") {
            assert!(a.get("reliability").is_some());
        }
    }
}

#[test]
fn graph_without_relations_deletes_only_the_relations() {
    let full = json(Condition::FullGraph);
    let gwr = json(Condition::GraphWithoutRelations);
    for ((s, _, f), (_, _, g)) in full.iter().zip(&gwr) {
        assert!(of_type(g, "links", "relation").is_empty());
        assert_eq!(f["nodes"], g["nodes"], "{}", s.id);
        let kept: Vec<Value> = arr(f, "links")
            .iter()
            .filter(|l| l["type"] != "relation")
            .cloned()
            .collect();
        assert_eq!(&kept, arr(g, "links"));
        let text = g.to_string();
        assert!(!text.contains("adjacent_to") && !text.contains("measures"));
    }
}

/// A fact as (subject id, attribute, value), values as JSON would print them.
type Fact = (String, String, String);

/// A unit enum's serde name.
fn plain(v: &impl serde::Serialize) -> String {
    serde_json::to_value(v)
        .unwrap()
        .as_str()
        .unwrap()
        .to_string()
}

fn num(x: f64) -> String {
    Value::from(x).to_string()
}

/// What every condition must carry at `step`, straight from the scenario record, minus
/// what the condition's ablation deletes.
fn expected_facts(s: &Scenario, step: usize, c: Condition) -> BTreeSet<Fact> {
    use super::condition::Content;
    let mut out = BTreeSet::new();
    let mut add = |a: &str, k: &str, v: String| {
        out.insert((a.to_string(), k.to_string(), v));
    };

    for a in &s.agents {
        add(a.id.as_str(), "kind", plain(&a.kind));
        if c.keeps(Content::Reliability) {
            add(a.id.as_str(), "reliability", num(a.metadata.reliability));
        }
    }
    for o in &s.objects {
        add(o.id.as_str(), "label", o.label.clone());
        add(o.id.as_str(), "category", plain(&o.category));
    }
    for o in &s.arrival_order()[..step] {
        let id = o.id.as_str();
        if c.keeps(Content::Provenance) {
            add(id, "reported_by", o.agent_id.to_string());
        }
        add(id, "subject", o.subject_id.to_string());
        add(id, "predicate", plain(&o.predicate));
        add(id, "value", plain(&o.value));
        if c.keeps(Content::Confidence) {
            add(id, "confidence", num(o.confidence));
        }
        if c.keeps(Content::Timestamps) {
            add(id, "timestamp", o.timestamp.clone());
            add(id, "arrival_time", o.metadata.arrival_time.clone());
        }
        add(id, "state_epoch", o.metadata.state_epoch.to_string());
        let sup: Vec<&str> = o
            .metadata
            .supersedes_evidence_ids
            .iter()
            .map(|e| e.as_str())
            .collect();
        add(id, "supersedes", sup.join(","));
    }
    if c.keeps(Content::Relations) {
        for r in &s.relations {
            let rel = format!("{} {} {}", r.source_id, plain(&r.predicate), r.target_id);
            add(&rel, "confidence", num(r.confidence));
            let ids: Vec<&str> = r.evidence_ids.iter().map(|e| e.as_str()).collect();
            add(&rel, "evidence_ids", ids.join(","));
        }
    }
    out
}

fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Array(items) => items.iter().map(text_of).collect::<Vec<_>>().join(","),
        other => other.to_string(),
    }
}

/// The facts a body states, read back from its own format.
fn stated_facts(c: Condition, data: &str) -> BTreeSet<Fact> {
    let mut out = BTreeSet::new();
    let mut add = |a: &str, k: &str, v: String| {
        out.insert((a.to_string(), k.to_string(), v));
    };
    let rename = |k: &str| {
        match k {
            "agent_kind" => "kind",
            "entity_label" => "label",
            "entity_category" => "category",
            "reported_by_agent" => "reported_by",
            "subject_entity" => "subject",
            "supersedes_evidence_ids" => "supersedes",
            other => other,
        }
        .to_string()
    };
    match c.family() {
        super::Family::Graph | super::Family::Flat => {
            let v: Value = serde_json::from_str(data).unwrap();
            let (records, links) = if c.family() == super::Family::Graph {
                (arr(&v, "nodes").clone(), arr(&v, "links").clone())
            } else {
                (arr(&v, "records").clone(), Vec::new())
            };
            for r in &records {
                let obj = r.as_object().unwrap();
                if r["record"] == "relation" {
                    let rel = format!(
                        "{} {} {}",
                        text_of(&r["subject_entity"]),
                        text_of(&r["relation"]),
                        text_of(&r["object_entity"])
                    );
                    add(&rel, "confidence", text_of(&r["confidence"]));
                    add(&rel, "evidence_ids", text_of(&r["evidence_ids"]));
                    continue;
                }
                let id = ["id", "agent_id", "entity_id", "evidence_id"]
                    .iter()
                    .find_map(|k| obj.get(*k))
                    .map(text_of)
                    .unwrap();
                for (k, val) in obj {
                    if ![
                        "id",
                        "type",
                        "record",
                        "agent_id",
                        "entity_id",
                        "evidence_id",
                    ]
                    .contains(&k.as_str())
                    {
                        add(&id, &rename(k), text_of(val));
                    }
                }
            }
            for l in &links {
                let (src, dst) = (text_of(&l["source"]), text_of(&l["target"]));
                match l["type"].as_str().unwrap() {
                    "reported" => add(&dst, "reported_by", src),
                    "about" => add(&src, "subject", dst),
                    _ => {
                        let rel = format!("{src} {} {dst}", text_of(&l["predicate"]));
                        add(&rel, "confidence", text_of(&l["confidence"]));
                        add(&rel, "evidence_ids", text_of(&l["evidence_ids"]));
                    }
                }
            }
        }
        super::Family::CanonicalJson => {
            let v: Value = serde_json::from_str(data).unwrap();
            for t in arr(&v, "triples") {
                let t = t.as_array().unwrap();
                if t.len() == 5 {
                    let rel = format!("{} {} {}", text_of(&t[0]), text_of(&t[1]), text_of(&t[2]));
                    add(&rel, "confidence", text_of(&t[3]));
                    add(&rel, "evidence_ids", text_of(&t[4]));
                } else {
                    assert_eq!(t.len(), 3);
                    add(&text_of(&t[0]), &text_of(&t[1]), text_of(&t[2]));
                }
            }
        }
        super::Family::StructuredList => {
            let mut item: Vec<(String, String)> = Vec::new();
            let mut flush = |item: &mut Vec<(String, String)>| {
                if item.is_empty() {
                    return;
                }
                let get = |k: &str| item.iter().find(|(x, _)| x == k).map(|(_, v)| v.clone());
                let none_empty = |v: String| {
                    if v == "none" {
                        String::new()
                    } else {
                        v.replace(", ", ",")
                    }
                };
                if let Some(relation) = get("relation") {
                    let rel = format!(
                        "{} {relation} {}",
                        get("subject").unwrap(),
                        get("object").unwrap()
                    );
                    add(&rel, "confidence", get("confidence").unwrap());
                    add(
                        &rel,
                        "evidence_ids",
                        none_empty(get("evidence_ids").unwrap()),
                    );
                } else {
                    let id = get("id").unwrap();
                    for (k, v) in item.iter().skip(1) {
                        let v = if k == "supersedes_evidence_ids" {
                            none_empty(v.clone())
                        } else {
                            v.clone()
                        };
                        add(&id, &rename(k), v);
                    }
                }
                item.clear();
            };
            for line in data.lines() {
                if let Some(rest) = line.strip_prefix("- ").or_else(|| line.strip_prefix("  ")) {
                    if line.starts_with("- ") {
                        flush(&mut item);
                    }
                    let (k, v) = rest.split_once(": ").unwrap();
                    item.push((k.to_string(), v.to_string()));
                } else {
                    flush(&mut item);
                }
            }
            flush(&mut item);
        }
    }
    out
}

/// Every condition states exactly the facts of the record that have arrived, minus
/// its ablation: the same information in nine serializations.
#[test]
fn every_condition_states_exactly_the_arrived_facts_minus_its_ablation() {
    for c in Condition::ALL {
        for (s, step, data) in data_parts(c) {
            assert_eq!(
                stated_facts(c, &data),
                expected_facts(s, step, c),
                "{c} {} step {step}",
                s.id
            );
        }
    }
}

fn mentions(text: &str, id: &str) -> bool {
    let is_id_char = |c: char| c.is_ascii_alphanumeric() || c == '-' || c == '_';
    text.match_indices(id).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + id.len()..].chars().next();
        !before.is_some_and(is_id_char) && !after.is_some_and(is_id_char)
    })
}

#[test]
fn no_prompt_mentions_evidence_that_has_not_arrived() {
    let r = renderer();
    let mut checked = 0;
    for s in suite() {
        let order = s.arrival_order();
        for c in Condition::ALL {
            for task in Task::ALL {
                r.prompts(s, c, task, &mut |p: Prompt| {
                    for (i, o) in order.iter().enumerate() {
                        let arrived = i < p.step;
                        assert_eq!(
                            mentions(&p.text, o.id.as_str()),
                            arrived,
                            "{} {c} {task} step {}: {}",
                            s.id,
                            p.step,
                            o.id
                        );
                    }
                    checked += 1;
                });
            }
        }
    }
    assert_eq!(checked, 9 * (1150 + 3 * 350));
}

#[test]
fn bodies_do_not_depend_on_the_reference_labels() {
    let r = renderer();
    for s in suite().iter().step_by(11) {
        let mut blind = s.clone();
        blind.evaluation.belief_trajectory.reverse();
        blind.evaluation.evidence.clear();
        blind.evaluation.beliefs.reference_distribution.anomalous = 0.123456;
        blind
            .evaluation
            .contradictions
            .involved_evidence_ids
            .clear();
        blind.metadata.counterfactual_pair_id = Some("leak".into());
        for c in Condition::ALL {
            for step in 1..=s.observations.len() {
                let body = r.body(s, c, step);
                assert_eq!(body, r.body(&blind, c, step), "{} {c}", s.id);
                for word in [
                    "reference_",
                    "probability_direction",
                    "admissible",
                    "expected_update",
                    "leak",
                    "evaluation-v1",
                ] {
                    assert!(!body.contains(word), "{} {c}: {word}", s.id);
                }
            }
        }
    }
}

/// The fact sets above cannot see a repeated record; the counts can.
#[test]
fn every_record_appears_once() {
    let fixed = |s: &Scenario| s.agents.len() + s.objects.len();
    for (s, step, v) in json(Condition::FullGraph) {
        assert_eq!(arr(&v, "nodes").len(), fixed(s) + step, "{}", s.id);
        assert_eq!(
            arr(&v, "links").len(),
            2 * step + s.relations.len(),
            "{}",
            s.id
        );
    }
    for (s, step, v) in json(Condition::FlatEdgeRemoved) {
        let n = fixed(s) + step + s.relations.len();
        assert_eq!(arr(&v, "records").len(), n, "{}", s.id);
    }
    for (s, step, v) in json(Condition::CanonicalJson) {
        // Two facts per agent and entity, nine per report, one line per relation.
        let n = 2 * fixed(s) + 9 * step + s.relations.len();
        assert_eq!(arr(&v, "triples").len(), n, "{}", s.id);
    }
    for (s, step, text) in data_parts(Condition::StructuredList) {
        let items = text.lines().filter(|l| l.starts_with("- ")).count();
        assert_eq!(items, fixed(s) + step + s.relations.len(), "{}", s.id);
    }
}

#[test]
fn request_ids_are_unique_and_counts_match_the_suite() {
    let r = renderer();
    let mut ids = BTreeSet::new();
    let mut per_task: BTreeMap<Task, usize> = BTreeMap::new();
    for s in suite() {
        for c in Condition::ALL {
            for task in Task::ALL {
                r.prompts(s, c, task, &mut |p: Prompt| {
                    assert!(
                        ids.insert(p.request_id.clone()),
                        "duplicate {}",
                        p.request_id
                    );
                    *per_task.entry(task).or_default() += 1;
                });
            }
        }
    }
    assert_eq!(per_task[&Task::Belief], 9 * 1150);
    for t in [Task::Contradiction, Task::Action, Task::Explanation] {
        assert_eq!(per_task[&t], 9 * 350);
    }
}

/// The hashes the manifest reports. Any change to a template, a legend or a renderer
/// moves one of them: update them deliberately, with the prompts version.
#[test]
fn manifest_hashes_are_pinned() {
    let r = renderer();
    let mut files = Vec::new();
    let mut conditions = Vec::new();
    for c in Condition::ALL {
        let mut lines = String::new();
        for task in Task::ALL {
            let e = render_file(r, suite(), c, task).entry();
            lines.push_str(&format!("{}  {}\n", e.sha256, e.path));
            files.push(e);
        }
        conditions.push((c.name(), crate::digest::sha256_hex(lines.as_bytes())));
    }
    let m = manifest::manifest(r, files);
    assert_eq!(m.total_prompts, 9 * (1150 + 3 * 350));
    let templates: Vec<(&str, String)> = m
        .templates
        .iter()
        .map(|t| (t.path, t.sha256.clone()))
        .collect();
    let pinned = |v: &[(&'static str, &'static str)]| -> Vec<(&'static str, String)> {
        v.iter().map(|(p, h)| (*p, h.to_string())).collect()
    };
    let ok = templates == pinned(&PINNED_TEMPLATES)
        && conditions == pinned(&PINNED_CONDITIONS)
        && m.bundle_sha256 == PINNED_BUNDLE;
    if !ok {
        // Printed so that a deliberate change can be pinned by pasting.
        let list = |v: &[(&str, String)]| -> String {
            v.iter()
                .map(|(p, h)| format!("    (\"{p}\", \"{h}\"),\n"))
                .collect()
        };
        panic!(
            "prompt hashes moved; if deliberate, bump PROMPTS_VERSION or the file versions and pin:\n\
             const PINNED_TEMPLATES: [(&str, &str); {}] = [\n{}];\n\
             const PINNED_CONDITIONS: [(&str, &str); 9] = [\n{}];\n\
             const PINNED_BUNDLE: &str = \"{}\";",
            templates.len(),
            list(&templates),
            list(&conditions),
            m.bundle_sha256
        );
    }
}

const PINNED_TEMPLATES: [(&str, &str); 14] = [
    (
        "prompts/legend/evidence.v1.txt",
        "d363c4fd2d34d275dc73e4b57321c9d079c0a6264d643d29e0a55896f7cc44b1",
    ),
    (
        "prompts/legend/graph.v1.txt",
        "8a8712b59dfc472f555dce1f4bc4f2f770da9b0020c37bd987eec1d7e545bab3",
    ),
    (
        "prompts/legend/flat.v1.txt",
        "f497bd41d5d693af5d2b708a79a404ff9899acaf076dcae8e8bd8d5994a66499",
    ),
    (
        "prompts/legend/canonical_json.v1.txt",
        "1a3235deefcd5d79c79c134d47bf3018ccefeae469186fd781d9bdee86f05088",
    ),
    (
        "prompts/legend/structured_list.v1.txt",
        "fa52257fc82733481051fc7651f990d089bb6c58093451bef920543a8b138861",
    ),
    (
        "prompts/tasks/preamble.v1.txt",
        "95c27392a7c1b5f9ad68e75a82b664a00678fe1c527b24b3b8ceb674343d4a87",
    ),
    (
        "prompts/tasks/belief.v1.txt",
        "a959585194f092018c001fe4af8a1c3db7ef6cc8ec25a315e6c8f62704fffb82",
    ),
    (
        "prompts/tasks/contradiction.v1.txt",
        "2146a3adf266451b09b9c801b77a4716b4f4993ab79be3e8895aa9b599719f72",
    ),
    (
        "prompts/tasks/action.v1.txt",
        "6d6dc8b9091fd5d907e734d59bc89b9826442bf6b281982f7dc4d1bc8863b0b0",
    ),
    (
        "prompts/tasks/explanation.v1.txt",
        "b5147e2b2a1d3edb7131cb4c3f68600904da0b53c880001da90f8bbff340e4a8",
    ),
    (
        "prompts/contracts/belief.v1.schema.json",
        "9919a868300099c47f9659e3e61fd79950b0a654d8c660287bbb84264c8bab9a",
    ),
    (
        "prompts/contracts/contradiction.v1.schema.json",
        "5373e151f628b09c9db076dc2df84ee742952015ce4d43e6bf26c7dfee6ea53b",
    ),
    (
        "prompts/contracts/action.v1.schema.json",
        "93355f941a315cad8b1962935ff9c9ccaf63bd49c832bcafa7dc87635248bc46",
    ),
    (
        "prompts/contracts/explanation.v1.schema.json",
        "0f7b9cfedf9ac3920fae58aa2431210c2ff1a7fe383d2c7e9476377fb36bc5d1",
    ),
];
const PINNED_CONDITIONS: [(&str, &str); 9] = [
    (
        "canonical_json",
        "586fe6aecb621b9203fd764580140f8ecb24c0ddfd3ec20a22ba4de6bcc0d6f6",
    ),
    (
        "structured_list",
        "d5a36ddb10670cd054121ad2a051ad67c544089184e50c7098aa7047c7d3095b",
    ),
    (
        "graph_without_relations",
        "1aa890258135578ebe48e7d1bcd59ea71d2cf65b2b018910a15112716b43e0e7",
    ),
    (
        "full_graph",
        "5095c3ede74421d2d03fd99e00793938510ba31920ae6267e7421f7db012d20a",
    ),
    (
        "flat_edge_removed",
        "b7eefeb5ee528d886172577fd9462fafd176bfd32fc6c1bd081785cb684787f7",
    ),
    (
        "no_provenance",
        "ced2ef4f73d088b52868fd5db27bcf318d035909fa3bc292ec8a680704ea9dc7",
    ),
    (
        "no_timestamps",
        "5027d782c62de1399ce78aeb9a6fca614c3ab0dbcee4aeb18f38a3167360ab98",
    ),
    (
        "no_confidence",
        "075084ac049e44a7330acb8ba129cd2ea48b84c6caaec0a31aa662a2109d38a7",
    ),
    (
        "shuffled_full_graph",
        "6bd2e3de6fd7f6697d8a39acff87b72f1380ab4e2ec857bf7fbefcb50948a2ae",
    ),
];
/// What `runner render` (all conditions, all tasks) prints as the bundle sha256.
const PINNED_BUNDLE: &str = "beaf1b39f9bf108f5db47f7a419b25bc164d614b127f9f7e46d602a7604a8815";
