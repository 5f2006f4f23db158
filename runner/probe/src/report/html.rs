//! `report.html` for a Probe run, built from its scores JSON without knowing its
//! fields: figures of each system as tables, every breakdown (by hop, axis, domain,
//! point-in-time query, or any added later) as its own table, and the sample browser
//! over the journal. New keys in the scores JSON show up without a change here.

use crate::report::facets::{cell_filters, ProbeFacts};
use runner_core::journal::SampleRecord;
use runner_core::report::Facets;
use runner_core::report::{escape, write_atomic, Browser, Provenance};
use runner_core::report::{samples_href, Page};
use serde_json::{Map, Value};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

const PIT_NOTE: &str = "Exploratory: the point-in-time set is not human-validated.";

/// `{mean, lo, hi}` objects (estimates with intervals).
fn is_estimate(v: &Value) -> bool {
    v.get("mean").is_some_and(Value::is_number)
}

fn number(v: &Value) -> Option<String> {
    match v {
        Value::Number(n) if n.is_i64() || n.is_u64() => Some(n.to_string()),
        Value::Number(n) => n.as_f64().map(|f| format!("{f:.3}")),
        Value::Bool(b) => Some(b.to_string()),
        Value::String(s) => Some(s.clone()),
        Value::Null => Some("–".into()),
        _ => None,
    }
}

fn estimate_text(v: &Value, key: &str, href: Option<&str>) -> String {
    let f = |k: &str| v.get(k).and_then(Value::as_f64);
    match (f("mean"), f("lo"), f("hi")) {
        (Some(m), Some(lo), Some(hi)) => format!(
            "<td data-cell=\"{}\">{} <small>[{lo:.3}, {hi:.3}]</small></td>",
            escape(key),
            linked(&format!("{m:.3}"), href)
        ),
        (Some(m), _, _) => format!(
            "<td data-cell=\"{}\">{}</td>",
            escape(key),
            linked(&format!("{m:.3}"), href)
        ),
        _ => "<td>–</td>".into(),
    }
}

/// `text` (already escaped or plain figures) as a link to `href`, if any.
fn linked(text: &str, href: Option<&str>) -> String {
    match href {
        Some(h) => format!("<a href=\"{}\">{text}</a>", escape(h)),
        None => text.to_string(),
    }
}

/// The sample-browser link behind the figure at `key`, for a breakdown cell of a system.
fn cell_href(model: Option<&str>, key: &str) -> Option<String> {
    let filters = cell_filters(key)?;
    let mut all: Vec<(&str, &str)> = model.map(|m| ("model", m)).into_iter().collect();
    all.extend(filters.iter().map(|(k, v)| (*k, v.as_str())));
    Some(samples_href(&all))
}

/// Renders one object: its scalar and estimate fields in a table, then each nested
/// object under its own heading (a map of estimates or numbers as a two-column table).
/// `model` is the system the object belongs to, if any.
fn object(out: &mut String, o: &Map<String, Value>, path: &str, depth: usize, model: Option<&str>) {
    let mut scalars = String::new();
    for (k, v) in o {
        let key = format!("{path}/{k}");
        let href = cell_href(model, &key);
        if is_estimate(v) {
            let n = v
                .get("values")
                .or_else(|| v.get("n"))
                .and_then(number)
                .unwrap_or_default();
            let _ = write!(
                scalars,
                "<tr><th scope=\"row\">{}</th>{}<td>{}</td></tr>",
                escape(k),
                estimate_text(v, &key, href.as_deref()),
                escape(&n)
            );
        } else if let Some(text) = number(v) {
            let _ = write!(
                scalars,
                "<tr><th scope=\"row\">{}</th><td data-cell=\"{}\">{}</td><td></td></tr>",
                escape(k),
                escape(&key),
                linked(&escape(&text), href.as_deref())
            );
        }
    }
    if !scalars.is_empty() {
        let _ = write!(
            out,
            "<table class=\"figures\"><thead><tr><th>figure</th><th>value [95% CI]</th><th>n</th></tr></thead><tbody>{scalars}</tbody></table>"
        );
    }
    let level = (depth + 3).min(6);
    for (k, v) in o {
        let key = format!("{path}/{k}");
        match v {
            Value::Object(inner) if !is_estimate(v) && !inner.is_empty() => {
                let _ = write!(out, "<h{level}>{}</h{level}>", escape(k));
                if k == "pit" {
                    let _ = write!(out, "<p class=\"note\">{PIT_NOTE}</p>");
                }
                object(out, inner, &key, depth + 1, model);
            }
            Value::Array(items) if items.iter().any(Value::is_object) => {
                let _ = write!(out, "<h{level}>{}</h{level}>", escape(k));
                for (i, item) in items.iter().enumerate() {
                    if let Value::Object(inner) = item {
                        let name = ["system", "name", "label"]
                            .iter()
                            .find_map(|n| inner.get(*n).and_then(Value::as_str))
                            .map_or_else(|| format!("{k} {}", i + 1), String::from);
                        let _ = write!(
                            out,
                            "<h{l}>{} <small><a href=\"{}\">samples</a></small></h{l}>",
                            escape(&name),
                            escape(&samples_href(&[("model", &name)])),
                            l = (level + 1).min(6)
                        );
                        object(out, inner, &format!("{key}/{i}"), depth + 2, Some(&name));
                    }
                }
            }
            _ => {}
        }
    }
}

/// Writes `report.html` for a Probe run (or several) from its scores JSON and samples.
pub fn write_probe_html(
    dir: &Path,
    title: &str,
    scores: &Value,
    provenance: &Provenance,
    browser: Option<&Browser>,
) -> std::io::Result<PathBuf> {
    let mut page = Page::new(title);
    let mut prov = String::from("<dl class=\"provenance\">");
    for (k, v) in provenance.lines() {
        let _ = write!(prov, "<dt>{}</dt><dd>{}</dd>", escape(&k), escape(&v));
    }
    prov.push_str("</dl>");
    page.section("provenance", "Provenance", &prov);
    let mut body = String::new();
    match scores {
        Value::Object(o) => object(&mut body, o, "", 0, None),
        other => body.push_str(&format!("<pre>{}</pre>", escape(&other.to_string()))),
    }
    page.section("figures", "Figures", &body);
    let html = page.finish(browser)?;
    std::fs::create_dir_all(dir)?;
    write_atomic(dir, "report.html", html.as_bytes())
}

/// The Probe run's `report.html`: `report` is what its `scores.json` holds, `runs`
/// the journaled samples per system, `prompts` the plan's (request id, prompt text) pairs, `facts`
/// each question's facets and reference (the journal names only the item).
pub fn write_run(
    dir: &Path,
    title: &str,
    report: &impl serde::Serialize,
    runs: &[(String, Vec<SampleRecord>)],
    prompts: impl IntoIterator<Item = (String, String)>,
    facts: &ProbeFacts,
) -> std::io::Result<PathBuf> {
    let scores = serde_json::to_value(report).map_err(std::io::Error::other)?;
    let browser = probe_browser(runs, prompts, facts);
    let label = runs.first().map_or("", |(l, _)| l.as_str());
    let provenance = Provenance::new(None, None).with_runs_in(dir, label);
    write_probe_html(dir, title, &scores, &provenance, Some(&browser))
}

/// The sample browser over a Probe run's samples: each with its question's facets and
/// reference (stored once per question).
pub fn probe_browser(
    runs: &[(String, Vec<SampleRecord>)],
    prompts: impl IntoIterator<Item = (String, String)>,
    facts: &ProbeFacts,
) -> Browser {
    let mut browser = Browser {
        group_name: "group".into(),
        ..Browser::default()
    };
    for (model, records) in runs {
        for r in records {
            browser.push_generic(model, r);
            let Some(f) = facts.get(&r.scenario, &r.task) else {
                continue;
            };
            let key = format!("{}|{}", r.scenario, r.task);
            browser
                .references
                .entry(key.clone())
                .or_insert_with(|| f.reference.clone());
            if let Some(s) = browser.samples.last_mut() {
                s.facets = Facets(f.facets.clone());
                s.reference = Some(key);
            }
        }
    }
    browser.add_prompts(prompts);
    browser
}
