//! The HTML shell every suite's `report.html` is built in: one self-contained page
//! (inline CSS, JavaScript and SVG; nothing from the network), sections in order with a
//! navigation bar, then the sample browser and its compressed data.

use super::browser::Browser;
use super::escape;
use std::fmt::Write as _;

const CSS: &str = include_str!("assets/report.css");
const JS: &str = include_str!("assets/report.js");

/// A link into the sample browser, filtered by the given (field, value) pairs.
pub fn samples_href(filters: &[(&str, &str)]) -> String {
    let query: Vec<String> = filters
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| format!("{}={}", percent(k), percent(v)))
        .collect();
    format!("#samples?{}", query.join("&"))
}

fn percent(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(b as char);
        } else {
            let _ = write!(out, "%{b:02X}");
        }
    }
    out
}

/// A page under construction: sections in order, then the sample browser.
pub struct Page {
    title: String,
    nav: Vec<(String, String)>,
    body: String,
    /// The suite's own rules, after the kit's.
    style: String,
}

impl Page {
    pub fn new(title: &str) -> Page {
        Page {
            title: title.to_string(),
            nav: Vec::new(),
            body: String::new(),
            style: String::new(),
        }
    }

    /// Adds CSS rules after the kit's own (a suite's table layout, say).
    pub fn style(&mut self, css: &str) {
        self.style.push_str(css);
    }

    pub fn section(&mut self, id: &str, heading: &str, html: &str) {
        self.nav.push((id.to_string(), heading.to_string()));
        let _ = writeln!(
            self.body,
            "<section id=\"{id}\"><h2>{}</h2>\n{html}</section>",
            escape(heading)
        );
    }

    /// The whole page; with a browser, its data and the sample browser's section.
    pub fn finish(mut self, browser: Option<&Browser>) -> std::io::Result<String> {
        if browser.is_some() {
            self.nav.push(("samples".into(), "Samples".into()));
        }
        let mut out = String::with_capacity(self.body.len() + 4096);
        let _ = write!(
            out,
            "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>{t}</title>\n<style>{CSS}{extra}</style></head>\n<body><header><h1>{t}</h1><nav>",
            t = escape(&self.title),
            extra = self.style
        );
        for (id, h) in &self.nav {
            let _ = write!(out, "<a href=\"#{id}\">{}</a>", escape(h));
        }
        out.push_str("</nav></header>\n<main>\n");
        out.push_str(&self.body);
        if let Some(b) = browser {
            let enc = b.encode()?;
            let _ = write!(
                out,
                "<section id=\"samples\"><h2>Samples</h2>\n<p class=\"note\">Every journaled sample: filter, then click a row for its prompt, raw output, parsed answer, reference and scores. Links in the tables above open the samples behind a figure.</p>\n<form id=\"filters\" onsubmit=\"return false\"></form>\n<p id=\"count\">loading {n} samples…</p>\n<div id=\"pager\"></div>\n<table id=\"sample-table\" class=\"samples\" data-group=\"{g}\"{no_group} data-category=\"{cat}\"><thead></thead><tbody></tbody></table>\n<div id=\"detail\"></div></section>\n</main>\n<script type=\"application/gzip-base64\" id=\"data-samples\">{}</script>\n<script type=\"application/gzip-base64\" id=\"data-details\">{}</script>\n<script type=\"application/gzip-base64\" id=\"data-shared\">{}</script>\n",
                enc.samples,
                enc.details,
                enc.shared,
                n = b.samples.len(),
                g = escape(&b.group_name),
                // No sample has a group (Probe): the browser shows no group column.
                no_group = if b.samples.iter().any(|s| !s.group.is_empty()) {
                    ""
                } else {
                    " data-no-group=\"1\""
                },
                cat = escape(&b.category_name)
            );
        } else {
            out.push_str("</main>\n");
        }
        let _ = write!(out, "<script>{JS}</script>\n</body></html>\n");
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::browser::{BrowserSample, Filters};

    fn sample(group: &str) -> BrowserSample {
        BrowserSample {
            model: "m".into(),
            condition: "c".into(),
            task: "t".into(),
            step: 0,
            seed: 1,
            scenario: "s".into(),
            group: group.into(),
            category: "correct".into(),
            filters: Filters::default(),
            why: None,
            metrics: Default::default(),
            request_id: "r".into(),
            text: String::new(),
            finish: String::new(),
            parsed: serde_json::Value::Null,
            reference: None,
        }
    }

    fn table_tag(groups: &[&str]) -> String {
        let browser = Browser {
            samples: groups.iter().map(|g| sample(g)).collect(),
            group_name: "regime".into(),
            ..Browser::default()
        };
        let html = Page::new("t").finish(Some(&browser)).unwrap();
        let start = html.find("<table id=\"sample-table\"").unwrap();
        html[start..start + html[start..].find('>').unwrap()].to_string()
    }

    #[test]
    fn the_group_column_is_dropped_only_when_no_sample_has_a_group() {
        assert!(table_tag(&["", ""]).contains("data-no-group=\"1\""));
        assert!(!table_tag(&["", "full_graph"]).contains("data-no-group"));
        assert!(table_tag(&["full_graph"]).contains("data-group=\"regime\""));
        assert!(JS.contains("dataset.noGroup"));
    }
}
