//! structured_list: the records as an indented list, one field per line, grouped by
//! record type; information-matched to the graph (same fields, no JSON syntax).

use crate::render::facts::Facts;
use crate::render::layout::{Item, Layout, Section};

pub fn layout(f: &Facts, legend: &str) -> Layout {
    let agents = f
        .agents
        .iter()
        .map(|a| {
            item(
                0,
                &[
                    ("id", a.id),
                    ("kind", a.kind),
                    ("reliability", &a.reliability),
                ],
            )
        })
        .collect();
    let entities = f
        .entities
        .iter()
        .map(|e| {
            item(
                0,
                &[("id", e.id), ("label", e.label), ("category", e.category)],
            )
        })
        .collect();
    let evidence = f
        .evidence
        .iter()
        .map(|ev| {
            let epoch = ev.state_epoch.to_string();
            let supersedes = joined(ev.supersedes.iter().map(|i| i.as_str()));
            item(
                ev.step,
                &[
                    ("id", ev.id),
                    ("reported_by", ev.agent),
                    ("subject", ev.subject),
                    ("predicate", ev.predicate),
                    ("value", ev.value),
                    ("confidence", &ev.confidence),
                    ("timestamp", ev.timestamp),
                    ("arrival_time", ev.arrival_time),
                    ("state_epoch", &epoch),
                    ("supersedes_evidence_ids", &supersedes),
                ],
            )
        })
        .collect();
    let relations = f
        .relations
        .iter()
        .map(|r| {
            let ids = joined(r.evidence_ids.iter().map(|i| i.as_str()));
            item(
                r.step,
                &[
                    ("subject", r.source),
                    ("relation", r.predicate),
                    ("object", r.target),
                    ("confidence", &r.confidence),
                    ("evidence_ids", &ids),
                ],
            )
        })
        .collect();
    let mut l = Layout::default();
    l.text(legend);
    l.text("Target: gauge-1.condition (states: anomalous, normal)\n");
    l.section(group("Agents", agents, "\n"));
    l.section(group("Entities", entities, "\n"));
    l.section(group("Evidence", evidence, "\n"));
    l.section(group("Relations", relations, ""));
    l
}

fn group(title: &str, items: Vec<Item>, after: &str) -> Section {
    Section {
        open: format!("{title}:\n"),
        sep: "\n",
        close: after.into(),
        empty: format!("{title}: none{after}"),
        items,
    }
}

fn joined<'a>(items: impl Iterator<Item = &'a str>) -> String {
    let v: Vec<&str> = items.collect();
    if v.is_empty() {
        "none".to_string()
    } else {
        v.join(", ")
    }
}

/// `- first: value` then `  key: value` lines.
fn item(step: usize, fields: &[(&str, &str)]) -> Item {
    let mut text = String::with_capacity(256);
    for (n, (k, v)) in fields.iter().enumerate() {
        if n > 0 {
            text.push('\n');
        }
        text.push_str(if n == 0 { "- " } else { "  " });
        text.push_str(k);
        text.push_str(": ");
        text.push_str(v);
    }
    Item { step, text }
}
