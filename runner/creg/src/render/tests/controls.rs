//! Lengths and the exact controls: shuffle, flat edge-removed, twins, each ablation.

use crate::render::tests::*;

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
