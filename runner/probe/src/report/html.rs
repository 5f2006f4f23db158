//! `report.html` for a Probe run (or several pooled), laid out as a results section: which
//! set was run, the headline table with a one-line definition of each measure, the
//! figure of accuracy by hop (asserted and derived), declining and marking figures,
//! tables by domain and design axis, the point-in-time queries, comparisons, then the
//! sample browser, which shows each item as its conversation.

use crate::place::Place;
use crate::report::facets::ProbeFacts;
use crate::report::tables::{self, Table, TextTable};
use crate::report::words::{set_kind, AXES, HEADLINE, PIT_NOTE};
use crate::report::{figures, tex};
use crate::score::compare::fmt_p;
use crate::score::{PitReport, ProbeReport, RunReport};
use runner_core::journal::SampleRecord;
use runner_core::report::{escape, write_atomic, Browser, Page, Provenance};
use runner_core::report::{BrowserSample, Filters};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Styles of this report beyond the kit's: wrapped column heads, two-line cells.
const STYLE: &str = "<style>\
.set{border-left:4px solid #d62728;background:#fff6f6;padding:6px 10px;margin:8px 0}\
.set.validated{border-color:#2ca02c;background:#f5fbf5}\
table.figures caption{text-align:left;font-weight:bold;padding:4px 0}\
table.figures.wide thead th{white-space:normal;max-width:120px;vertical-align:bottom}\
table.figures.wide td{text-align:center}\
dl.definitions{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;font-size:13px}\
dl.definitions dt{font-weight:bold}dl.definitions dd{margin:0}\
.figure-row{display:flex;flex-wrap:wrap;gap:8px 24px}figure.plot{margin:0}\
.table-grid{display:flex;flex-wrap:wrap;gap:0 32px;align-items:flex-start}\
.table-grid caption{white-space:nowrap}\
.conversation{border:1px solid #ddd;border-radius:4px;padding:6px 10px;margin:8px 0;max-width:900px}\
.conversation .session{color:#777;font-size:12px;margin-top:6px}\
.conversation .turn{background:#f1f3f6;border-radius:10px;padding:4px 10px;margin:3px 0;display:inline-block;max-width:85%}\
.conversation .turn.contradicting{background:#fff1d6;border:2px solid #ff7f0e}\
.conversation .mark{color:#b35900;font-size:12px;font-weight:bold;margin-left:6px}\
.conversation table{border-collapse:collapse;font-size:13px;margin-top:8px}\
.conversation td,.conversation th{border-bottom:1px solid #eee;padding:3px 8px;text-align:left;vertical-align:top}\
.conversation tr.current{background:#eef4ff}.conversation td{overflow-wrap:anywhere}.conversation td:first-child{min-width:220px}\
.outcome-correct,.outcome-abstain{color:#1a7f1a;font-weight:bold}\
.outcome-stale,.outcome-leak,.outcome-other,.outcome-over_abstain,.outcome-hallucinated,.outcome-no_answer,.outcome-empty,.outcome-wrong{color:#b3261e;font-weight:bold}\
</style>";

/// One table as HTML: each cell its estimate (linked to its samples), interval and n.
pub fn table_html(t: &Table) -> String {
    let wide = if t.columns.len() > 3 { " wide" } else { "" };
    let mut s = format!(
        "<table class=\"figures{wide}\" id=\"{}\"><caption>{}</caption><thead><tr><th>{}</th>",
        escape(&t.id),
        escape(&t.caption),
        escape(&t.corner)
    );
    for c in &t.columns {
        let _ = write!(s, "<th>{}</th>", escape(c));
    }
    s.push_str("</tr></thead><tbody>");
    for row in &t.rows {
        let _ = write!(s, "<tr><th scope=\"row\">{}</th>", escape(&row.label));
        for c in &row.cells {
            let key = escape(&c.key);
            match c.estimate {
                Some(e) => {
                    let mean = format!("{:.3}", e.mean);
                    let mean = match &c.href {
                        Some(h) => format!("<a href=\"{}\">{mean}</a>", escape(h)),
                        None => mean,
                    };
                    let _ = write!(
                        s,
                        "<td data-mean=\"{:.3}\" data-n=\"{}\" data-cell=\"{key}\">{mean}<br><small>[{:.3}, {:.3}] n {}</small></td>",
                        e.mean, e.clusters, e.lo, e.hi, e.clusters
                    );
                }
                None => {
                    let _ = write!(s, "<td class=\"na\" data-cell=\"{key}\">\u{2013}</td>");
                }
            }
        }
        s.push_str("</tr>");
    }
    s.push_str("</tbody></table>");
    s
}

/// A table of figures already written as text, each cell escaped.
pub fn text_table_html(t: &TextTable) -> String {
    let mut s = format!(
        "<table class=\"figures\" id=\"{}\"><thead><tr><th>{}</th>",
        escape(t.id),
        escape(t.corner)
    );
    for c in &t.columns {
        let _ = write!(s, "<th>{}</th>", escape(c));
    }
    s.push_str("</tr></thead><tbody>");
    for (label, cells) in &t.rows {
        let _ = write!(s, "<tr><th scope=\"row\">{}</th>", escape(label));
        for c in cells {
            let _ = write!(s, "<td>{}</td>", escape(c));
        }
        s.push_str("</tr>");
    }
    s.push_str("</tbody></table>");
    s
}

fn definitions(items: impl IntoIterator<Item = (String, String)>) -> String {
    let mut s = String::from("<dl class=\"definitions\">");
    for (k, v) in items {
        let _ = write!(s, "<dt>{}</dt><dd>{}</dd>", escape(&k), escape(&v));
    }
    s.push_str("</dl>");
    s
}

fn figure(svg: &str, id: &str) -> String {
    format!("<figure class=\"plot\" id=\"{id}\">{svg}</figure>")
}

/// The systems' core and PIT reports, by label.
pub(crate) type Split<'a> = (
    Vec<(&'a str, &'a ProbeReport)>,
    Vec<(&'a str, &'a PitReport)>,
);

pub(crate) fn split(report: &RunReport) -> Split<'_> {
    let core = report
        .systems
        .iter()
        .filter_map(|s| s.probe.as_ref().map(|p| (s.system.as_str(), p)))
        .collect();
    let pit = report
        .systems
        .iter()
        .filter_map(|s| s.pit.as_ref().map(|p| (s.system.as_str(), p)))
        .collect();
    (core, pit)
}

/// Every table of the report, in page order (what `tables.tex` holds).
pub fn all_tables(report: &RunReport) -> Vec<Table> {
    let (core, pit) = split(report);
    let mut out = Vec::new();
    if !core.is_empty() {
        out.push(tables::headline(&core));
        out.push(tables::hops(&core));
        out.push(tables::abstention_invalidation(&core));
        out.extend(tables::breakdowns(&core));
    }
    if !pit.is_empty() {
        out.push(tables::pit(&pit));
    }
    out
}

/// The line naming the set, at the top of the report.
fn set_line(report: &RunReport) -> String {
    match &report.set {
        Some(set) => format!(
            "<p class=\"set{}\" id=\"set\"><b>Set run: {}.</b> {}</p>",
            if set.human_validated {
                " validated"
            } else {
                ""
            },
            set_kind(set.kind),
            escape(&set.description)
        ),
        None => "<p class=\"set\" id=\"set\"><b>Set run: not recorded.</b></p>".into(),
    }
}

/// The page's sections, in order, before the provenance and the samples.
pub fn sections(report: &RunReport) -> Vec<(&'static str, &'static str, String)> {
    let (core, pit) = split(report);
    let mut out = Vec::new();
    let mut top = String::from(STYLE);
    top.push_str(&set_line(report));
    top.push_str("<p class=\"note\">Probe asks about a chain of facts a user stated in conversation (where I work, so which city, so which time zone, ...), then about the same chain after a final turn that contradicts one link. It measures whether the change is carried down the chain, how that decays with the number of inference steps (hops), asserted versus derived facts, update versus correction, and whether a model declines when nothing is left to answer with. Intervals: 95%, bootstrap clustered by item; n counts items (seeds of an item are pooled within it).</p>");
    if core.is_empty() {
        top.push_str("<p>No core items were run.</p>");
    } else {
        top.push_str(&table_html(&tables::headline(&core)));
        top.push_str(&definitions(
            HEADLINE
                .iter()
                .map(|m| (m.name.to_string(), m.definition.to_string())),
        ));
    }
    out.push(("headline", "Headline", top));
    if !core.is_empty() {
        let mut s = figure(&figures::hop_figure(&core), "fig-hop");
        s.push_str("<p class=\"note\">Asserted: the change hits the stated root fact, so every conclusion after it loses its basis (the right answer at hops 2 to 4 is \u{201c}unknown\u{201d}). Derived: the change overrides the asked conclusion itself (the right answer is the new value).</p>");
        s.push_str(&table_html(&tables::hops(&core)));
        let mut trend = String::from("<p class=\"note\">Depth trend of accuracy after the change (Cochran\u{2013}Armitage on item means): ");
        let mut parts = Vec::new();
        for (label, p) in &core {
            for (arm, t) in &p.depth_trend {
                parts.push(match t {
                    Some(t) => format!(
                        "{label}, {arm} facts: z = {:.2}, p = {}",
                        t.z,
                        fmt_p(t.p_value)
                    ),
                    None => format!("{label}, {arm} facts: undefined (no variation)"),
                });
            }
        }
        trend.push_str(&escape(&parts.join("; ")));
        trend.push_str(".</p>");
        s.push_str(&trend);
        out.push(("hops", "By hop depth", s));
        let mut s = String::from("<div class=\"figure-row\">");
        s.push_str(&figure(
            &figures::abstention_figure(&core),
            "fig-abstention",
        ));
        s.push_str(&figure(
            &figures::invalidation_figure(&core),
            "fig-invalidation",
        ));
        s.push_str(&figure(&figures::chain_figure(&core), "fig-chain"));
        s.push_str("</div>");
        s.push_str(&table_html(&tables::abstention_invalidation(&core)));
        out.push(("declining", "Declining and marking", s));
        let mut s = String::from("<div class=\"table-grid\">");
        for t in tables::breakdowns(&core) {
            s.push_str(&table_html(&t));
        }
        s.push_str("</div>");
        s.push_str(&definitions(
            AXES.iter().map(|(_, h, d)| (h.to_string(), d.to_string())),
        ));
        out.push(("breakdowns", "By domain and design axis", s));
    }
    if !pit.is_empty() {
        let mut s = format!("<p class=\"note\">{PIT_NOTE}</p>");
        s.push_str(&table_html(&tables::pit(&pit)));
        s.push_str(&text_table_html(&tables::pit_leaks(&pit)));
        out.push(("pit", "Point in time", s));
    }
    if let Some(t) = tables::comparisons(report) {
        let mut s = text_table_html(&t);
        let _ = write!(s, "<p class=\"note\">{}</p>", tables::COMPARISON_NOTE);
        out.push(("comparisons", "Comparisons", s));
    }
    out
}

/// Writes `report.html` and `tables.tex` for a Probe run (or several pooled).
pub fn write_probe_html(
    dir: &Path,
    title: &str,
    report: &RunReport,
    provenance: &Provenance,
    browser: Option<&Browser>,
) -> std::io::Result<PathBuf> {
    let mut page = Page::new(title);
    for (id, heading, body) in sections(report) {
        page.section(id, heading, &body);
    }
    let mut prov = String::from("<dl class=\"provenance\">");
    for (k, v) in provenance.lines() {
        let _ = write!(prov, "<dt>{}</dt><dd>{}</dd>", escape(&k), escape(&v));
    }
    prov.push_str("</dl>");
    page.section("provenance", "Provenance", &prov);
    let html = page.finish(browser)?;
    std::fs::create_dir_all(dir)?;
    let set = report
        .set
        .as_ref()
        .map_or("not recorded", |s| s.description.as_str());
    write_atomic(
        dir,
        "tables.tex",
        tex::document(set, &all_tables(report)).as_bytes(),
    )?;
    write_atomic(dir, "report.html", html.as_bytes())
}

/// The Probe run's `report.html`: `report` is what its `scores.json` holds, `runs`
/// the journaled samples per system, `prompts` the plan's (request id, prompt text) pairs, `facts`
/// each question's facets and reference (the journal names only the item).
pub fn write_run(
    dir: &Path,
    title: &str,
    report: &RunReport,
    runs: &[(String, Vec<SampleRecord>)],
    prompts: impl IntoIterator<Item = (String, String)>,
    facts: &ProbeFacts,
) -> std::io::Result<PathBuf> {
    let browser = probe_browser(runs, prompts, facts);
    let label = runs.first().map_or("", |(l, _)| l.as_str());
    let provenance = Provenance::new(None, None).with_runs_in(dir, label);
    write_probe_html(dir, title, report, &provenance, Some(&browser))
}

/// The sample browser over a Probe run's samples: each with its question's facets and
/// reference (stored once per question), whose conversation the browser shows.
pub fn probe_browser(
    runs: &[(String, Vec<SampleRecord>)],
    prompts: impl IntoIterator<Item = (String, String)>,
    facts: &ProbeFacts,
) -> Browser {
    let mut browser = Browser {
        group_name: "group".into(),
        category_name: "outcome class".into(),
        ..Browser::default()
    };
    for (model, records) in runs {
        for r in records {
            let place = Place::of(&r.facets).ok();
            let sample = BrowserSample {
                scenario: place.map_or_else(String::new, |p| p.item.to_string()),
                condition: place.map_or_else(String::new, |p| p.condition.to_string()),
                task: place.map_or_else(String::new, |p| p.label.to_string()),
                step: place.map_or(0, |p| p.index),
                ..BrowserSample::of(model, r)
            };
            browser.push_generic(sample, &r.scores);
            let Some((place, f)) = place.and_then(|p| Some((p, facts.get(p.item, p.label)?)))
            else {
                continue;
            };
            let key = format!("{}|{}", place.item, place.label);
            browser
                .references
                .entry(key.clone())
                .or_insert_with(|| f.reference.clone());
            if let Some(s) = browser.samples.last_mut() {
                s.filters = Filters(f.facets.clone());
                s.reference = Some(key);
            }
        }
    }
    browser.add_prompts(prompts);
    browser
}
