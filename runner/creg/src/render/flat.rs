//! flat_edge_removed: the full graph's content as one flat list of self-describing
//! records. Provenance and subject become fields of the evidence record and every
//! semantic relation becomes a record of its own, so the relation content stays while
//! the node/link structure goes.

use crate::render::facts::Facts;
use crate::render::graph::array;
use crate::render::layout::{Item, Layout};
use crate::render::pretty::{self, V};

const RECORD_INDENT: usize = 4;

pub fn layout(f: &Facts, legend: &str) -> Layout {
    let mut records = Vec::new();
    for a in &f.agents {
        records.push(record(
            0,
            &[
                ("record", V::Str("agent")),
                ("agent_id", V::Str(a.id)),
                ("agent_kind", V::Str(a.kind)),
                ("reliability", V::Raw(&a.reliability)),
            ],
        ));
    }
    for e in &f.entities {
        records.push(record(
            0,
            &[
                ("record", V::Str("entity")),
                ("entity_id", V::Str(e.id)),
                ("entity_label", V::Str(e.label)),
                ("entity_category", V::Str(e.category)),
            ],
        ));
    }
    for ev in &f.evidence {
        let epoch = ev.state_epoch.to_string();
        records.push(record(
            ev.step,
            &[
                ("record", V::Str("evidence")),
                ("evidence_id", V::Str(ev.id)),
                ("reported_by_agent", V::Str(ev.agent)),
                ("subject_entity", V::Str(ev.subject)),
                ("predicate", V::Str(ev.predicate)),
                ("value", V::Str(ev.value)),
                ("confidence", V::Raw(&ev.confidence)),
                ("timestamp", V::Str(ev.timestamp)),
                ("arrival_time", V::Str(ev.arrival_time)),
                ("state_epoch", V::Raw(&epoch)),
                ("supersedes_evidence_ids", V::Ids(ev.supersedes)),
            ],
        ));
    }
    for r in &f.relations {
        records.push(record(
            r.step,
            &[
                ("record", V::Str("relation")),
                ("subject_entity", V::Str(r.source)),
                ("relation", V::Str(r.predicate)),
                ("object_entity", V::Str(r.target)),
                ("confidence", V::Raw(&r.confidence)),
                ("evidence_ids", V::Ids(r.evidence_ids)),
            ],
        ));
    }
    let mut l = Layout::default();
    l.text(legend);
    l.text(concat!(
        "{\n",
        "  \"target\": \"gauge-1.condition\",\n",
        "  \"states\": [\n",
        "    \"anomalous\",\n",
        "    \"normal\"\n",
        "  ],\n",
    ));
    l.section(array("records", records, "\n"));
    l.text("}");
    l
}

fn record(step: usize, fields: &[(&str, V<'_>)]) -> Item {
    let mut text = String::with_capacity(320);
    pretty::object(&mut text, RECORD_INDENT, fields);
    Item { step, text }
}
