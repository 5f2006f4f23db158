//! Aggregation of point-in-time query scores into the PIT report. The PIT set is not
//! human-validated and has two items per domain x density cell, so its report is
//! flagged exploratory and those cells are descriptive only.

use crate::record::{PitItem, Scenario, AFTER_FIRST_FACT};
pub use crate::response::PitResponse;
use crate::score::matching::Answer;
use crate::score::outcome::{score_pit_query, QueryScore};
use crate::score::report::{opt, ratio};
use runner_core::stats::bootstrap::{mean_ci, Estimate};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PitReport {
    pub system: String,
    pub items: usize,
    pub n_queries: usize,
    pub by_label: BTreeMap<String, Estimate>,
    pub by_scenario_label: BTreeMap<String, Estimate>,
    /// Correction histories at `after_first_fact`: share naming the corrected-away value.
    pub retracted_leak: Option<f64>,
    /// Share of all queries naming the final, current value.
    pub current_state_leak: Option<f64>,
    pub item_all_correct: Option<f64>,
    /// Descriptive only: two items per cell.
    pub by_domain: BTreeMap<String, f64>,
    pub by_density: BTreeMap<String, f64>,
}

/// Score PIT items; a missing answer counts as an empty one.
pub fn score_pit(system: &str, pairs: &[(&PitItem, &PitResponse)]) -> PitReport {
    let mut scored: Vec<(&PitItem, &str, QueryScore)> = Vec::new();
    let mut all_correct = Vec::new();
    for (item, response) in pairs {
        let mut ok = true;
        for (j, q) in item.queries.iter().enumerate() {
            let empty = Answer::default();
            let a = response.answers.get(j).unwrap_or(&empty);
            let s = score_pit_query(item, q, a);
            ok &= s.outcome.is_correct();
            scored.push((item, q.label.as_str(), s));
        }
        all_correct.push(ok);
    }
    let group = |key: &dyn Fn(&PitItem, &str) -> String| {
        let mut cells: BTreeMap<String, BTreeMap<&str, Vec<f64>>> = BTreeMap::new();
        for (item, label, s) in &scored {
            cells
                .entry(key(item, label))
                .or_default()
                .entry(item.pit_id.as_str())
                .or_default()
                .push(f64::from(u8::from(s.outcome.is_correct())));
        }
        cells
            .into_iter()
            .filter_map(|(k, c)| mean_ci(&c.into_values().collect::<Vec<_>>()).map(|e| (k, e)))
            .collect::<BTreeMap<String, Estimate>>()
    };
    let leak_pool: Vec<&QueryScore> = scored
        .iter()
        .filter(|(i, l, _)| i.scenario == Scenario::CorrectionThenUpdate && *l == AFTER_FIRST_FACT)
        .map(|(_, _, s)| s)
        .collect();
    let mut items: Vec<&str> = pairs.iter().map(|(i, _)| i.pit_id.as_str()).collect();
    items.sort_unstable();
    items.dedup();
    PitReport {
        system: system.to_string(),
        items: items.len(),
        n_queries: scored.len(),
        by_label: group(&|_, l| l.to_string()),
        by_scenario_label: group(&|i, l| format!("{} {l}", i.scenario)),
        retracted_leak: ratio(
            leak_pool.iter().filter(|s| s.retracted_leak).count(),
            leak_pool.len(),
        ),
        current_state_leak: ratio(
            scored.iter().filter(|(_, _, s)| s.current_leak).count(),
            scored.len(),
        ),
        item_all_correct: ratio(
            all_correct.iter().filter(|b| **b).count(),
            all_correct.len(),
        ),
        by_domain: group(&|i, _| i.domain.to_string())
            .into_iter()
            .map(|(k, e)| (k, e.mean))
            .collect(),
        by_density: group(&|i, _| i.density.to_string())
            .into_iter()
            .map(|(k, e)| (k, e.mean))
            .collect(),
    }
}

impl PitReport {
    pub fn to_markdown(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "## Probe PIT (exploratory, not human-validated): {} ({} items, {} queries)\n",
            runner_core::report::markdown_text(&self.system),
            self.items,
            self.n_queries
        );
        let _ = writeln!(
            s,
            "| cell | n | accuracy | 95% CI |\n| --- | --- | --- | --- |"
        );
        for (k, e) in self.by_label.iter().chain(&self.by_scenario_label) {
            let _ = writeln!(
                s,
                "| {k} | {} | {:.3} | [{:.3}, {:.3}] |",
                e.clusters, e.mean, e.lo, e.hi
            );
        }
        let _ = writeln!(s, "\n| metric | value |\n| --- | --- |");
        let _ = writeln!(s, "| retracted-value leak | {} |", opt(self.retracted_leak));
        let _ = writeln!(
            s,
            "| current-state leak | {} |",
            opt(self.current_state_leak)
        );
        let _ = writeln!(s, "| item all correct | {} |", opt(self.item_all_correct));
        for (k, v) in self.by_domain.iter().chain(&self.by_density) {
            let _ = writeln!(s, "| {k} (descriptive) | {v:.3} |");
        }
        s
    }
}
