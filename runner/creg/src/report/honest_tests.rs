//! Reports of a weak model: figures computed on stand-ins for failed answers say so,
//! the contract-fail column covers every task, each contrast has its contract-failure
//! contrast beside it, and an empty plot says why it is empty.

use crate::baseline::{answer, System};
use crate::frozen::frozen_suite;
use crate::record::Scenario;
use crate::render::question::{questions, Question};
use crate::report::{html, plots, summary, Provenance, ReportInputs};
use crate::score::aggregate::{aggregate, Aggregate, Scored};
use crate::score::sample::score_text;
use runner_engine::finish::FinishReason;

/// One scenario of each of the first `n` regimes' scenarios in suite order.
fn scenarios(n: usize) -> Vec<Scenario> {
    frozen_suite().unwrap().into_iter().take(n).collect()
}

/// The samples of `questions` answered by `reply` (the oracle's answer where `None`).
fn samples(
    suite: &[Scenario],
    condition: &str,
    keep: impl Fn(Question) -> bool,
    reply: Option<&str>,
) -> Vec<Scored> {
    let mut out = Vec::new();
    for s in suite {
        for q in questions(s).into_iter().filter(|q| keep(*q)) {
            let text = match reply {
                Some(t) => t.to_string(),
                None => answer(System::Oracle, s, q).unwrap(),
            };
            let score = score_text(s, q, &text, FinishReason::Stop).unwrap();
            out.push(Scored::new("weak", condition, 42, s, q, score));
        }
    }
    out
}

fn is_belief(q: Question) -> bool {
    matches!(q, Question::Belief { .. })
}

const PROSE: &str = "The pump looks anomalous to me because the readings went up.";

fn reports(a: &Aggregate) -> (String, String) {
    let p = Provenance::new(None, None);
    let inputs = ReportInputs {
        title: "t",
        provenance: &p,
        browser: None,
    };
    (summary(a, "t", &p), html::creg_page(a, &inputs).unwrap())
}

/// The Markdown row of `series` in the table after `heading`, split into cells.
fn row(md: &str, heading: &str, series: &str) -> Vec<String> {
    let at = md
        .find(heading)
        .unwrap_or_else(|| panic!("{heading}: {md}"));
    let line = md[at..]
        .lines()
        .find(|l| l.starts_with(&format!("| {series} |")))
        .unwrap_or_else(|| panic!("{series} under {heading}: {md}"));
    line.split(" | ")
        .map(|c| c.trim_matches('|').trim().to_string())
        .collect()
}

#[test]
fn figures_on_stand_ins_only_are_a_dash_with_the_count() {
    let suite = scenarios(4);
    let all = samples(&suite, "full_graph", is_belief, Some(PROSE));
    let n = all.len();
    let a = aggregate(&all, &suite);
    let (md, page) = reports(&a);
    let headline = row(&md, "## Headline", "weak / full_graph");
    let nothing = format!("– (0 of {n} answered)");
    // top state, abs error, Brier, support F1, leakage, contradiction detection.
    for cell in &headline[1..7] {
        assert_eq!(cell, &nothing, "{headline:?}");
    }
    // The contract-failure rate is a real figure, over every sample.
    assert_eq!(headline[13], format!("1.000 [1.000, 1.000] (n = {n})"));
    let revision = row(&md, "## Belief revision", "weak / full_graph");
    for cell in &revision[1..6] {
        assert_eq!(cell, &nothing, "{revision:?}");
    }
    assert!(!md.contains("| 0.000 [0.000, 0.000] |"), "{md}");
    assert!(page.contains(&format!("–<small class=\"n\">0 of {n} answered</small>")));
    assert!(!page.contains("<span class=\"mean\">0.000</span> <small>[0.000, 0.000]</small></td>"));
}

#[test]
fn every_figure_says_how_many_answers_it_rests_on() {
    let suite = scenarios(4);
    let mut all = samples(&suite, "full_graph", is_belief, None);
    let good = all.len();
    all.extend(
        samples(
            &suite[..1],
            "full_graph",
            |q| q == Question::Belief { step: 1 },
            Some(PROSE),
        )
        .into_iter()
        .map(|mut s| {
            s.seed = 43;
            s
        }),
    );
    let a = aggregate(&all, &suite);
    let (md, page) = reports(&a);
    let headline = row(&md, "## Headline", "weak / full_graph");
    let note = format!("({good} of {} answered)", good + 1);
    assert!(headline[1].ends_with(&note), "{headline:?}");
    assert!(page.contains(&format!(
        "<small class=\"n\">{good} of {} answered</small>",
        good + 1
    )));
}

#[test]
fn the_contract_fail_column_covers_an_endpoint_only_run() {
    let suite = scenarios(6);
    let endpoint = |q: Question| !is_belief(q);
    let mut all = samples(&suite[..2], "full_graph", endpoint, None);
    all.extend(samples(&suite[2..], "full_graph", endpoint, Some(PROSE)));
    let a = aggregate(&all, &suite);
    let (md, page) = reports(&a);
    let headline = row(&md, "## Headline", "weak / full_graph");
    // 4 of 6 scenarios' three endpoint answers failed.
    assert!(
        headline[13].starts_with("0.667 [") && headline[13].ends_with("] (n = 18)"),
        "{headline:?}"
    );
    assert!(
        page.contains("data-cell=\"weak|full_graph|all|contract_failure|\""),
        "{page}"
    );
}

#[test]
fn each_contrast_stands_beside_its_contract_failure_contrast() {
    let suite = scenarios(6);
    let endpoint = |q: Question| q == Question::Action;
    let mut all = samples(&suite, "full_graph", endpoint, None);
    all.extend(samples(&suite, "canonical_json", endpoint, Some(PROSE)));
    let a = aggregate(&all, &suite);
    let (_, page) = reports(&a);
    let at = page
        .find("canonical_json − full_graph</td><td>action</td><td>exact_match</td>")
        .unwrap_or_else(|| panic!("{page}"));
    let tail = &page[at..page[at..].find("</tr>").unwrap() + at];
    assert!(tail.contains("−1.000") || tail.contains("-1.000"), "{tail}");
    assert!(
        tail.contains("class=\"contract-contrast\">+1.000"),
        "{tail}"
    );
    // And how many answered under each condition.
    assert!(tail.contains("<td>0 of 6 vs 6 of 6</td>"), "{tail}");
}

#[test]
fn an_empty_plot_says_why() {
    let suite = scenarios(4);
    let endpoint = |q: Question| !is_belief(q);
    let mut all = samples(&suite, "full_graph", endpoint, None);
    all.extend(samples(&suite, "canonical_json", endpoint, None));
    let a = aggregate(&all, &suite);
    let forest = plots::forest(&a, "belief", "top_state_accuracy");
    assert!(forest.contains("no belief samples in this run"), "{forest}");
    assert!(!forest.contains("no paired conditions"));
    let bars = plots::regime_bars(&a, "belief", "top_state_accuracy", "top-state accuracy");
    assert!(bars.contains("no belief samples in this run"), "{bars}");
    // Belief samples that all failed the contract: no bar of stand-ins.
    let failed = aggregate(
        &samples(&suite, "full_graph", is_belief, Some(PROSE)),
        &suite,
    );
    let bars = plots::regime_bars(
        &failed,
        "belief",
        "top_state_accuracy",
        "top-state accuracy",
    );
    assert!(!bars.contains("<title>weak"), "{bars}");
    assert!(
        bars.contains("no belief answer kept the output contract"),
        "{bars}"
    );
    // One condition only: then it is the pairing that is missing.
    let single = aggregate(&samples(&suite, "full_graph", is_belief, None), &suite);
    let forest = plots::forest(&single, "belief", "top_state_accuracy");
    assert!(forest.contains("no paired conditions"), "{forest}");
}

#[test]
fn the_contradiction_task_has_its_own_column_beside_the_belief_derived_one() {
    use crate::score::reference::EndpointReference;
    // The belief answers are the oracle's; the contradiction task's miss every real
    // conflict and invent one wherever there is none.
    let suite = scenarios(12);
    let mut all = samples(&suite, "full_graph", is_belief, None);
    for s in &suite {
        let present = EndpointReference::of(s).contradiction_present;
        let reply = if present {
            r#"{"contradiction_present": false, "contradiction_type": null, "involved_evidence_ids": [], "resolution_status": null}"#
        } else {
            r#"{"contradiction_present": true, "contradiction_type": "same_epoch_value_conflict", "involved_evidence_ids": ["obs-1", "obs-2"], "resolution_status": "active"}"#
        };
        let q = Question::Contradiction;
        let score = score_text(s, q, reply, FinishReason::Stop).unwrap();
        all.push(Scored::new("weak", "full_graph", 42, s, q, score));
    }
    let a = aggregate(&all, &suite);
    let (md, page) = reports(&a);
    let header = md[md.find("## Headline").unwrap()..]
        .lines()
        .find(|l| l.starts_with("| model"))
        .unwrap()
        .to_string();
    let labels: Vec<&str> = header
        .split(" | ")
        .map(|c| c.trim_matches('|').trim())
        .collect();
    let at = |label: &str| {
        labels
            .iter()
            .position(|l| *l == label)
            .unwrap_or_else(|| panic!("{label}: {header}"))
    };
    let headline = row(&md, "## Headline", "weak / full_graph");
    let n = suite.len();
    assert!(
        headline[at("contra. det.")].starts_with("1.000 [1.000, 1.000]"),
        "{headline:?}"
    );
    assert_eq!(
        headline[at("contradiction task")],
        format!("0.000 [0.000, 0.000] ({n} of {n} answered)")
    );
    assert!(
        headline[at("contradiction task loc.")].starts_with("0.000 ["),
        "{headline:?}"
    );
    // The note says which samples each column is computed from, in both reports.
    for text in [&md, &page] {
        assert!(text.contains("contra. det. is computed from the belief samples"));
        assert!(text.contains("contradiction task is the contradiction endpoint task"));
    }
    assert!(page.contains("data-cell=\"weak|full_graph|contradiction|detection|\""));
}
