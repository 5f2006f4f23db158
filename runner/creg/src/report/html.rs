//! `report.html`: one self-contained page (inline CSS, JavaScript and SVG; nothing from
//! the network) with provenance, the tables, the plots and a browser over every sample.
//! The tables are plain HTML, painted before any script runs; the sample data follows
//! them compressed, and the script inflates it after the first paint.

use crate::record::Regime;
use crate::report::browser::STATED_BIN;
use crate::report::summary::CONTRAST_METRICS;
use crate::report::{
    contrast_answered, contrast_href, distinct_contrasts, escape, exploratory, failed,
    models_conditions, plots, series_label, Basis, ReportInputs, EXPLORATORY_NOTE, HEADLINE,
    HEADLINE_NOTE, LOG_LOSS_NOTE, REVISION,
};
use crate::score::aggregate::{Aggregate, ALL_TASKS, CONTRACT_FAILURE};
use runner_core::report::page::{samples_href, Page};
use runner_core::report::Browser;
use runner_core::stats::bootstrap::Estimate;
use std::fmt::Write as _;

/// The CREG page's table layout, after the kit's CSS: figure tables fit a 1280-pixel
/// window. Headers and labels wrap (a series label after an underscore too); a figure
/// keeps its mean and its interval each on one line, the interval going under the mean
/// where the column is narrow; text cells (reasons, excerpts) wrap anywhere. Only the
/// tables with a column per series (by regime) may scroll, in their own box. The
/// headline, with both contradiction columns, is packed tighter to fit.
const CSS: &str = "
table.figures th, table.figures td { white-space: normal; padding: 3px 6px; }
table.figures thead th { vertical-align: bottom; }
table.figures th[scope=row] { overflow-wrap: break-word; min-width: 10em; }
table.figures td .mean, table.figures td small { white-space: nowrap; }
table.figures td small.n { display: block; color: #555; white-space: normal; }
table.figures.text td, table.figures.text th { text-align: left; overflow-wrap: anywhere; }
table.figures.text code { white-space: pre-wrap; }
div.wide { overflow-x: auto; max-width: 100%; }
#headline table.figures th, #headline table.figures td { padding: 3px 3px; }
#headline table.figures th[scope=row] { min-width: 7em; }
";

/// Links into the sample browser: none where the page has no browser (a baseline's
/// report), so that no link points at a section the page lacks.
#[derive(Clone, Copy)]
struct Links(bool);

impl Links {
    fn to(self, filters: &[(&str, &str)]) -> Option<String> {
        self.0.then(|| samples_href(filters))
    }
}

/// `html` (already escaped) as a link to `href`, or as it is without one.
fn linked(html: &str, href: Option<&str>) -> String {
    match href {
        Some(h) => format!("<a href=\"{}\">{html}</a>", escape(h)),
        None => html.to_string(),
    }
}

/// A `mean [lo, hi]` cell linking to its samples; `key` marks it for checks.
fn estimate_td(e: Option<&Estimate>, key: &str, href: Option<&str>) -> String {
    match e {
        None => "<td class=\"na\">–</td>".to_string(),
        Some(e) => format!(
            "<td data-cell=\"{}\">{} <small>[{:.3}, {:.3}]</small></td>",
            escape(key),
            match href {
                Some(h) => format!("<a href=\"{}\" class=\"mean\">{:.3}</a>", escape(h), e.mean),
                None => format!("<span class=\"mean\">{:.3}</span>", e.mean),
            },
            e.lo,
            e.hi
        ),
    }
}

/// [`estimate_td`] with what the figure rests on under it: how many samples answered;
/// a dash where none did, since a figure of stand-ins only reads as a score.
fn estimate_td_on(
    e: Option<&Estimate>,
    basis: Option<Basis>,
    key: &str,
    href: Option<&str>,
) -> String {
    match basis {
        Some(b) if b.stand_ins_only() => format!(
            "<td class=\"na\" data-cell=\"{}\">–<small class=\"n\">{}</small></td>",
            escape(key),
            escape(&b.note())
        ),
        Some(b) if e.is_some() => {
            let td = estimate_td(e, key, href);
            let at = td.len() - "</td>".len();
            format!(
                "{}<small class=\"n\">{}</small></td>",
                &td[..at],
                escape(&b.note())
            )
        }
        _ => estimate_td(e, key, href),
    }
}

fn series_th(m: &str, c: &str, links: Links) -> String {
    format!(
        "<th scope=\"row\">{}</th>",
        linked(
            &escape(&series_label(m, c)).replace('_', "_<wbr>"),
            links.to(&[("model", m), ("condition", c)]).as_deref()
        )
    )
}

/// Provenance as a definition list.
fn provenance_html(inputs: &ReportInputs) -> String {
    let mut s = String::from("<dl class=\"provenance\">");
    for (k, v) in inputs.provenance.lines() {
        let _ = write!(s, "<dt>{}</dt><dd>{}</dd>", escape(&k), escape(&v));
    }
    s.push_str("</dl>");
    s
}

/// The CREG report page.
pub fn creg_page(a: &Aggregate, inputs: &ReportInputs) -> std::io::Result<String> {
    let rows = models_conditions(a);
    let links = Links(inputs.browser.is_some());
    let mut page = Page::new(inputs.title);
    page.style(CSS);
    page.section(
        "provenance",
        "Provenance",
        &provenance_section(a, inputs, &rows),
    );
    page.section(
        "headline",
        "Headline",
        &format!(
            "{}<p class=\"note\" id=\"headline-note\">{}</p>",
            figures_table(a, &rows, &HEADLINE, links),
            escape(HEADLINE_NOTE)
        ),
    );
    let revision: Vec<(&str, &str, &str)> =
        REVISION.iter().map(|(m, l)| ("belief", *m, *l)).collect();
    page.section(
        "revision",
        "Belief revision and calibration",
        &format!(
            "{}<p class=\"note\" id=\"log-loss-note\">{}</p>",
            figures_table(a, &rows, &revision, links),
            escape(LOG_LOSS_NOTE)
        ),
    );
    page.section("regimes", "By regime", &regimes_section(a, &rows, links));
    page.section(
        "contrasts",
        "Condition contrasts",
        &contrasts_section(a, links),
    );
    page.section("twins", "Counterfactual twins", &twins_section(a, links));
    page.section("reliability", "Reliability", &reliability_section(a, links));
    page.section(
        "contract",
        "Output contract",
        &contract_html(a, inputs.browser, links),
    );
    if let Some(failed) = failed::html(inputs.provenance) {
        page.section("failed", "Failed samples", &failed);
    }
    page.finish(inputs.browser)
}

/// Provenance, the sample count and how the intervals are computed, and the
/// exploratory note where it applies.
fn provenance_section(a: &Aggregate, inputs: &ReportInputs, rows: &[(String, String)]) -> String {
    let mut prov = provenance_html(inputs);
    let _ = write!(
        prov,
        "<p>{} scored samples. Means with 95% bootstrap intervals clustered by scenario (seeds nested, {} resamples).</p>",
        a.samples,
        crate::score::aggregate::RESAMPLES
    );
    if rows.iter().any(|(m, c)| exploratory(m, c)) {
        let _ = write!(prov, "<p class=\"note\">{}</p>", escape(EXPLORATORY_NOTE));
    }
    prov
}

/// A table of pooled estimates: rows are model / condition, columns (task, metric, label).
fn figures_table(
    a: &Aggregate,
    rows: &[(String, String)],
    cols: &[(&str, &str, &str)],
    links: Links,
) -> String {
    let mut s = String::from("<table class=\"figures\"><thead><tr><th>model / condition</th>");
    for (task, metric, label) in cols {
        let _ = write!(s, "<th title=\"{task} {metric}\">{}</th>", escape(label));
    }
    s.push_str("</tr></thead><tbody>");
    for (m, c) in rows {
        let _ = write!(s, "<tr>{}", series_th(m, c, links));
        for (task, metric, _) in cols {
            let key = format!("{m}|{c}|{task}|{metric}|");
            let href = if *task == ALL_TASKS {
                links.to(&[("model", m), ("condition", c)])
            } else {
                links.to(&[("model", m), ("condition", c), ("task", task)])
            };
            s.push_str(&estimate_td_on(
                a.pooled(m, c, task, metric),
                Basis::of(a, (m, c), task, metric, None),
                &key,
                href.as_deref(),
            ));
        }
        s.push_str("</tr>");
    }
    s.push_str("</tbody></table>");
    s
}

/// The per-regime bars, then a per-regime table for every headline metric that has
/// per-regime estimates.
fn regimes_section(a: &Aggregate, rows: &[(String, String)], links: Links) -> String {
    let mut regimes = plots::regime_bars(a, "belief", "top_state_accuracy", "top-state accuracy");
    for (task, metric, label) in HEADLINE {
        if let Some(table) = regime_table(a, rows, (task, metric, label), links) {
            regimes.push_str(&table);
        }
    }
    regimes
}

/// One metric by regime (rows) and model / condition (columns); `None` when no regime
/// has an estimate. A column per series: with many, the table scrolls in its own box.
fn regime_table(
    a: &Aggregate,
    rows: &[(String, String)],
    (task, metric, label): (&str, &str, &str),
    links: Links,
) -> Option<String> {
    let mut s = format!(
        "<h3>{} <small>({task} {metric})</small></h3><div class=\"wide\"><table class=\"figures\"><thead><tr><th>regime</th>",
        escape(label)
    );
    for (m, c) in rows {
        let _ = write!(s, "<th>{}</th>", escape(&series_label(m, c)));
    }
    s.push_str("</tr></thead><tbody>");
    let mut any = false;
    for regime in Regime::ALL {
        let r = regime.to_string();
        let _ = write!(
            s,
            "<tr><th scope=\"row\">{}</th>",
            linked(&r, links.to(&[("regime", &r)]).as_deref())
        );
        for (m, c) in rows {
            let e = a.find(m, c, task, metric, Some(regime));
            any |= e.is_some();
            let key = format!("{m}|{c}|{task}|{metric}|{r}");
            let href = if task == ALL_TASKS {
                links.to(&[("model", m), ("condition", c), ("regime", &r)])
            } else {
                links.to(&[
                    ("model", m),
                    ("condition", c),
                    ("task", task),
                    ("regime", &r),
                ])
            };
            let basis = Basis::of(a, (m, c), task, metric, Some(regime));
            s.push_str(&estimate_td_on(e, basis, &key, href.as_deref()));
        }
        s.push_str("</tr>");
    }
    s.push_str("</tbody></table></div>");
    any.then_some(s)
}

/// Contrasts, each once: forest plots and a table of the headline metrics' contrasts.
fn contrasts_section(a: &Aggregate, links: Links) -> String {
    let mut contrasts = String::from("<p class=\"note\">Each contrast once: a condition minus <code>full_graph</code>, and <code>full_graph</code> minus <code>graph_without_relations</code> (what relation content adds); paired by scenario.</p>");
    for (metric, _) in CONTRAST_METRICS {
        contrasts.push_str(&if links.0 {
            plots::forest_linked(a, "belief", metric)
        } else {
            plots::forest(a, "belief", metric)
        });
    }
    contrasts.push_str("<p class=\"note\">Each contrast is read beside the contract-failure contrast of the same pair: where the failure rates differ, the difference is one of output format as much as of reasoning.</p>");
    contrasts.push_str("<table class=\"figures\"><thead><tr><th>model</th><th>contrast</th><th>task</th><th>metric</th><th>difference [95% CI]</th><th>contract-fail difference, same pair [95% CI]</th><th>answered</th></tr></thead><tbody>");
    let difference =
        |d: &Estimate| format!("{:+.3} <small>[{:+.3}, {:+.3}]</small>", d.mean, d.lo, d.hi);
    for k in distinct_contrasts(a).into_iter().filter(|k| {
        HEADLINE
            .iter()
            .any(|(t, m, _)| *t == k.task && *m == k.metric)
    }) {
        let failure = a
            .companion(k, CONTRACT_FAILURE)
            .map_or_else(|| "–".to_string(), |f| difference(&f.difference));
        let _ = write!(
            contrasts,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"contract-contrast\">{failure}</td><td>{}</td></tr>",
            escape(&k.model),
            linked(
                &format!(
                    "{} − {}",
                    escape(&k.condition),
                    escape(&k.baseline_condition)
                ),
                links.0.then(|| contrast_href(k)).as_deref()
            ),
            k.task,
            k.metric,
            difference(&k.difference),
            contrast_answered(a, k),
        );
    }
    contrasts.push_str("</tbody></table>");
    contrasts
}

/// The relation-association twins per model / condition, beside the reference's gap.
fn twins_section(a: &Aggregate, links: Links) -> String {
    let mut s = String::from("<p class=\"note\">The relation-association twins share their observations byte for byte and differ in relation content only: both final answers right, and how far apart the stated probabilities are beside the reference's own gap.</p><table class=\"figures\"><thead><tr><th>model / condition</th><th>pairs</th><th>both twins correct</th><th>stated gap |p_A − p_B|</th><th>reference gap</th></tr></thead><tbody>");
    for t in &a.twins {
        let href = links.to(&[
            ("model", &t.model),
            ("condition", &t.condition),
            ("regime", "relation_association"),
        ]);
        let _ = write!(
            s,
            "<tr>{}<td>{}</td>{}{}<td>{:.3}</td></tr>",
            series_th(&t.model, &t.condition, links),
            t.both_correct.clusters,
            estimate_td(Some(&t.both_correct), "", href.as_deref()),
            estimate_td(Some(&t.stated_gap), "", href.as_deref()),
            t.reference_gap
        );
    }
    s.push_str("</tbody></table>");
    if a.twins.is_empty() {
        s.push_str("<p>No complete twin pair among these samples (both twins of a pair are needed; a run under <code>--limit</code> may hold none).</p>");
    }
    s
}

/// The reliability diagram and its bins as a table, each bin linking to its samples.
/// Where a series has no point, or the diagram none, a paragraph says why; where lines
/// coincide, the diagram's legend says so.
fn reliability_section(a: &Aggregate, links: Links) -> String {
    let mut rel = plots::reliability(a);
    let gaps = plots::reliability_gaps(a);
    if !gaps.is_empty() {
        let _ = write!(
            rel,
            "<p class=\"note\" id=\"reliability-empty\">{}</p>",
            escape(&gaps.join(" "))
        );
    }
    if a.reliability.is_empty() {
        return rel;
    }
    rel.push_str("<table class=\"figures\"><thead><tr><th>model / condition</th><th>stated p(anomalous) bin</th><th>samples</th><th>mean stated</th><th>mean reference</th></tr></thead><tbody>");
    for b in &a.reliability {
        let _ = write!(
            rel,
            "<tr><td>{}</td><td>{}</td><td data-bin=\"{}\">{}</td><td>{:.3}</td><td>{:.3}</td></tr>",
            escape(&series_label(&b.model, &b.condition)),
            escape(&b.label()),
            escape(&b.label()),
            linked(
                &b.count.to_string(),
                links
                    .to(&[
                        ("model", &b.model),
                        ("condition", &b.condition),
                        ("task", "belief"),
                        (STATED_BIN, &b.label()),
                    ])
                    .as_deref()
            ),
            b.mean_stated,
            b.mean_reference
        );
    }
    rel.push_str("</tbody></table>");
    rel
}

/// Category counts per model / condition / task, then the failure reasons with example
/// samples.
fn contract_html(a: &Aggregate, browser: Option<&Browser>, links: Links) -> String {
    let mut s = String::from("<table class=\"figures\"><thead><tr><th>model / condition / task</th><th>valid</th><th>repaired</th><th>invalid</th><th>truncated</th></tr></thead><tbody>");
    for (key, counts) in &a.categories {
        let parts: Vec<&str> = key.split(" / ").collect();
        let _ = write!(s, "<tr><th scope=\"row\">{}</th>", escape(key));
        for cat in ["valid", "repaired", "invalid", "truncated"] {
            let n = counts.get(cat).copied().unwrap_or(0);
            let href = match parts.as_slice() {
                [m, c, t] => links.to(&[
                    ("model", m),
                    ("condition", c),
                    ("task", t),
                    ("category", cat),
                ]),
                _ => links.to(&[("category", cat)]),
            };
            let _ = write!(s, "<td>{}</td>", linked(&n.to_string(), href.as_deref()));
        }
        s.push_str("</tr>");
    }
    s.push_str("</tbody></table>");
    let Some(b) = browser else {
        return s;
    };
    // Failure reasons, most frequent first, each with up to three example samples.
    let mut reasons: std::collections::BTreeMap<&str, Vec<usize>> = Default::default();
    for (i, x) in b.samples.iter().enumerate() {
        if let Some(why) = &x.why {
            reasons.entry(why).or_default().push(i);
        }
    }
    let mut reasons: Vec<(&str, Vec<usize>)> = reasons.into_iter().collect();
    reasons.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(b.0)));
    if reasons.is_empty() {
        s.push_str("<p>No contract failures.</p>");
        return s;
    }
    s.push_str("<h3>Contract failures by reason</h3><table class=\"figures text\"><thead><tr><th>reason</th><th>samples</th><th>examples</th></tr></thead><tbody>");
    for (why, idx) in reasons.iter().take(40) {
        let _ = write!(s, "<tr><td>{}</td><td>{}</td><td>", escape(why), idx.len());
        for &i in idx.iter().take(3) {
            let x = &b.samples[i];
            let excerpt: String = x.text.chars().take(80).collect();
            let _ = write!(
                s,
                "<div><a href=\"#sample={i}\">{} / {} / {} seed {}</a> <code>{}</code></div>",
                escape(&x.model),
                escape(&x.condition),
                escape(&x.scenario),
                x.seed,
                escape(&excerpt)
            );
        }
        s.push_str("</td></tr>");
    }
    s.push_str("</tbody></table>");
    s
}
