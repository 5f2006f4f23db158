//! Every condition states exactly the arrived facts, minus what its ablation removes,
//! read back from its own format.

use crate::render::tests::*;

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
    use crate::render::condition::Content;
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
        crate::render::Family::Graph | crate::render::Family::Flat => {
            let v: Value = serde_json::from_str(data).unwrap();
            let (records, links) = if c.family() == crate::render::Family::Graph {
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
        crate::render::Family::CanonicalJson => {
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
        crate::render::Family::StructuredList => {
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
