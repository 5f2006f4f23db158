//! The acceptance tests of the prompts: lengths, exact controls, ablations, no
//! leakage of later evidence or reference labels, determinism (pinned hashes).
//! This file holds the shared fixtures; each child module holds one group of checks.

use crate::frozen::frozen_suite;
use crate::record::Scenario;
use crate::render::manifest::{self, render_file};
use crate::render::{stats, Condition, Prompt, Renderer, Task};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::OnceLock;

mod controls;
mod facts;
mod prompts;

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
