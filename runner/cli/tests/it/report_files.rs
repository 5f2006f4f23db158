//! What the report files say: provenance, each contrast once, per-regime tables,
//! twin counts as observed, the reliability table, booktabs tables, plots with axes,
//! exploratory marks, and a self-contained report.html carrying every sample.

use super::common::{ok, scratch};
use base64::Engine as _;
use creg::baseline::System;
use creg::frozen;
use creg::record::{Regime, Scenario};
use creg::report::{self, Provenance, HEADLINE};
use creg::score::aggregate::{aggregate, Aggregate, Scored};
use serde_json::Value;
use std::collections::BTreeSet;
use std::io::Read as _;
use std::path::Path;
use std::sync::OnceLock;

fn suite() -> &'static Vec<Scenario> {
    static SUITE: OnceLock<Vec<Scenario>> = OnceLock::new();
    SUITE.get_or_init(|| frozen::frozen_suite().unwrap())
}

fn run(system: System, suite: &[Scenario], conditions: &[&str]) -> Vec<Scored> {
    let conditions: Vec<String> = conditions.iter().map(|c| c.to_string()).collect();
    creg::baseline_run::run_suite(system, suite, &conditions, &[42, 43]).unwrap()
}

/// Oracle and latest-wins in three conditions over the whole suite.
fn panel() -> &'static Aggregate {
    static AGG: OnceLock<Aggregate> = OnceLock::new();
    AGG.get_or_init(|| {
        let conditions = ["full_graph", "graph_without_relations", "canonical_json"];
        let mut all = run(System::Oracle, suite(), &conditions);
        all.extend(run(System::LatestWins, suite(), &conditions));
        aggregate(&all, suite())
    })
}

fn provenance() -> Provenance {
    Provenance::new(Some("suite-hash-for-test".into()), Some("spec-hash".into()))
}

#[test]
fn the_summary_has_provenance_each_contrast_once_and_every_headline_metric_by_regime() {
    let a = panel();
    let md = report::summary(a, "creg-v1.0: test", &provenance());
    assert!(md.contains("- suite sha256: suite-hash-for-test"), "{md}");
    assert!(md.contains("- normative spec sha256: spec-hash"));
    assert!(md.contains(&format!("- runner version: {}", env!("CARGO_PKG_VERSION"))));
    assert!(md.contains("- report written: 20"));

    // The relation-content contrast is listed in one direction only.
    let forward = md
        .lines()
        .filter(|l| l.contains("| full_graph − graph_without_relations |"))
        .count();
    let backward = md
        .lines()
        .filter(|l| l.contains("graph_without_relations − full_graph"))
        .count();
    // Two models x three contrast metrics.
    assert_eq!((forward, backward), (6, 0), "{md}");
    assert_eq!(
        md.lines()
            .filter(|l| l.contains("| canonical_json − full_graph |"))
            .count(),
        6
    );

    // A table per headline metric, one row per regime.
    for (_, _, label) in HEADLINE {
        let heading = format!("### {label} (");
        let at = md.find(&heading).unwrap_or_else(|| panic!("{heading}"));
        let table: Vec<&str> = md[at..]
            .lines()
            .skip(2)
            .take_while(|l| l.starts_with('|'))
            .collect();
        assert_eq!(table.len(), 2 + Regime::ALL.len(), "{label}");
    }

    // The reliability table: one row per bin the aggregate has.
    let rel = md
        .split("## Reliability")
        .nth(1)
        .expect("a reliability table");
    let rows = rel
        .lines()
        .skip(4)
        .take_while(|l| l.starts_with("| "))
        .count();
    assert_eq!(rows, a.reliability.len());
}

#[test]
fn twin_counts_are_the_pairs_observed_under_a_limit() {
    // The first four relation-association scenarios and one of every other regime.
    let mut seen = std::collections::BTreeMap::<Regime, usize>::new();
    let subset: Vec<Scenario> = suite()
        .iter()
        .filter(|s| {
            let n = seen.entry(s.metadata.trajectory_regime).or_default();
            *n += 1;
            *n <= if s.metadata.counterfactual_pair_id.is_some() {
                4
            } else {
                1
            }
        })
        .cloned()
        .collect();
    let complete: BTreeSet<&String> = {
        let ids: Vec<&String> = subset
            .iter()
            .filter_map(|s| s.metadata.counterfactual_pair_id.as_ref())
            .collect();
        ids.iter()
            .filter(|p| ids.iter().filter(|q| q == p).count() == 2)
            .copied()
            .collect()
    };
    assert!(!complete.is_empty() && complete.len() < 25);
    let a = aggregate(&run(System::Oracle, &subset, &["full_graph"]), &subset);
    let md = report::summary(&a, "t", &provenance());
    assert!(!md.contains("25 relation-association pairs"), "{md}");
    let twins = md
        .split("## Counterfactual twins (relation-association pairs)")
        .nth(1)
        .unwrap_or_else(|| panic!("{md}"));
    let row = twins
        .lines()
        .find(|l| l.starts_with("| oracle / full_graph | "))
        .unwrap_or_else(|| panic!("{md}"));
    assert!(
        row.starts_with(&format!("| oracle / full_graph | {} |", complete.len())),
        "{row}"
    );
}

#[test]
fn exploratory_gemma_results_are_marked_outside_canonical_json() {
    let mut all = run(System::Oracle, suite(), &["canonical_json", "full_graph"]);
    for s in &mut all {
        s.model = "gemma-3-12b".into();
    }
    let a = aggregate(&all, suite());
    let md = report::summary(&a, "t", &provenance());
    assert!(md.contains("| gemma-3-12b / full_graph † |"), "{md}");
    assert!(md.contains("| gemma-3-12b / canonical_json |"));
    assert!(md.contains(report::EXPLORATORY_NOTE));
    let tex = report::tex(&a, "t");
    assert!(tex.contains("gemma-3-12b / full\\_graph$^\\dagger$"));
    assert!(!tex.contains("canonical\\_json$^\\dagger$"));
    let unmarked = report::summary(panel(), "t", &provenance());
    assert!(!unmarked.contains('†'));
}

#[test]
fn tables_tex_is_balanced_booktabs_with_the_figures() {
    let a = panel();
    let tex = report::tex(a, "creg-v1.0: test");
    let count = |s: &str| tex.matches(s).count();
    let tables = count("\\begin{table}");
    // Two headline tables and one per headline metric by regime.
    assert_eq!(tables, 2 + HEADLINE.len());
    for s in [
        "\\end{table}",
        "\\toprule",
        "\\midrule",
        "\\bottomrule",
        "\\begin{tabular}",
    ] {
        assert_eq!(count(s), tables, "{s}");
    }
    assert!(tex.contains("oracle / full\\_graph & 1.000 {\\scriptsize[1.000, 1.000]}"));
    // Every row of a tabular has as many cells as its header; no unescaped underscore.
    for body in tex.split("\\toprule").skip(1) {
        let body = &body[..body.find("\\bottomrule").unwrap()];
        let widths: BTreeSet<usize> = body
            .lines()
            .filter(|l| l.ends_with("\\\\"))
            .map(|l| l.matches(" & ").count())
            .collect();
        assert_eq!(widths.len(), 1, "{body}");
    }
    assert!(!tex.replace("\\_", "").contains('_'));
}

#[test]
fn plots_have_axes_ticks_units_and_one_row_per_contrast() {
    let a = panel();
    let bars = report::plots::regime_bars(a, "belief", "top_state_accuracy", "top-state accuracy");
    for tick in ["0.0", "0.2", "0.4", "0.6", "0.8", "1.0"] {
        assert!(bars.contains(&format!(">{tick}</text>")), "tick {tick}");
    }
    assert!(bars.contains("top-state accuracy (proportion)"));
    for r in Regime::ALL {
        assert!(bars.contains(&format!(">{r}</text>")));
    }
    // Latest-wins misses some regimes: its bars carry intervals as titles.
    assert!(bars.contains("latest-wins / full_graph: "));

    let forest = report::plots::forest(a, "belief", "top_state_accuracy");
    let rows = report::distinct_contrasts(a)
        .iter()
        .filter(|k| k.task == "belief" && k.metric == "top_state_accuracy")
        .count();
    assert_eq!(
        rows,
        2 * 2,
        "two models: canonical_json against full_graph, and the relation contrast once"
    );
    assert_eq!(forest.matches("width=\"7\"").count(), rows);
    assert!(forest.contains("difference in top_state_accuracy (condition − baseline)"));
    assert!(forest.contains(">0.00</text>") || forest.contains(">0.0</text>"));

    let rel = report::plots::reliability(a);
    assert!(rel.contains("mean stated p(anomalous) in bin (probability)"));
    assert!(rel.contains(">1.0</text>"));
}

/// The page's embedded data block `id`, inflated.
fn block(html: &str, id: &str) -> Value {
    let open = format!("id=\"{id}\">");
    let start = html.find(&open).unwrap() + open.len();
    let end = start + html[start..].find("</script>").unwrap();
    let gz = base64::engine::general_purpose::STANDARD
        .decode(&html[start..end])
        .unwrap();
    let mut text = String::new();
    flate2::read::GzDecoder::new(&gz[..])
        .read_to_string(&mut text)
        .unwrap();
    serde_json::from_str(&text).unwrap()
}

fn journal_len(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("journal.jsonl"))
        .unwrap()
        .lines()
        .count()
}

#[test]
fn a_run_writes_a_self_contained_html_report_with_every_sample() {
    let out = scratch("html");
    let o = out.to_str().unwrap();
    ok(&["--model", "oracle", "--limit", "1", "--quiet", "--out", o]);
    ok(&["--model", "uniform", "--limit", "1", "--quiet", "--out", o]);
    let oracle = out.join("oracle/creg-v1.0");
    let html = std::fs::read_to_string(oracle.join("report.html")).unwrap();
    // Nothing from the network: no external sources, links or styles.
    assert!(!html.contains(" src="));
    assert!(!html.contains("href=\"http"));
    assert!(!html.contains("url("));
    for section in [
        "provenance",
        "headline",
        "regimes",
        "contrasts",
        "twins",
        "reliability",
        "contract",
        "samples",
    ] {
        assert!(
            html.contains(&format!("<section id=\"{section}\">")),
            "{section}"
        );
    }
    // Provenance from the run's manifest.
    assert!(html.contains("run oracle"));
    assert!(html.contains("seeds [42,43,44]"));

    let samples = block(&html, "data-samples");
    let samples = samples.as_array().unwrap();
    assert_eq!(samples.len(), journal_len(&oracle));
    let shared = block(&html, "data-shared");
    // Each prompt once, keyed by request id, for every request a sample answers: the
    // indices of its lines, each distinct line stored once.
    let ids: BTreeSet<&str> = samples.iter().map(|s| s["id"].as_str().unwrap()).collect();
    let prompts = shared["prompts"].as_object().unwrap();
    assert_eq!(prompts.len(), ids.len());
    let lines = shared["lines"].as_array().unwrap();
    let prompt = |id: &str| -> String {
        let at = prompts[id].as_array().unwrap();
        let text: Vec<&str> = at
            .iter()
            .map(|k| lines[k.as_u64().unwrap() as usize].as_str().unwrap())
            .collect();
        text.join("\n")
    };
    assert!(ids.iter().all(|id| prompt(id).len() > 200));
    assert!(lines.len() < prompts.values().map(|p| p.as_array().unwrap().len()).sum());
    assert!(samples
        .iter()
        .all(|s| shared["references"].get(s["r"].as_str().unwrap()).is_some()));
    assert!(samples
        .iter()
        .all(|s| s["cat"] == "valid" && s["x"]["contract_failure"] == 0.0));

    // A combined report over two runs: provenance of both, samples of both.
    let combined = out.join("panel");
    ok(&[
        "score",
        oracle.to_str().unwrap(),
        out.join("uniform/creg-v1.0").to_str().unwrap(),
        "--out",
        combined.to_str().unwrap(),
    ]);
    let html = std::fs::read_to_string(combined.join("report.html")).unwrap();
    assert!(html.contains("run oracle") && html.contains("run uniform"));
    assert!(html.contains("combined runs (oracle, uniform)"));
    let both = block(&html, "data-samples");
    assert_eq!(
        both.as_array().unwrap().len(),
        journal_len(&oracle) + journal_len(&out.join("uniform/creg-v1.0"))
    );
    assert!(combined.join("tables.tex").is_file());
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn a_probe_run_writes_its_html_report_from_the_scores_json() {
    let out = scratch("probe-html");
    ok(&[
        "--suite",
        "probe",
        "--model",
        "oracle",
        "--limit",
        "1",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ]);
    let dir = out.join("oracle/probe");
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    let scores: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("scores.json")).unwrap()).unwrap();
    // The core post accuracy of scores.json is in a cell of the page.
    let post = &scores["systems"][0]["probe"]["post_acc"]["mean"];
    assert!(post.is_number());
    assert!(html.contains(&format!(
        "data-cell=\"oracle|probe/post_acc\"><a href=\"#samples?model=oracle&amp;question=post\">{:.3}</a>",
        post.as_f64().unwrap()
    )));
    // Breakdowns are tables of their own beside the hop figure, the PIT part is marked
    // exploratory, and the tables are in tables.tex too.
    assert!(html.contains("id=\"by-domain\"") && html.contains("id=\"fig-hop\""));
    assert!(dir.join("tables.tex").is_file());
    assert!(html.contains("not human-validated"));
    let samples = block(&html, "data-samples");
    assert_eq!(samples.as_array().unwrap().len(), journal_len(&dir));
    std::fs::remove_dir_all(&out).unwrap();
}

/// The `#samples?...` link of the table cell `data-cell="key"`, as (field, value) pairs.
fn cell_link(html: &str, key: &str) -> Vec<(String, String)> {
    let open = format!("data-cell=\"{key}\"><a href=\"#samples?");
    let start = html
        .find(&open)
        .unwrap_or_else(|| panic!("no link in {key}"))
        + open.len();
    let end = start + html[start..].find('"').unwrap();
    html[start..end]
        .split("&amp;")
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap();
            (unpercent(k), unpercent(v))
        })
        .collect()
}

/// The samples the browser lists under `filters`, as its script reads them: fixed
/// fields by their short keys, anything else as a facet; a field named twice accepts
/// either value.
fn filtered<'a>(samples: &'a [Value], filters: &[(String, String)]) -> Vec<&'a Value> {
    let mut by_field: std::collections::BTreeMap<&str, Vec<&str>> = Default::default();
    for (k, v) in filters {
        by_field.entry(k).or_default().push(v);
    }
    samples
        .iter()
        .filter(|s| {
            by_field.iter().all(|(k, values)| {
                let have = match *k {
                    "model" => &s["m"],
                    "condition" => &s["c"],
                    "task" => &s["t"],
                    facet => &s["f"][facet],
                };
                have.as_str().is_some_and(|h| values.contains(&h))
            })
        })
        .collect()
}

/// `%XX` escapes decoded.
fn unpercent(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            out.push(u8::from_str_radix(&s[i + 1..i + 3], 16).unwrap());
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).unwrap()
}

/// Every `#samples?...` link that follows `prefix` in `html`, with the text after it up
/// to the next `<`.
fn links_after<'a>(html: &'a str, prefix: &str) -> Vec<(Vec<(String, String)>, &'a str)> {
    let open = format!("{prefix}<a href=\"#samples?");
    let mut out = Vec::new();
    let mut rest = html;
    while let Some(i) = rest.find(&open) {
        rest = &rest[i + open.len()..];
        let end = rest.find('"').unwrap();
        let pairs = rest[..end]
            .split("&amp;")
            .map(|kv| {
                let (k, v) = kv.split_once('=').unwrap();
                (unpercent(k), unpercent(v))
            })
            .collect();
        let text_start = end + 2;
        let text_end = text_start + rest[text_start..].find('<').unwrap();
        out.push((pairs, &rest[text_start..text_end]));
    }
    out
}

#[test]
fn contrast_rows_and_reliability_bins_link_to_the_samples_behind_them() {
    let out = scratch("creg-links");
    ok(&[
        "--model",
        "oracle",
        "--limit",
        "2",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ]);
    let html = std::fs::read_to_string(out.join("oracle/creg-v1.0/report.html")).unwrap();
    let samples = block(&html, "data-samples");
    let samples = samples.as_array().unwrap();

    // A reliability bin's count is the number of samples its link lists.
    let bins = links_after(&html, "\">");
    let bins: Vec<_> = bins
        .into_iter()
        .filter(|(l, _)| l.iter().any(|(k, _)| k == "stated bin"))
        .collect();
    assert!(bins.len() >= 2, "{} reliability rows", bins.len());
    let mut counted = 0;
    for (link, text) in &bins {
        let n: usize = text.parse().unwrap();
        let shown = filtered(samples, link);
        assert_eq!(shown.len(), n, "{link:?}");
        assert!(shown.iter().all(|s| s["t"] == "belief"));
        counted += n;
    }
    // Every belief sample outside a contract failure is in one bin.
    let belief = samples
        .iter()
        .filter(|s| s["t"] == "belief" && s["x"]["contract_failure"] == 0.0)
        .count();
    assert_eq!(counted, belief);

    // A contrast row lists both conditions' samples of its model and task.
    let section = &html[html.find("<section id=\"contrasts\">").unwrap()..];
    let section = &section[..section.find("</section>").unwrap()];
    let rows = links_after(section, "<td>");
    assert!(!rows.is_empty());
    for (link, text) in &rows {
        let conditions: Vec<&str> = link
            .iter()
            .filter(|(k, _)| k == "condition")
            .map(|(_, v)| v.as_str())
            .collect();
        assert_eq!(conditions.len(), 2, "{link:?}");
        assert_eq!(*text, format!("{} − {}", conditions[0], conditions[1]));
        let shown = filtered(samples, link);
        for c in &conditions {
            let of_c = samples
                .iter()
                .filter(|s| {
                    s["c"] == *c && link.contains(&("task".into(), s["t"].as_str().unwrap().into()))
                })
                .count();
            assert!(of_c > 0);
            assert_eq!(shown.iter().filter(|s| s["c"] == *c).count(), of_c);
        }
    }
    // The forest plot's rows link the same way.
    assert!(section.contains("<a href=\"#samples?model=oracle&amp;task=belief&amp;condition="));
    std::fs::remove_dir_all(&out).unwrap();
}

#[test]
fn a_probe_report_gives_each_sample_its_items_facets_and_links_breakdowns_to_them() {
    let out = scratch("probe-facets");
    ok(&[
        "--suite",
        "probe",
        "--model",
        "oracle",
        "--quiet",
        "--out",
        out.to_str().unwrap(),
    ]);
    let dir = out.join("oracle/probe");
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    let scores: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("scores.json")).unwrap()).unwrap();
    let samples = block(&html, "data-samples");
    let samples = samples.as_array().unwrap();
    assert_eq!(samples.len(), journal_len(&dir));
    let references = block(&html, "data-shared")["references"].clone();

    // Every sample: its question kind, its item's facets, and the gold of its question.
    for s in samples {
        let task = s["t"].as_str().unwrap();
        let kind = s["f"]["question"].as_str().unwrap();
        let reference = &references[s["r"].as_str().unwrap()];
        if s["c"] == "conversation" {
            assert_eq!(kind, task);
            // Core ids spell the hop depth: `emp-d2-...` is a two-hop item.
            let hop = s["f"]["hop"].as_str().unwrap();
            assert!(s["sc"].as_str().unwrap().contains(&format!("-d{hop}-")));
            for facet in ["domain", "axis", "contradicted"] {
                assert!(s["f"][facet].is_string(), "{facet} of {s}");
            }
            let gold = if task == "followup" {
                "gold_axis"
            } else {
                "gold"
            };
            assert!(reference[gold].is_string(), "{reference}");
        } else {
            assert_eq!(kind, "point-in-time");
            assert!(reference["gold"].is_string() && reference["as_of"].is_string());
        }
    }

    // By hop, axis and domain: each cell links to exactly the samples it counts.
    let by = &scores["systems"][0]["probe"]["by"];
    for (breakdown, facet) in [("hop_depth", "hop"), ("axis", "axis"), ("domain", "domain")] {
        let cells = by[breakdown].as_object().unwrap();
        assert!(!cells.is_empty());
        if breakdown == "hop_depth" {
            assert_eq!(cells.len(), 4);
        }
        for (cell, e) in cells {
            let key = format!("oracle|probe/by/{breakdown}/{cell}");
            let link = cell_link(&html, &key);
            assert!(
                link.contains(&(facet.to_string(), cell.clone())),
                "{link:?}"
            );
            let shown = filtered(samples, &link);
            assert_eq!(shown.len() as u64, e["values"].as_u64().unwrap(), "{key}");
            assert!(shown
                .iter()
                .all(|s| s["t"] == "post" && s["f"][facet] == cell.as_str()));
        }
    }
    // Point-in-time cells link to their queries.
    let pit = &scores["systems"][0]["pit"]["by_label"];
    for (label, e) in pit.as_object().unwrap() {
        let link = cell_link(&html, &format!("oracle|pit/by_label/{label}"));
        let shown = filtered(samples, &link);
        assert_eq!(shown.len() as u64, e["values"].as_u64().unwrap(), "{label}");
    }
    std::fs::remove_dir_all(&out).unwrap();
}
