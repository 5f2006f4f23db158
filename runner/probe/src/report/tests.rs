//! The report's builders on a hand-made scores input whose every figure is known: the
//! tables, figures and `tables.tex` must show exactly those figures, in plain words.

use crate::provenance::provenance;
use crate::report::html::{all_tables, sections, table_html};
use crate::report::tables::{breakdown, headline, hops};
use crate::report::words::HEADLINE;
use crate::report::{figures, tex};
use crate::score::intervals::Intervals;
use crate::score::report::Abstention;
use crate::score::{ProbeReport, RunReport, SystemReport};
use runner_core::stats::bootstrap::Estimate;
use std::collections::BTreeMap;

fn est(mean: f64, lo: f64, hi: f64, n: usize) -> Estimate {
    Estimate {
        clusters: n,
        values: 3 * n,
        mean,
        lo,
        hi,
    }
}

fn cells(pairs: &[(&str, Estimate)]) -> BTreeMap<String, Estimate> {
    pairs.iter().map(|(k, e)| (k.to_string(), *e)).collect()
}

/// A system's core report; `shift` lowers every accuracy so two systems differ.
fn core(system: &str, shift: f64) -> ProbeReport {
    let mut by = BTreeMap::new();
    by.insert(
        "hop_x_contradicted".to_string(),
        cells(&[
            ("1 asserted", est(0.9 - shift, 0.8 - shift, 1.0 - shift, 24)),
            ("2 asserted", est(0.5 - shift, 0.3 - shift, 0.7 - shift, 24)),
            ("2 derived", est(0.75 - shift, 0.6 - shift, 0.9 - shift, 24)),
            ("3 derived", est(0.25, 0.1, 0.4, 24)),
        ]),
    );
    by.insert(
        "domain".to_string(),
        cells(&[
            ("employment", est(0.6, 0.5, 0.7, 56)),
            ("training", est(0.4 - shift, 0.3, 0.5, 56)),
        ]),
    );
    by.insert(
        "hop_depth".to_string(),
        cells(&[("2", est(0.625, 0.5, 0.75, 48))]),
    );
    ProbeReport {
        system: system.to_string(),
        alias_version: "a",
        abstention_version: "b",
        items: 168,
        samples: 504,
        pre_acc: Some(est(0.95, 0.9, 0.99, 168)),
        post_acc: Some(est(0.625 - shift, 0.5, 0.75, 168)),
        post_em: None,
        unusable_rate: Some(est(0.5, 0.25, 0.75, 168)),
        post_acc_given_pre: Some(est(0.6, 0.45, 0.7, 160)),
        post_acc_majority: None,
        stale_rate: Some(est(0.2, 0.1, 0.3, 168)),
        abstention: Abstention {
            recall: Some(0.5),
            precision: Some(0.8),
            f1: None,
        },
        invalidation: None,
        axis_acc: Some(0.7),
        followup_contract_failures: 0,
        axis_acc_by: BTreeMap::new(),
        outcomes: BTreeMap::new(),
        depth_trend: BTreeMap::new(),
        by,
        propagation: BTreeMap::new(),
        intervals: Intervals {
            abstention_recall: Some(est(0.5, 0.375, 0.625, 76)),
            abstention_precision: Some(est(0.8, 0.7, 0.9, 40)),
            over_abstention: Some(est(0.125, 0.05, 0.2, 92)),
            invalidation_recall: Some(est(0.4, 0.3, 0.5, 168)),
            over_invalidation: None,
            axis_acc: Some(est(0.7, 0.6, 0.8, 168)),
            axis_acc_by_axis: BTreeMap::new(),
            invalidation_by_chain_position: cells(&[("1", est(1.0, 1.0, 1.0, 96))]),
            invalidation_by_hop_x_contradicted: BTreeMap::new(),
            abstention_by_hop: cells(&[("2", est(0.5, 0.25, 0.75, 24))]),
            over_abstention_by_hop: BTreeMap::new(),
        },
    }
}

fn report(systems: &[(&str, f64)]) -> RunReport {
    RunReport::new(
        "probe: test",
        systems
            .iter()
            .map(|(s, shift)| SystemReport {
                system: s.to_string(),
                probe: Some(core(s, *shift)),
                pit: None,
                unanswered: 0,
            })
            .collect(),
        vec![],
    )
    .with_set(provenance(true, None, "probe.json (generated)"))
}

#[test]
fn headline_has_one_row_per_system_with_each_measure_its_interval_and_n() {
    let (a, b) = (core("A", 0.0), core("my_model", 0.125));
    let t = headline(&[("A", &a), ("my_model", &b)]);
    assert_eq!(t.rows.len(), 2);
    assert_eq!(t.rows[1].label, "my_model");
    assert_eq!(t.columns.len(), 9);
    assert_eq!(t.columns[1], "Accuracy after the change");
    // Unusable replies: the last column, from the report's `unusable_rate`.
    assert_eq!(t.columns[8], "Unusable replies");
    assert_eq!(t.rows[0].cells[8].estimate.unwrap().mean, 0.5);
    assert_eq!(t.rows[0].cells[8].key, "A|probe/unusable_rate");
    assert!(
        t.columns.iter().all(|c| !c.contains('_')),
        "{:?}",
        t.columns
    );
    // After the change: 0.625 for A and 0.500 for the other; declines: 0.5 over 76 items.
    assert_eq!(t.rows[0].cells[1].estimate.unwrap().mean, 0.625);
    assert_eq!(t.rows[1].cells[1].estimate.unwrap().mean, 0.5);
    assert_eq!(t.rows[0].cells[4].estimate.unwrap().clusters, 76);
    assert_eq!(
        t.rows[1].cells[1].href.as_deref(),
        Some("#samples?model=my_model&question=post")
    );
    let html = table_html(&t);
    assert!(html.contains(
        "data-mean=\"0.625\" data-n=\"168\" data-cell=\"A|probe/post_acc\"><a href=\"#samples?model=A&amp;question=post\">0.625</a><br><small>[0.500, 0.750] n 168</small>"
    ));
    assert!(
        html.contains("<small>[0.375, 0.625] n 76</small>"),
        "{html}"
    );
    // Tells update from correction: the follow-up figure with its interval.
    assert_eq!(t.rows[0].cells[7].estimate.unwrap().mean, 0.7);
}

#[test]
fn hop_table_splits_asserted_and_derived_per_system() {
    let a = core("A", 0.0);
    let t = hops(&[("A", &a)]);
    assert_eq!(t.columns, ["all", "asserted", "derived"]);
    let hop2 = &t.rows[1];
    assert_eq!(hop2.label, "hop 2");
    let means: Vec<Option<f64>> = hop2
        .cells
        .iter()
        .map(|c| c.estimate.map(|e| e.mean))
        .collect();
    assert_eq!(means, [Some(0.625), Some(0.5), Some(0.75)]);
    // Hop 1 has no derived items: no figure.
    assert_eq!(t.rows[0].cells[2].estimate, None);
    assert_eq!(
        hop2.cells[2].href.as_deref(),
        Some("#samples?model=A&question=post&hop=2&contradicted=derived")
    );
}

#[test]
fn hop_figure_draws_asserted_and_derived_per_system_at_their_values() {
    let (a, b) = (core("A", 0.0), core("B", 0.125));
    let svg = figures::hop_figure(&[("A", &a), ("B", &b)]);
    for label in [
        "A: asserted fact changed",
        "A: derived fact changed",
        "B: asserted fact changed",
        "B: derived fact changed",
    ] {
        assert!(
            svg.contains(&format!("class=\"series\" data-series=\"{label}\"")),
            "{label}"
        );
    }
    // A's derived point at hop 2: 0.75 [0.6, 0.9] over 24 items, at y = 34 + 240 * (1 - 0.75).
    assert!(svg.contains(
        "cy=\"94.0\" r=\"3.5\" fill=\"#1f77b4\" data-x=\"hop 2\" data-mean=\"0.750\" data-lo=\"0.600\" data-hi=\"0.900\" data-n=\"24\""
    ));
    // B's asserted point at hop 2 is 0.125 lower.
    assert!(
        svg.contains("data-x=\"hop 2\" data-mean=\"0.375\" data-lo=\"0.175\" data-hi=\"0.575\"")
    );
    // Derived series are dashed (line and legend), asserted ones solid; 4 series of 2
    // points (hops 1 and 2 asserted, 2 and 3 derived).
    assert_eq!(svg.matches("stroke-dasharray").count(), 2 + 2);
    assert_eq!(svg.matches("class=\"point\"").count(), 4 * 2);
}

#[test]
fn one_system_figures_name_the_arm_only_and_empty_figures_say_so() {
    let a = core("A", 0.0);
    let svg = figures::hop_figure(&[("A", &a)]);
    assert!(svg.contains("data-series=\"asserted fact changed\""));
    let svg = figures::invalidation_figure(&[("A", &a)]);
    assert!(svg.contains("no questions of this kind were asked"));
    let svg = figures::abstention_figure(&[("A", &a)]);
    assert!(svg.contains(
        "data-x=\"hop 2\" data-mean=\"0.500\" data-lo=\"0.250\" data-hi=\"0.750\" data-n=\"24\""
    ));
    let svg = figures::chain_figure(&[("A", &a)]);
    assert!(svg.contains("data-x=\"position 1\" data-mean=\"1.000\""));
}

#[test]
fn domain_table_has_a_column_per_system_and_plain_cell_names() {
    let (a, b) = (core("A", 0.0), core("B", 0.125));
    let t = breakdown(&[("A", &a), ("B", &b)], "domain", "Domain");
    assert_eq!(t.columns, ["A", "B"]);
    assert_eq!(t.rows[1].label, "training");
    assert_eq!(t.rows[1].cells[0].estimate.unwrap().mean, 0.4);
    assert_eq!(t.rows[1].cells[1].estimate.unwrap().mean, 0.275);
    assert_eq!(
        t.rows[1].cells[1].href.as_deref(),
        Some("#samples?model=B&question=post&domain=training")
    );
}

#[test]
fn page_states_the_set_and_shows_no_scores_json_keys() {
    let r = report(&[("A", 0.0), ("B", 0.125)]);
    let body: String = sections(&r).into_iter().map(|(_, _, s)| s).collect();
    assert!(body.contains("Set run: the generated set."));
    assert!(body.contains("NOT human-validated"));
    // Text a reader sees (outside tags) holds no snake_case key, no "title" or
    // "description" row.
    let mut text = String::new();
    let mut inside = false;
    for ch in body.replace("<style>", "<style ").chars() {
        match ch {
            '<' => inside = true,
            '>' => inside = false,
            c if !inside => text.push(c),
            _ => {}
        }
    }
    let text = text.split("</style").last().unwrap_or(&text).to_string();
    for key in [
        "post_acc",
        "hop_x",
        "stale_rate",
        "axis_acc",
        "gold_post",
        ">title<",
        ">description<",
    ] {
        assert!(!text.contains(key), "{key} shown to readers");
    }
    for id in [
        "fig-hop",
        "fig-abstention",
        "fig-invalidation",
        "fig-chain",
        "by-domain",
        "by-axis",
    ] {
        assert!(body.contains(&format!("id=\"{id}\"")), "{id}");
    }
}

#[test]
fn tables_tex_has_every_table_with_intervals_n_and_escaped_names() {
    let r = report(&[("A", 0.0), ("my_model", 0.125)]);
    let tables = all_tables(&r);
    let doc = tex::document("the generated set", &tables);
    assert!(doc.contains("\\label{tab:probe-headline-table}"));
    assert!(doc.contains("\\label{tab:probe-by-hop}"));
    assert!(doc.contains("\\label{tab:probe-by-domain}"));
    assert!(doc.contains(
        "my\\_model & 0.950 {\\tiny[0.900, 0.990] 168} & 0.500 {\\tiny[0.500, 0.750] 168}"
    ));
    // Long headings over two lines, short ones as they are.
    assert!(
        doc.contains("& \\begin{tabular}[b]{@{}r@{}}Accuracy after\\\\the change\\end{tabular} &")
    );
    assert!(doc.contains("\\toprule\nDomain & A & my\\_model \\\\"));
    assert_eq!(doc.matches("\\begin{table}").count(), tables.len());
    assert_eq!(
        doc.matches("\\begin{table}").count(),
        doc.matches("\\bottomrule\n\\end{tabular}\n\\end{table}")
            .count()
    );
}

#[test]
fn point_in_time_rows_run_in_time_order_with_their_links() {
    let p = crate::score::PitReport {
        system: "A".into(),
        items: 8,
        n_queries: 24,
        by_label: cells(&[
            ("after_first_fact", est(0.5, 0.25, 0.75, 8)),
            ("after_second_fact", est(1.0, 1.0, 1.0, 8)),
            ("before_any_fact", est(0.0, 0.0, 0.0, 8)),
        ]),
        by_scenario_label: cells(&[
            ("double_update after_first_fact", est(0.25, 0.0, 0.5, 4)),
            ("double_update before_any_fact", est(0.0, 0.0, 0.0, 4)),
        ]),
        retracted_leak: None,
        current_state_leak: None,
        item_all_correct: None,
        by_domain: BTreeMap::new(),
        by_density: BTreeMap::new(),
    };
    let t = crate::report::tables::pit(&[("A", &p)]);
    let labels: Vec<&str> = t.rows.iter().map(|r| r.label.as_str()).collect();
    assert_eq!(
        labels,
        [
            "before any fact",
            "after the first fact",
            "after the second fact",
            "two updates, before any fact",
            "two updates, after the first fact"
        ]
    );
    assert_eq!(t.rows[4].cells[0].estimate.unwrap().mean, 0.25);
    assert_eq!(
        t.rows[4].cells[0].key,
        "A|pit/by_scenario_label/double_update after_first_fact"
    );
    assert_eq!(
        t.rows[4].cells[0].href.as_deref(),
        Some("#samples?model=A&question=point-in-time&task=after_first_fact&history=double_update")
    );
}

#[test]
fn summary_md_shows_the_headline_in_plain_names_and_no_metric_keys() {
    let r = report(&[("A", 0.0), ("my_model", 0.125)]);
    let md = r.summary();
    assert!(md.starts_with("# probe: test\n"), "{md}");
    assert!(
        md.contains("**Set run: the generated set.** the set generated by this project"),
        "{md}"
    );
    let names: Vec<&str> = HEADLINE.iter().map(|m| m.name).collect();
    assert!(
        md.contains(&format!("| system | {} |\n", names.join(" | "))),
        "{md}"
    );
    assert!(
        md.contains("| A | 0.950 [0.900, 0.990] n 168 | 0.625 [0.500, 0.750] n 168 | 0.600 [0.450, 0.700] n 160 |"),
        "{md}"
    );
    for m in &HEADLINE {
        assert!(
            md.contains(&format!("- **{}**: {}\n", m.name, m.definition)),
            "{}",
            m.name
        );
    }
    assert!(md.contains("| Domain | A | my\\_model |") || md.contains("| Domain | A | my_model |"));
    assert!(md.contains("| training | 0.400 [0.300, 0.500] n 56 | 0.275 [0.300, 0.500] n 56 |"));
    // No snake_case key anywhere but the system's own name.
    let keys: Vec<&str> = md
        .split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| w.contains('_') && *w != "my_model")
        .collect();
    assert!(keys.is_empty(), "{keys:?} in:\n{md}");
    // Every table row has as many cells as its header.
    for table in md.split("\n\n").filter(|t| t.starts_with('|')) {
        let widths: Vec<usize> = table.lines().map(|l| l.matches(" | ").count()).collect();
        assert!(widths.iter().all(|w| *w == widths[0]), "{table}");
    }
}

#[test]
fn summary_md_writes_a_system_name_as_text() {
    let md = report(&[("m|<img src=x>", 0.0)]).summary();
    assert!(!md.replace("\\<", "").contains('<'), "{md}");
    assert!(md.contains("| m\\|\\<img src=x\\> | 0.950"), "{md}");
}

#[test]
fn scores_csv_keeps_machine_keys_and_adds_plain_labels() {
    let csv = report(&[("A", 0.0)]).csv();
    assert!(
        csv.starts_with("system,set,table,cell,n,mean,lo,hi,label\n"),
        "{csv}"
    );
    for row in [
        "A,probe,metric,post_acc,168,0.625,0.5,0.75,Accuracy after the change\n",
        "A,probe,metric,post_acc_given_pre,160,0.6,0.45,0.7,\"After, when right before\"\n",
        "A,probe,metric,abstention_precision,,0.8,,,\"Right to decline, when it declines\"\n",
        "A,probe,domain,training,56,0.4,0.3,0.5,Domain: training\n",
        "A,probe,hop_x_contradicted,2 derived,24,0.75,0.6,0.9,Hop depth and fact contradicted: 2 derived\n",
    ] {
        assert!(csv.contains(row), "{row} not in:\n{csv}");
    }
}

#[test]
fn a_text_table_is_the_same_rows_on_the_page_and_in_the_summary() {
    use crate::report::html::text_table_html;
    use crate::report::summary::text_table_md;
    use crate::report::tables::TextTable;
    let t = TextTable {
        id: "leaks",
        corner: "system",
        columns: vec!["first".into(), "second".into()],
        rows: vec![
            (
                "<b>mine</b> vs x|y".into(),
                vec!["0.250".into(), "1.000 [0.9, 1.0]".into()],
            ),
            ("plain".into(), vec!["\u{2013}".into(), "3".into()]),
        ],
    };
    let html = text_table_html(&t);
    assert!(html.starts_with("<table class=\"figures\" id=\"leaks\"><thead><tr><th>system</th><th>first</th><th>second</th></tr>"), "{html}");
    assert!(html.contains("<tr><th scope=\"row\">&lt;b&gt;mine&lt;/b&gt; vs x|y</th><td>0.250</td><td>1.000 [0.9, 1.0]</td></tr>"), "{html}");
    assert_eq!(html.matches("<tr>").count(), 3);
    let md = text_table_md(&t);
    let lines: Vec<&str> = md.lines().collect();
    assert_eq!(
        lines,
        [
            "| system | first | second |",
            "| --- | --- | --- |",
            "| \\<b\\>mine\\</b\\> vs x\\|y | 0.250 | 1.000 [0.9, 1.0] |",
            "| plain | \u{2013} | 3 |",
        ]
    );
}
