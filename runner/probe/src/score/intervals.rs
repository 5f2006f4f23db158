//! The report's rates that the headline table and figures show with a 95% interval and
//! their n: abstention, over-abstention, invalidation, update-vs-correction, and the
//! per-hop and per-chain-position series of the figures. Each is the mean of a 0/1 (or
//! per-item fraction) value over the samples it is defined on, with the same bootstrap
//! clustered by item as the report's accuracies.

use crate::record::ProbeItem;
use crate::score::outcome::{ItemScore, Outcome};
use runner_core::stats::bootstrap::{mean_ci, Estimate};
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Intervals {
    /// Abstained, over samples whose gold_post is "unknown".
    pub abstention_recall: Option<Estimate>,
    /// Right to abstain, over samples that abstained.
    pub abstention_precision: Option<Estimate>,
    /// Abstained, over samples whose gold_post is a value.
    pub over_abstention: Option<Estimate>,
    /// Per-sample share of gold-invalidated relations marked (macro recall).
    pub invalidation_recall: Option<Estimate>,
    /// Marked a chain relation that stays current, over samples with a follow-up.
    pub over_invalidation: Option<Estimate>,
    /// Named the final turn's kind (update or correction) right, over follow-ups.
    pub axis_acc: Option<Estimate>,
    /// `axis_acc` by the gold kind of the final turn.
    pub axis_acc_by_axis: BTreeMap<String, Estimate>,
    /// Asserted items: chain position -> share of samples that invalidated it.
    pub invalidation_by_chain_position: BTreeMap<String, Estimate>,
    /// `invalidation_recall` by `hop contradicted` ("2 derived").
    pub invalidation_by_hop_x_contradicted: BTreeMap<String, Estimate>,
    /// `abstention_recall` by hop depth.
    pub abstention_by_hop: BTreeMap<String, Estimate>,
    /// `over_abstention` by hop depth.
    pub over_abstention_by_hop: BTreeMap<String, Estimate>,
}

type Scored<'a> = (&'a ProbeItem, &'a ItemScore);

/// Mean of `value` per cell of `key` (None: the sample is left out), clustered by item.
fn by<K, V>(samples: &[Scored], key: K, value: V) -> BTreeMap<String, Estimate>
where
    K: Fn(&ProbeItem, &ItemScore) -> Option<String>,
    V: Fn(&ProbeItem, &ItemScore) -> Option<f64>,
{
    let mut cells: BTreeMap<String, BTreeMap<&str, Vec<f64>>> = BTreeMap::new();
    for (item, score) in samples {
        let (Some(k), Some(v)) = (key(item, score), value(item, score)) else {
            continue;
        };
        cells
            .entry(k)
            .or_default()
            .entry(item.probe_id.as_str())
            .or_default()
            .push(v);
    }
    cells
        .into_iter()
        .filter_map(|(k, c)| mean_ci(&c.into_values().collect::<Vec<_>>()).map(|e| (k, e)))
        .collect()
}

/// Mean of `value` over the samples it is defined on, clustered by item.
fn overall<V>(samples: &[Scored], value: V) -> Option<Estimate>
where
    V: Fn(&ProbeItem, &ItemScore) -> Option<f64>,
{
    by(samples, |_, _| Some(String::new()), value).remove("")
}

fn flag(b: bool) -> Option<f64> {
    Some(f64::from(u8::from(b)))
}

fn abstained(s: &ItemScore) -> bool {
    matches!(s.post, Outcome::Abstain | Outcome::OverAbstain)
}

fn on_unknown(i: &ProbeItem, s: &ItemScore) -> Option<f64> {
    i.gold_post.is_unknown().then(|| flag(abstained(s)))?
}

fn on_value(i: &ProbeItem, s: &ItemScore) -> Option<f64> {
    (!i.gold_post.is_unknown()).then(|| flag(abstained(s)))?
}

fn recall(_: &ProbeItem, s: &ItemScore) -> Option<f64> {
    let v = s.invalidation.as_ref()?;
    Some(if v.total == 0 {
        1.0
    } else {
        v.hits as f64 / v.total as f64
    })
}

fn hop(i: &ProbeItem, _: &ItemScore) -> Option<String> {
    Some(i.hop_depth.to_string())
}

pub fn intervals(samples: &[Scored]) -> Intervals {
    let positions: Vec<(&ProbeItem, f64, String)> = samples
        .iter()
        .flat_map(|(item, s)| {
            let ps = s
                .invalidation
                .as_ref()
                .map_or(&[][..], |v| &v.positions[..]);
            ps.iter()
                .map(move |(p, hit)| (*item, f64::from(u8::from(*hit)), p.to_string()))
        })
        .collect();
    let mut chain: BTreeMap<String, BTreeMap<&str, Vec<f64>>> = BTreeMap::new();
    for (item, v, p) in &positions {
        chain
            .entry(p.clone())
            .or_default()
            .entry(item.probe_id.as_str())
            .or_default()
            .push(*v);
    }
    Intervals {
        abstention_recall: overall(samples, on_unknown),
        abstention_precision: overall(samples, |_, s| {
            abstained(s).then(|| flag(s.post == Outcome::Abstain))?
        }),
        over_abstention: overall(samples, on_value),
        invalidation_recall: overall(samples, recall),
        over_invalidation: overall(samples, |_, s| flag(s.invalidation.as_ref()?.over > 0)),
        axis_acc: overall(samples, |_, s| flag(s.axis_correct?)),
        axis_acc_by_axis: by(
            samples,
            |i, _| Some(i.gold_axis.to_string()),
            |_, s| flag(s.axis_correct?),
        ),
        invalidation_by_chain_position: chain
            .into_iter()
            .filter_map(|(k, c)| mean_ci(&c.into_values().collect::<Vec<_>>()).map(|e| (k, e)))
            .collect(),
        invalidation_by_hop_x_contradicted: by(
            samples,
            |i, _| Some(format!("{} {}", i.hop_depth, i.contradicted)),
            recall,
        ),
        abstention_by_hop: by(samples, hop, on_unknown),
        over_abstention_by_hop: by(samples, hop, on_value),
    }
}
