//! The graph serializations: node-link JSON (agents, entities and evidence as nodes;
//! reported, about and relation links), shared by full_graph, its four deletion
//! ablations and the shuffled control.

use crate::render::condition::{Condition, Content};
use crate::render::facts::{AgentFacts, EntityFacts, EvidenceFacts, Facts, RelationFacts};
use crate::render::layout::{Item, Layout, Section};
use crate::render::pretty::{self, V};

/// Fixed so that the shuffled control is reproducible; mixed with the scenario id.
pub const SHUFFLE_SEED: u64 = 20260725;

const RECORD_INDENT: usize = 4;

pub fn layout(f: &Facts, c: Condition, legend: &str, scenario_id: &str) -> Layout {
    let mut nodes: Vec<Item> = f.agents.iter().map(|a| agent_node(a, c)).collect();
    nodes.extend(f.entities.iter().map(entity_node));
    let mut links = Vec::new();
    for ev in &f.evidence {
        nodes.push(evidence_node(ev, c));
        links.extend(evidence_links(ev, c));
    }
    if c.keeps(Content::Relations) {
        links.extend(f.relations.iter().map(relation_link));
    }

    let mut l = Layout::default();
    l.text(legend);
    l.text(concat!(
        "{\n",
        "  \"directed\": true,\n",
        "  \"multigraph\": true,\n",
        "  \"graph\": {\n",
        "    \"target\": \"gauge-1.condition\",\n",
        "    \"states\": [\n",
        "      \"anomalous\",\n",
        "      \"normal\"\n",
        "    ]\n",
        "  },\n",
    ));
    l.section(array("nodes", nodes, ",\n"));
    l.section(array("links", links, "\n"));
    l.text("}");
    // Records move within their own array (nodes among nodes, links among links), as
    // node-link JSON requires; the text stays the same characters up to order.
    if c == Condition::ShuffledFullGraph {
        l.shuffle(&format!("{SHUFFLE_SEED}\n{scenario_id}"));
    }
    l
}

fn agent_node(a: &AgentFacts, c: Condition) -> Item {
    let mut fields = vec![
        ("id", V::Str(a.id)),
        ("type", V::Str("agent")),
        ("kind", V::Str(a.kind)),
    ];
    if c.keeps(Content::Reliability) {
        fields.push(("reliability", V::Raw(&a.reliability)));
    }
    record(0, &fields)
}

fn entity_node(e: &EntityFacts) -> Item {
    record(
        0,
        &[
            ("id", V::Str(e.id)),
            ("type", V::Str("entity")),
            ("label", V::Str(e.label)),
            ("category", V::Str(e.category)),
        ],
    )
}

fn evidence_node(ev: &EvidenceFacts, c: Condition) -> Item {
    let epoch = ev.state_epoch.to_string();
    let mut fields = vec![
        ("id", V::Str(ev.id)),
        ("type", V::Str("evidence")),
        ("predicate", V::Str(ev.predicate)),
        ("value", V::Str(ev.value)),
    ];
    if c.keeps(Content::Confidence) {
        fields.push(("confidence", V::Raw(&ev.confidence)));
    }
    if c.keeps(Content::Timestamps) {
        fields.push(("timestamp", V::Str(ev.timestamp)));
        fields.push(("arrival_time", V::Str(ev.arrival_time)));
    }
    fields.push(("state_epoch", V::Raw(&epoch)));
    fields.push(("supersedes_evidence_ids", V::Ids(ev.supersedes)));
    record(ev.step, &fields)
}

/// The report's links: who reported it (unless provenance is deleted), what it is about.
fn evidence_links(ev: &EvidenceFacts, c: Condition) -> Vec<Item> {
    let mut links = Vec::with_capacity(2);
    if c.keeps(Content::Provenance) {
        links.push(record(
            ev.step,
            &[
                ("source", V::Str(ev.agent)),
                ("target", V::Str(ev.id)),
                ("type", V::Str("reported")),
            ],
        ));
    }
    links.push(record(
        ev.step,
        &[
            ("source", V::Str(ev.id)),
            ("target", V::Str(ev.subject)),
            ("type", V::Str("about")),
        ],
    ));
    links
}

fn relation_link(r: &RelationFacts) -> Item {
    record(
        r.step,
        &[
            ("source", V::Str(r.source)),
            ("target", V::Str(r.target)),
            ("type", V::Str("relation")),
            ("predicate", V::Str(r.predicate)),
            ("confidence", V::Raw(&r.confidence)),
            ("evidence_ids", V::Ids(r.evidence_ids)),
        ],
    )
}

fn record(step: usize, fields: &[(&str, V<'_>)]) -> Item {
    let mut text = String::with_capacity(256);
    pretty::object(&mut text, RECORD_INDENT, fields);
    Item { step, text }
}

/// A member `"name": [ ... ]` of the top-level object, followed by `after`.
pub fn array(name: &str, items: Vec<Item>, after: &str) -> Section {
    Section {
        open: format!("  \"{name}\": [\n"),
        sep: ",\n",
        close: format!("\n  ]{after}"),
        empty: format!("  \"{name}\": []{after}"),
        items,
    }
}
