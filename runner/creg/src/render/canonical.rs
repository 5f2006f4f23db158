//! canonical_json: every fact as a compact JSON triple [subject, predicate, object],
//! one per line; semantic relations as [subject, relation, object, confidence,
//! evidence_ids]. The same facts in the shortest form.

use crate::render::facts::Facts;
use crate::render::layout::{Item, Layout, Section};
use crate::render::pretty;

pub fn layout(f: &Facts, legend: &str) -> Layout {
    let mut triples = Vec::new();
    for a in &f.agents {
        triples.push(triple(0, a.id, "kind", &quoted(a.kind)));
        triples.push(triple(0, a.id, "reliability", &a.reliability));
    }
    for e in &f.entities {
        triples.push(triple(0, e.id, "label", &quoted(e.label)));
        triples.push(triple(0, e.id, "category", &quoted(e.category)));
    }
    for ev in &f.evidence {
        let t = |p: &str, o: &str| triple(ev.step, ev.id, p, o);
        triples.push(t("reported_by", &quoted(ev.agent)));
        triples.push(t("subject", &quoted(ev.subject)));
        triples.push(t("predicate", &quoted(ev.predicate)));
        triples.push(t("value", &quoted(ev.value)));
        triples.push(t("confidence", &ev.confidence));
        triples.push(t("timestamp", &quoted(ev.timestamp)));
        triples.push(t("arrival_time", &quoted(ev.arrival_time)));
        triples.push(t("state_epoch", &ev.state_epoch.to_string()));
        triples.push(t(
            "supersedes",
            &ids(ev.supersedes.iter().map(|i| i.as_str())),
        ));
    }
    for r in &f.relations {
        let mut text = String::from("[");
        pretty::string(&mut text, r.source);
        text.push(',');
        pretty::string(&mut text, r.predicate);
        text.push(',');
        pretty::string(&mut text, r.target);
        text.push(',');
        text.push_str(&r.confidence);
        text.push(',');
        text.push_str(&ids(r.evidence_ids.iter().map(|i| i.as_str())));
        text.push(']');
        triples.push(Item { step: r.step, text });
    }
    let mut l = Layout::default();
    l.text(legend);
    l.text("{\"target\":\"gauge-1.condition\",\"states\":[\"anomalous\",\"normal\"],\"triples\":");
    l.section(Section {
        open: "[\n".into(),
        sep: ",\n",
        close: "\n]".into(),
        empty: "[]".into(),
        items: triples,
    });
    l.text("}");
    l
}

fn quoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    pretty::string(&mut out, s);
    out
}

fn ids<'a>(items: impl Iterator<Item = &'a str>) -> String {
    let mut out = String::from("[");
    for (n, s) in items.enumerate() {
        if n > 0 {
            out.push(',');
        }
        pretty::string(&mut out, s);
    }
    out.push(']');
    out
}

/// `object` is already JSON text.
fn triple(step: usize, subject: &str, predicate: &str, object: &str) -> Item {
    let mut text = String::with_capacity(48);
    text.push('[');
    pretty::string(&mut text, subject);
    text.push(',');
    pretty::string(&mut text, predicate);
    text.push(',');
    text.push_str(object);
    text.push(']');
    Item { step, text }
}
