//! Aggregation of core-item scores into the Probe report, with 95% intervals from a
//! bootstrap clustered by item (several samples of one item, e.g. seeds, move together).

use crate::record::{Contradicted, ProbeItem};
use crate::score::compare::{depth_trends, fmt_p, Trend};
use crate::score::intervals::{intervals, Intervals};
use crate::score::matching::{ABSTENTION_VERSION, ALIAS_VERSION};
use crate::score::outcome::{
    score_probe_item, InvalidationScore, ItemScore, Outcome, ProbeResponse,
};
use runner_core::stats::bootstrap::{mean_ci, Estimate};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Abstention {
    /// Abstentions over items whose gold_post is "unknown".
    pub recall: Option<f64>,
    /// Correct abstentions over all abstentions.
    pub precision: Option<f64>,
    pub f1: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Invalidation {
    pub micro_recall: f64,
    pub macro_recall: f64,
    /// Correct invalidations over all predicted ones (none predicted: no figure).
    pub micro_precision: Option<f64>,
    /// Mean per-item precision over items that predicted something.
    pub macro_precision: Option<f64>,
    /// Asserted items: share that invalidated each chain position.
    pub by_chain_position: BTreeMap<String, f64>,
    /// Share of items that invalidated a chain relation that stays current.
    pub over_invalidation: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ProbeReport {
    pub system: String,
    pub alias_version: &'static str,
    pub abstention_version: &'static str,
    pub items: usize,
    pub samples: usize,
    pub pre_acc: Option<Estimate>,
    pub post_acc: Option<Estimate>,
    pub post_em: Option<Estimate>,
    /// Post accuracy over samples whose pre answer was right.
    pub post_acc_given_pre: Option<Estimate>,
    /// Share of items whose samples are right in the majority (ties count wrong).
    pub post_acc_majority: Option<f64>,
    pub stale_rate: Option<Estimate>,
    /// Share of answers, before and after the change, the scorer cannot use: no words,
    /// or no claim (a restated prompt, pasted or invented turns, nothing asserted).
    pub unusable_rate: Option<Estimate>,
    pub abstention: Abstention,
    pub invalidation: Option<Invalidation>,
    pub axis_acc: Option<f64>,
    /// Samples whose follow-up answer broke its contract (counted wrong, never dropped).
    pub followup_contract_failures: usize,
    /// Axis accuracy split by contradicted x axis.
    pub axis_acc_by: BTreeMap<String, f64>,
    pub outcomes: BTreeMap<Outcome, usize>,
    /// Cochran-Armitage trend of post accuracy over hop depth, per contradicted arm, on
    /// per-item shares of correct samples (seeds nested in items).
    pub depth_trend: BTreeMap<String, Option<Trend>>,
    /// Breakdown name -> cell label -> post accuracy.
    pub by: BTreeMap<String, BTreeMap<String, Estimate>>,
    /// Propagation accuracy (post correct over samples whose pre answer was right) by
    /// `hop_depth` and `hop_x_contradicted`: separates "never learned the chain" from
    /// "did not carry the contradiction down it".
    pub propagation: BTreeMap<String, BTreeMap<String, Estimate>>,
    /// The rates above that have no interval (abstention, invalidation, axis), and the
    /// figures' per-hop series, each with its 95% interval and n.
    pub intervals: Intervals,
}

struct Sample<'a> {
    item: &'a ProbeItem,
    score: ItemScore,
}

pub(super) fn ratio(num: usize, den: usize) -> Option<f64> {
    (den > 0).then(|| num as f64 / den as f64)
}

/// Mean of `value` over the samples that pass `keep`, clustered by item.
fn clustered<F, V>(samples: &[Sample], keep: F, value: V) -> Option<Estimate>
where
    F: Fn(&Sample) -> bool,
    V: Fn(&Sample) -> f64,
{
    let mut clusters: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for s in samples.iter().filter(|s| keep(s)) {
        clusters
            .entry(s.item.probe_id.as_str())
            .or_default()
            .push(value(s));
    }
    mean_ci(&clusters.into_values().collect::<Vec<_>>())
}

fn post_correct(s: &Sample) -> f64 {
    f64::from(u8::from(s.score.post.is_correct()))
}

fn majority(samples: &[Sample]) -> Option<f64> {
    let mut votes: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for s in samples {
        let v = votes.entry(s.item.probe_id.as_str()).or_default();
        v.0 += usize::from(s.score.post.is_correct());
        v.1 += 1;
    }
    let right = votes.values().filter(|(x, n)| 2 * x > *n).count();
    ratio(right, votes.len())
}

type KeyFn = fn(&ProbeItem) -> String;

/// Post accuracy per cell of `key`, clustered by item; an empty key leaves a sample out.
fn table(samples: &[&Sample], key: KeyFn) -> BTreeMap<String, Estimate> {
    let mut cells: BTreeMap<String, BTreeMap<&str, Vec<f64>>> = BTreeMap::new();
    for s in samples {
        let k = key(s.item);
        if !k.is_empty() {
            cells
                .entry(k)
                .or_default()
                .entry(s.item.probe_id.as_str())
                .or_default()
                .push(post_correct(s));
        }
    }
    cells
        .into_iter()
        .filter_map(|(k, clusters)| {
            mean_ci(&clusters.into_values().collect::<Vec<_>>()).map(|e| (k, e))
        })
        .collect()
}

fn is_withdrawal(i: &ProbeItem) -> bool {
    i.oracle_retractions.last().is_some_and(|r| !r.is_empty())
}

/// The breakdowns of the report: main effects, hop x each axis, and the asserted
/// hop-1 split into replacement and withdrawal.
fn breakdowns() -> Vec<(&'static str, KeyFn)> {
    vec![
        ("hop_depth", |i| i.hop_depth.to_string()),
        ("hop_x_contradicted", |i| {
            format!("{} {}", i.hop_depth, i.contradicted)
        }),
        ("contradicted", |i| i.contradicted.to_string()),
        ("axis", |i| i.axis.to_string()),
        ("density", |i| i.density.to_string()),
        ("confidence", |i| i.confidence.to_string()),
        ("domain", |i| i.domain.to_string()),
        ("hop_x_axis", |i| format!("{} {}", i.hop_depth, i.axis)),
        ("hop_x_density", |i| {
            format!("{} {}", i.hop_depth, i.density)
        }),
        ("hop_x_confidence", |i| {
            format!("{} {}", i.hop_depth, i.confidence)
        }),
        ("hop_x_domain", |i| format!("{} {}", i.hop_depth, i.domain)),
        ("gold_post_kind", |i| {
            if i.gold_post.is_unknown() {
                "unknown"
            } else {
                "value"
            }
            .to_string()
        }),
        ("asserted_hop1", |i| {
            if i.hop_depth.get() == 1 && i.contradicted == Contradicted::Asserted {
                if is_withdrawal(i) {
                    "withdrawal"
                } else {
                    "replacement"
                }
                .to_string()
            } else {
                String::new()
            }
        }),
    ]
}

/// Score every (item, response) pair; an item may appear several times (seeds).
pub fn score_probe(system: &str, pairs: &[(&ProbeItem, &ProbeResponse)]) -> ProbeReport {
    let samples: Vec<Sample> = pairs
        .iter()
        .map(|(item, r)| Sample {
            item,
            score: score_probe_item(item, r),
        })
        .collect();
    ProbeReport {
        system: system.to_string(),
        alias_version: ALIAS_VERSION,
        abstention_version: ABSTENTION_VERSION,
        items: distinct_items(&samples),
        samples: samples.len(),
        pre_acc: clustered(
            &samples,
            |_| true,
            |s| f64::from(u8::from(s.score.pre.is_correct())),
        ),
        post_acc: clustered(&samples, |_| true, post_correct),
        post_em: clustered(&samples, |_| true, |s| f64::from(u8::from(s.score.post_em))),
        post_acc_given_pre: clustered(&samples, |s| s.score.pre.is_correct(), post_correct),
        post_acc_majority: majority(&samples),
        stale_rate: clustered(
            &samples,
            |_| true,
            |s| f64::from(u8::from(s.score.post == Outcome::Stale)),
        ),
        unusable_rate: clustered(
            &samples,
            |_| true,
            |s| {
                let both = [s.score.pre, s.score.post];
                both.iter().filter(|o| o.is_unusable()).count() as f64 / 2.0
            },
        ),
        abstention: abstention(&samples),
        invalidation: invalidation(&samples),
        axis_acc: axis_accuracy(&samples),
        followup_contract_failures: pairs.iter().filter(|(_, r)| r.followup_failed).count(),
        axis_acc_by: axis_accuracy_by_cell(&samples),
        outcomes: post_outcomes(&samples),
        depth_trend: depth_trends(pairs),
        by: post_accuracy_by(&samples),
        propagation: propagation(&samples),
        intervals: intervals(
            &samples
                .iter()
                .map(|s| (s.item, &s.score))
                .collect::<Vec<_>>(),
        ),
    }
}

fn distinct_items(samples: &[Sample]) -> usize {
    let mut items: Vec<&str> = samples.iter().map(|s| s.item.probe_id.as_str()).collect();
    items.sort_unstable();
    items.dedup();
    items.len()
}

fn post_outcomes(samples: &[Sample]) -> BTreeMap<Outcome, usize> {
    let mut outcomes = BTreeMap::new();
    for s in samples {
        *outcomes.entry(s.score.post).or_insert(0) += 1;
    }
    outcomes
}

/// Abstention credit on the post question: recall over items whose gold_post is
/// "unknown", precision over all abstentions.
fn abstention(samples: &[Sample]) -> Abstention {
    let unknown = samples
        .iter()
        .filter(|s| s.item.gold_post.is_unknown())
        .count();
    let abstained = samples
        .iter()
        .filter(|s| matches!(s.score.post, Outcome::Abstain | Outcome::OverAbstain))
        .count();
    let right = samples
        .iter()
        .filter(|s| s.score.post == Outcome::Abstain)
        .count();
    let recall = ratio(right, unknown);
    let precision = ratio(right, abstained);
    let f1 = match (recall, precision) {
        (Some(r), Some(p)) if r + p > 0.0 => Some(2.0 * r * p / (r + p)),
        (Some(_), Some(_)) => Some(0.0),
        _ => None,
    };
    Abstention {
        recall,
        precision,
        f1,
    }
}

/// Invalidation figures over the samples with a follow-up answer; none: no figures.
fn invalidation(samples: &[Sample]) -> Option<Invalidation> {
    let with_inv: Vec<&InvalidationScore> = samples
        .iter()
        .filter_map(|s| s.score.invalidation.as_ref())
        .collect();
    if with_inv.is_empty() {
        return None;
    }
    let hits: usize = with_inv.iter().map(|v| v.hits).sum();
    let total: usize = with_inv.iter().map(|v| v.total).sum();
    let macro_sum: f64 = with_inv
        .iter()
        .map(|v| ratio(v.hits, v.total).unwrap_or(1.0))
        .sum();
    let predicted: usize = with_inv.iter().map(|v| v.predicted).sum();
    let precisions: Vec<f64> = with_inv
        .iter()
        .filter_map(|v| ratio(v.hits, v.predicted))
        .collect();
    Some(Invalidation {
        micro_precision: ratio(hits, predicted),
        macro_precision: (!precisions.is_empty())
            .then(|| precisions.iter().sum::<f64>() / precisions.len() as f64),
        micro_recall: ratio(hits, total).unwrap_or(1.0),
        macro_recall: macro_sum / with_inv.len() as f64,
        by_chain_position: recall_by_chain_position(&with_inv),
        over_invalidation: with_inv.iter().filter(|v| v.over > 0).count() as f64
            / with_inv.len() as f64,
    })
}

fn recall_by_chain_position(with_inv: &[&InvalidationScore]) -> BTreeMap<String, f64> {
    let mut positions: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for v in with_inv {
        for (p, hit) in &v.positions {
            let e = positions.entry(p.to_string()).or_default();
            e.0 += usize::from(*hit);
            e.1 += 1;
        }
    }
    positions
        .into_iter()
        .map(|(p, (h, n))| (p, h as f64 / n as f64))
        .collect()
}

/// Share of right axis predictions over the samples that made one.
fn axis_accuracy(samples: &[Sample]) -> Option<f64> {
    let axis_preds: Vec<bool> = samples
        .iter()
        .filter_map(|s| s.score.axis_correct)
        .collect();
    ratio(axis_preds.iter().filter(|b| **b).count(), axis_preds.len())
}

/// Axis accuracy per contradicted x gold axis cell.
fn axis_accuracy_by_cell(samples: &[Sample]) -> BTreeMap<String, f64> {
    let mut axis_cells: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for s in samples {
        if let Some(ok) = s.score.axis_correct {
            let e = axis_cells
                .entry(format!("{} {}", s.item.contradicted, s.item.gold_axis))
                .or_default();
            e.0 += usize::from(ok);
            e.1 += 1;
        }
    }
    axis_cells
        .into_iter()
        .map(|(k, (hit, n))| (k, hit as f64 / n as f64))
        .collect()
}

/// Post accuracy in every breakdown.
fn post_accuracy_by(samples: &[Sample]) -> BTreeMap<String, BTreeMap<String, Estimate>> {
    let all: Vec<&Sample> = samples.iter().collect();
    breakdowns()
        .into_iter()
        .map(|(name, key)| (name.to_string(), table(&all, key)))
        .collect()
}

/// Post accuracy over the samples whose pre answer was right, by depth and by depth x
/// contradicted.
fn propagation(samples: &[Sample]) -> BTreeMap<String, BTreeMap<String, Estimate>> {
    breakdowns()
        .into_iter()
        .filter(|(name, _)| matches!(*name, "hop_depth" | "hop_x_contradicted"))
        .map(|(name, key)| {
            let kept: Vec<&Sample> = samples
                .iter()
                .filter(|s| s.score.pre.is_correct())
                .collect();
            (name.to_string(), table(&kept, key))
        })
        .collect()
}

pub(super) fn pct(e: &Option<Estimate>) -> String {
    match e {
        Some(e) => format!("{:.3} [{:.3}, {:.3}]", e.mean, e.lo, e.hi),
        None => "n/a".to_string(),
    }
}

pub(super) fn opt(v: Option<f64>) -> String {
    v.map_or_else(|| "n/a".to_string(), |v| format!("{v:.3}"))
}

impl ProbeReport {
    /// Markdown tables: headline metrics, then every breakdown with n and 95% CI.
    pub fn to_markdown(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "## Probe: {} ({} items, {} samples)\n",
            runner_core::report::markdown_text(&self.system),
            self.items,
            self.samples
        );
        let _ = writeln!(s, "| metric | value [95% CI] |\n| --- | --- |");
        for (k, v) in self.headline_rows() {
            let _ = writeln!(s, "| {k} | {v} |");
        }
        self.write_cell_metrics(&mut s);
        let _ = writeln!(
            s,
            "\nAliases `{}`, abstention phrases `{}`; intervals: bootstrap clustered by item.",
            self.alias_version, self.abstention_version
        );
        write_estimates(
            &mut s,
            "\n| breakdown | cell | n | post accuracy | 95% CI |\n| --- | --- | --- | --- | --- |",
            &self.by,
        );
        write_estimates(
            &mut s,
            "\n| propagation (post given pre correct) | cell | n items | accuracy | 95% CI |\n| --- | --- | --- | --- | --- |",
            &self.propagation,
        );
        s
    }

    /// The metric table's fixed rows.
    fn headline_rows(&self) -> [(&'static str, String); 16] {
        let inv = self.invalidation.as_ref();
        [
            ("post accuracy (NM)", pct(&self.post_acc)),
            ("post EM", pct(&self.post_em)),
            ("pre accuracy", pct(&self.pre_acc)),
            (
                "post accuracy given pre correct",
                pct(&self.post_acc_given_pre),
            ),
            (
                "post accuracy, majority vote per item",
                opt(self.post_acc_majority),
            ),
            ("stale rate", pct(&self.stale_rate)),
            ("abstention recall", opt(self.abstention.recall)),
            ("abstention precision", opt(self.abstention.precision)),
            ("abstention F1", opt(self.abstention.f1)),
            (
                "invalidation micro recall",
                opt(inv.map(|i| i.micro_recall)),
            ),
            (
                "invalidation macro recall",
                opt(inv.map(|i| i.macro_recall)),
            ),
            (
                "invalidation micro precision",
                opt(inv.and_then(|i| i.micro_precision)),
            ),
            (
                "invalidation macro precision",
                opt(inv.and_then(|i| i.macro_precision)),
            ),
            ("over-invalidation", opt(inv.map(|i| i.over_invalidation))),
            ("axis accuracy", opt(self.axis_acc)),
            (
                "follow-up contract failures",
                self.followup_contract_failures.to_string(),
            ),
        ]
    }

    /// The metric table's rows that depend on what was measured: per chain position,
    /// per axis cell, per contradicted arm, and the outcome counts.
    fn write_cell_metrics(&self, s: &mut String) {
        if let Some(inv) = &self.invalidation {
            for (p, r) in &inv.by_chain_position {
                let _ = writeln!(s, "| invalidation recall, chain position {p} | {r:.3} |");
            }
        }
        for (cell, acc) in &self.axis_acc_by {
            let _ = writeln!(s, "| axis accuracy, {cell} | {acc:.3} |");
        }
        for (arm, t) in &self.depth_trend {
            let v = t.map_or_else(
                || "n/a".to_string(),
                |t| format!("z = {:.2}, p = {}", t.z, fmt_p(t.p_value)),
            );
            let _ = writeln!(
                s,
                "| depth trend, {arm} (Cochran-Armitage on item means) | {v} |"
            );
        }
        let outcomes: Vec<String> = self
            .outcomes
            .iter()
            .map(|(o, n)| format!("{}={n}", o.as_str()))
            .collect();
        let _ = writeln!(s, "| post outcomes | {} |", outcomes.join(", "));
    }
}

/// A table of estimates under `header`, one row per (breakdown, cell).
fn write_estimates(
    s: &mut String,
    header: &str,
    tables: &BTreeMap<String, BTreeMap<String, Estimate>>,
) {
    let _ = writeln!(s, "{header}");
    for (name, table) in tables {
        for (cell, e) in table {
            let _ = writeln!(
                s,
                "| {name} | {cell} | {} | {:.3} | [{:.3}, {:.3}] |",
                e.clusters, e.mean, e.lo, e.hi
            );
        }
    }
}
