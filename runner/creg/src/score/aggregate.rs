//! Aggregation: means with 95% bootstrap intervals clustered by scenario (seeds are
//! repeats nested within a scenario), by model x condition x task x regime x seed;
//! trajectory metrics; paired condition contrasts; the counterfactual-twin analysis.

use crate::record::{Regime, Scenario, ScenarioId};
use crate::render::question::Question;
pub use crate::score::answered::{Answered, ALL_TASKS, CONTRACT_FAILURE};
use crate::score::metrics::{score_revision, BeliefScore};
use crate::score::reference::BeliefReference;
use crate::score::sample::SampleScore;
use rayon::prelude::*;
use runner_core::stats::bootstrap::{cluster_bootstrap, cluster_bootstrap_many, Estimate};
use serde::Serialize;
use std::collections::BTreeMap;

/// Bootstrap resamples per estimate.
pub const RESAMPLES: usize = 1000;
const SEED: u64 = 0xC4E6_2026;

/// One scored sample with what identifies it.
#[derive(Clone, Debug)]
pub struct Scored {
    pub model: String,
    pub condition: String,
    pub seed: u64,
    pub scenario: ScenarioId,
    pub regime: Regime,
    pub pair_id: Option<String>,
    pub question: Question,
    pub score: SampleScore,
}

impl Scored {
    /// The scored sample of `question` on `scenario`, answered by `model` under
    /// `condition` with `seed`.
    pub fn new(
        model: &str,
        condition: &str,
        seed: u64,
        scenario: &Scenario,
        question: Question,
        score: SampleScore,
    ) -> Scored {
        Scored {
            model: model.to_string(),
            condition: condition.to_string(),
            seed,
            scenario: scenario.id.clone(),
            regime: scenario.metadata.trajectory_regime,
            pair_id: scenario.metadata.counterfactual_pair_id.clone(),
            question,
            score,
        }
    }
}

/// What an estimate is of. `regime` and `seed` are `None` for the pooled figure.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub struct Cell {
    pub model: String,
    pub condition: String,
    pub task: &'static str,
    pub metric: &'static str,
    pub regime: Option<Regime>,
    pub seed: Option<u64>,
}

#[derive(Clone, Debug, Serialize)]
pub struct CellEstimate {
    #[serde(flatten)]
    pub cell: Cell,
    #[serde(flatten)]
    pub estimate: Estimate,
}

/// A paired contrast between two conditions of one model, task and metric.
#[derive(Clone, Debug, Serialize)]
pub struct Contrast {
    pub model: String,
    pub task: &'static str,
    pub metric: &'static str,
    pub condition: String,
    pub baseline_condition: String,
    /// Mean over scenarios of (condition - baseline condition), with its interval.
    #[serde(flatten)]
    pub difference: Estimate,
}

/// The counterfactual-twin analysis for one model and condition.
#[derive(Clone, Debug, Serialize)]
pub struct TwinAnalysis {
    pub model: String,
    pub condition: String,
    /// Share of pairs whose two twins both end in the right state.
    pub both_correct: Estimate,
    /// Mean |p_A - p_B| of the final stated probabilities (the reference's own gap is
    /// given beside it): how far relation content alone moves the answer.
    pub stated_gap: Estimate,
    pub reference_gap: f64,
}

#[derive(Clone, Debug, Default, Serialize)]
pub struct Aggregate {
    pub samples: usize,
    pub estimates: Vec<CellEstimate>,
    /// Answered and total samples per model, condition, task (and [`ALL_TASKS`]),
    /// pooled and per regime.
    pub answered: Vec<Answered>,
    /// (model, condition, task) -> category -> count.
    pub categories: BTreeMap<String, BTreeMap<String, usize>>,
    pub contrasts: Vec<Contrast>,
    pub twins: Vec<TwinAnalysis>,
    /// Calibration: (stated p(anomalous), reference p(anomalous)) per belief sample, binned.
    pub reliability: Vec<ReliabilityBin>,
}

#[derive(Clone, Debug, Serialize)]
pub struct ReliabilityBin {
    pub model: String,
    pub condition: String,
    pub lo: f64,
    pub hi: f64,
    pub count: usize,
    pub mean_stated: f64,
    pub mean_reference: f64,
}

/// Per-sample numeric metrics, including the trajectory metrics that need the previous
/// prefix's answer and the scenario's all-prefixes-correct flag.
fn expand(
    samples: &[Scored],
    scenarios: &BTreeMap<&ScenarioId, &Scenario>,
) -> Vec<(usize, &'static str, f64)> {
    let mut out = Vec::new();
    // Trajectories: (model, condition, seed, scenario) -> belief samples by step.
    type Trajectory<'a> = Vec<(usize, usize, &'a BeliefScore)>;
    let mut trajectories: BTreeMap<(&str, &str, u64, &ScenarioId), Trajectory> = BTreeMap::new();
    for (i, s) in samples.iter().enumerate() {
        for (name, v) in s.score.metrics() {
            if let Some(v) = v {
                out.push((i, name, v));
            }
        }
        if let (Question::Belief { step }, SampleScore::Belief(b)) = (s.question, &s.score) {
            trajectories
                .entry((&s.model, &s.condition, s.seed, &s.scenario))
                .or_default()
                .push((step, i, b));
        }
    }
    for ((_, _, _, id), mut steps) in trajectories {
        let Some(scenario) = scenarios.get(id) else {
            continue;
        };
        steps.sort_by_key(|(step, _, _)| *step);
        let complete = steps.len() + 1 == scenario.evaluation.belief_trajectory.len();
        let mut previous: Option<&BeliefScore> = None;
        let mut expected_step = 1;
        for &(step, i, b) in &steps {
            // Only a contiguous run of prefixes has a previous answer to compare with.
            let prev = if step == expected_step {
                previous
            } else {
                None
            };
            if let Some(r) = BeliefReference::at(scenario, step) {
                if step == 1 || prev.is_some() {
                    for (name, v) in score_revision(prev, b, &r).metrics() {
                        if let Some(v) = v {
                            out.push((i, name, v));
                        }
                    }
                }
            }
            previous = Some(b);
            expected_step = step + 1;
        }
        if complete {
            let all = steps.iter().all(|(_, _, b)| b.top_state_correct);
            let (_, last_i, _) = steps[steps.len() - 1];
            out.push((last_i, "all_prefixes_correct", if all { 1.0 } else { 0.0 }));
        }
    }
    out
}

/// (scenario, metric, value) triples of one group of samples.
type Values<'a> = Vec<(&'a ScenarioId, &'static str, f64)>;

/// Bootstraps every metric of one group (clusters = scenarios) from shared resamples.
fn estimate_group(values: &[(&ScenarioId, &'static str, f64)]) -> Vec<(&'static str, Estimate)> {
    // Metric names are static strings from a handful of places: a short list beats a map.
    let mut metrics: Vec<&'static str> = Vec::new();
    let mut slot_of =
        |m: &'static str| match metrics.iter().position(|k| std::ptr::eq(*k, m) || *k == m) {
            Some(i) => i,
            None => {
                metrics.push(m);
                metrics.len() - 1
            }
        };
    let slots: Vec<usize> = values.iter().map(|(_, m, _)| slot_of(m)).collect();
    let width = metrics.len();
    let mut rows: std::collections::HashMap<&ScenarioId, usize> = std::collections::HashMap::new();
    let mut clusters: Vec<Vec<(f64, usize)>> = Vec::new();
    for ((id, _, v), slot) in values.iter().zip(slots) {
        let row = *rows.entry(*id).or_insert_with(|| {
            clusters.push(vec![(0.0, 0); width]);
            clusters.len() - 1
        });
        let cell = &mut clusters[row][slot];
        cell.0 += v;
        cell.1 += 1;
    }
    // Clusters in scenario order: the intervals must not depend on the order samples came in.
    let mut order: Vec<(&ScenarioId, usize)> = rows.into_iter().collect();
    order.sort();
    let clusters: Vec<Vec<(f64, usize)>> = order
        .into_iter()
        .map(|(_, row)| std::mem::take(&mut clusters[row]))
        .collect();
    let mut out: Vec<(&'static str, Estimate)> = metrics
        .into_iter()
        .zip(cluster_bootstrap_many(&clusters, RESAMPLES, SEED))
        .filter_map(|(m, e)| e.map(|e| (m, e)))
        .collect();
    out.sort_by(|a, b| a.0.cmp(b.0));
    out
}

/// Aggregates scored samples of any number of models, conditions and seeds.
pub fn aggregate(samples: &[Scored], suite: &[Scenario]) -> Aggregate {
    let scenarios: BTreeMap<&ScenarioId, &Scenario> = suite.iter().map(|s| (&s.id, s)).collect();
    let values = expand(samples, &scenarios);

    // Group every value into the cells it belongs to: pooled, per regime, per seed. A
    // group's metrics share their resamples.
    type Group<'a> = (&'a str, &'a str, &'static str, Option<Regime>, Option<u64>);
    // Keys are resolved once per sample, not once per value: a sample has ~20 values.
    let mut index: std::collections::HashMap<Group, usize> = std::collections::HashMap::new();
    let mut keys: Vec<Group> = Vec::new();
    // The first three groups are the sample's task's; the last three pool every task and
    // take its contract failure only.
    let sample_groups: Vec<[usize; 6]> = samples
        .iter()
        .map(|s| {
            let task = s.question.task_name();
            [
                (task, None, None),
                (task, Some(s.regime), None),
                (task, None, Some(s.seed)),
                (ALL_TASKS, None, None),
                (ALL_TASKS, Some(s.regime), None),
                (ALL_TASKS, None, Some(s.seed)),
            ]
            .map(|(task, regime, seed)| {
                let key = (s.model.as_str(), s.condition.as_str(), task, regime, seed);
                *index.entry(key).or_insert_with(|| {
                    keys.push(key);
                    keys.len() - 1
                })
            })
        })
        .collect();
    let mut grouped: Vec<Values> = vec![Vec::new(); keys.len()];
    for &(i, metric, v) in &values {
        let groups = &sample_groups[i];
        let all_tasks = if metric == CONTRACT_FAILURE {
            &groups[3..]
        } else {
            &[]
        };
        for &g in groups[..3].iter().chain(all_tasks) {
            grouped[g].push((&samples[i].scenario, metric, v));
        }
    }
    let groups: BTreeMap<Group, Values> = keys.into_iter().zip(grouped).collect();
    let mut estimates: Vec<CellEstimate> = groups
        .par_iter()
        .flat_map_iter(|((model, condition, task, regime, seed), vals)| {
            estimate_group(vals)
                .into_iter()
                .map(|(metric, estimate)| CellEstimate {
                    cell: Cell {
                        model: model.to_string(),
                        condition: condition.to_string(),
                        task,
                        metric,
                        regime: *regime,
                        seed: *seed,
                    },
                    estimate,
                })
        })
        .collect();
    estimates.sort_by(|a, b| a.cell.cmp(&b.cell));

    let mut categories: BTreeMap<String, BTreeMap<String, usize>> = BTreeMap::new();
    for s in samples {
        let key = format!("{} / {} / {}", s.model, s.condition, s.question.task_name());
        *categories
            .entry(key)
            .or_default()
            .entry(s.score.category().to_string())
            .or_default() += 1;
    }

    Aggregate {
        samples: samples.len(),
        answered: crate::score::answered::count(samples.iter().map(|s| {
            (
                s.model.as_str(),
                s.condition.as_str(),
                s.question.task_name(),
                s.regime,
                s.score.contract_failure(),
            )
        })),
        contrasts: contrasts(samples, &values),
        twins: twins(samples, &scenarios),
        reliability: reliability(samples),
        estimates,
        categories,
    }
}

/// Paired contrasts: each condition against full_graph (and full_graph against
/// graph_without_relations, the relation-content contrast) for every model, task and metric.
fn contrasts(samples: &[Scored], values: &[(usize, &'static str, f64)]) -> Vec<Contrast> {
    type Key<'a> = (&'a str, &'static str, &'static str);
    // (model, task, metric) -> condition -> scenario -> values
    let mut table: BTreeMap<Key, BTreeMap<&str, BTreeMap<&ScenarioId, Vec<f64>>>> = BTreeMap::new();
    for &(i, metric, v) in values {
        let s = &samples[i];
        table
            .entry((&s.model, s.question.task_name(), metric))
            .or_default()
            .entry(&s.condition)
            .or_default()
            .entry(&s.scenario)
            .or_default()
            .push(v);
    }
    // One bootstrap per (model, task, condition, baseline condition) covering all metrics.
    let mut by_pair: BTreeMap<(&str, &'static str, &str, &str), Values> = BTreeMap::new();
    for ((model, task, metric), by_condition) in &table {
        let mut pairs: Vec<(&str, &str)> = by_condition
            .keys()
            .filter(|c| **c != "full_graph")
            .map(|c| (*c, "full_graph"))
            .collect();
        if by_condition.contains_key("graph_without_relations") {
            pairs.push(("full_graph", "graph_without_relations"));
        }
        for (cond, base) in pairs {
            let (Some(a), Some(b)) = (by_condition.get(cond), by_condition.get(base)) else {
                continue;
            };
            let mean = |v: &Vec<f64>| v.iter().sum::<f64>() / v.len() as f64;
            let diffs = by_pair.entry((*model, *task, cond, base)).or_default();
            for (id, va) in a {
                if let Some(vb) = b.get(id) {
                    diffs.push((*id, *metric, mean(va) - mean(vb)));
                }
            }
        }
    }
    let mut out: Vec<Contrast> = by_pair
        .into_par_iter()
        .flat_map_iter(|((model, task, cond, base), diffs)| {
            estimate_group(&diffs)
                .into_iter()
                .map(move |(metric, difference)| Contrast {
                    model: model.to_string(),
                    task,
                    metric,
                    condition: cond.to_string(),
                    baseline_condition: base.to_string(),
                    difference,
                })
        })
        .collect();
    out.sort_by(|a, b| {
        (&a.model, a.task, a.metric, &a.condition).cmp(&(&b.model, b.task, b.metric, &b.condition))
    });
    out
}

/// The 25 relation-association pairs: do the twins' final answers follow the relations?
fn twins(samples: &[Scored], scenarios: &BTreeMap<&ScenarioId, &Scenario>) -> Vec<TwinAnalysis> {
    // (model, condition) -> pair -> seed -> [(scenario, p, correct)]
    type Finals<'a> = BTreeMap<&'a str, BTreeMap<u64, Vec<(&'a ScenarioId, f64, bool)>>>;
    let mut by_cell: BTreeMap<(&str, &str), Finals> = BTreeMap::new();
    for s in samples {
        let (Some(pair), Question::Belief { step }, SampleScore::Belief(b)) =
            (&s.pair_id, s.question, &s.score)
        else {
            continue;
        };
        let Some(scenario) = scenarios.get(&s.scenario) else {
            continue;
        };
        if step + 1 != scenario.evaluation.belief_trajectory.len() {
            continue;
        }
        by_cell
            .entry((&s.model, &s.condition))
            .or_default()
            .entry(pair)
            .or_default()
            .entry(s.seed)
            .or_default()
            .push((&s.scenario, b.p_anomalous, b.top_state_correct));
    }
    let mut out = Vec::new();
    for ((model, condition), pairs) in by_cell {
        let (mut both, mut gap, mut ref_gap) = (Vec::new(), Vec::new(), Vec::new());
        for seeds in pairs.values() {
            let (mut b_vals, mut g_vals) = (Vec::new(), Vec::new());
            for finals in seeds.values() {
                let [a, b] = finals.as_slice() else { continue };
                b_vals.push(if a.2 && b.2 { 1.0 } else { 0.0 });
                g_vals.push((a.1 - b.1).abs());
                let p = |id: &ScenarioId| {
                    scenarios[id]
                        .evaluation
                        .beliefs
                        .reference_distribution
                        .anomalous
                };
                ref_gap.push((p(a.0) - p(b.0)).abs());
            }
            both.push(b_vals);
            gap.push(g_vals);
        }
        let (Some(both_correct), Some(stated_gap)) = (
            cluster_bootstrap(&both, RESAMPLES, SEED),
            cluster_bootstrap(&gap, RESAMPLES, SEED),
        ) else {
            continue;
        };
        out.push(TwinAnalysis {
            model: model.to_string(),
            condition: condition.to_string(),
            both_correct,
            stated_gap,
            reference_gap: ref_gap.iter().sum::<f64>() / ref_gap.len().max(1) as f64,
        });
    }
    out
}

/// The reliability bin (of ten, equal width; 1.0 in the last) of a stated p(anomalous).
pub fn reliability_bin(p: f64) -> usize {
    ((p * 10.0).floor() as usize).min(9)
}

/// How the reports name bin `bin` of the reliability table: `[0.2, 0.3)`.
pub fn reliability_bin_label(bin: usize) -> String {
    format!("[{:.1}, {:.1})", bin as f64 / 10.0, (bin + 1) as f64 / 10.0)
}

impl ReliabilityBin {
    pub fn label(&self) -> String {
        // lo is bin / 10 exactly as computed there; rounding undoes the division.
        reliability_bin_label((self.lo * 10.0).round() as usize)
    }
}

/// Ten equal-width bins of stated p(anomalous), with the mean reference probability in each.
fn reliability(samples: &[Scored]) -> Vec<ReliabilityBin> {
    let mut bins: BTreeMap<(&str, &str, usize), (usize, f64, f64)> = BTreeMap::new();
    for s in samples {
        let SampleScore::Belief(b) = &s.score else {
            continue;
        };
        if b.contract_failure {
            continue;
        }
        let reference = b.reference_p_anomalous;
        let bin = reliability_bin(b.p_anomalous);
        let e = bins.entry((&s.model, &s.condition, bin)).or_default();
        e.0 += 1;
        e.1 += b.p_anomalous;
        e.2 += reference;
    }
    bins.into_iter()
        .map(
            |((model, condition, bin), (count, stated, reference))| ReliabilityBin {
                model: model.to_string(),
                condition: condition.to_string(),
                lo: bin as f64 / 10.0,
                hi: (bin + 1) as f64 / 10.0,
                count,
                mean_stated: stated / count as f64,
                mean_reference: reference / count as f64,
            },
        )
        .collect()
}

impl Aggregate {
    /// The pooled estimate of one cell, if present.
    pub fn pooled(
        &self,
        model: &str,
        condition: &str,
        task: &str,
        metric: &str,
    ) -> Option<&Estimate> {
        self.find(model, condition, task, metric, None)
    }

    /// Answered and total samples of one cell (`task` may be [`ALL_TASKS`]).
    pub fn answered(
        &self,
        model: &str,
        condition: &str,
        task: &str,
        regime: Option<Regime>,
    ) -> Option<&Answered> {
        self.answered.iter().find(|n| {
            n.model == model && n.condition == condition && n.task == task && n.regime == regime
        })
    }

    /// The contrast of `metric` between the same pair of conditions as `k`.
    pub fn companion(&self, k: &Contrast, metric: &str) -> Option<&Contrast> {
        self.contrasts.iter().find(|o| {
            o.model == k.model
                && o.task == k.task
                && o.metric == metric
                && o.condition == k.condition
                && o.baseline_condition == k.baseline_condition
        })
    }

    pub fn find(
        &self,
        model: &str,
        condition: &str,
        task: &str,
        metric: &str,
        regime: Option<Regime>,
    ) -> Option<&Estimate> {
        self.estimates
            .iter()
            .find(|e| {
                let c = &e.cell;
                c.model == model
                    && c.condition == condition
                    && c.task == task
                    && c.metric == metric
                    && c.regime == regime
                    && c.seed.is_none()
            })
            .map(|e| &e.estimate)
    }
}

/// The best value a metric can take: 0 for error-like metrics, 1 for the rest; `None`
/// for log loss, whose floor is the reference's own entropy.
pub fn best_value(metric: &str) -> Option<f64> {
    match metric {
        "log_loss" => None,
        "abs_error" | "total_variation" | "brier" | "contract_failure" | "leakage" | "unsafe"
        | "inadmissible" | "invented_ids" | "unnecessary_update" | "twin_stated_gap" => Some(0.0),
        _ => Some(1.0),
    }
}

impl Aggregate {
    /// Pooled figures of `model` that miss their metric's best value, as
    /// `condition/task/metric = value (best b)`: empty for a system that scores perfectly.
    pub fn shortfalls(&self, model: &str) -> Vec<String> {
        self.estimates
            .iter()
            .filter(|e| e.cell.model == model && e.cell.regime.is_none() && e.cell.seed.is_none())
            .filter_map(|e| {
                let best = best_value(e.cell.metric)?;
                ((e.estimate.mean - best).abs() > 1e-9).then(|| {
                    format!(
                        "{}/{}/{} = {:.4} (best {best})",
                        e.cell.condition, e.cell.task, e.cell.metric, e.estimate.mean
                    )
                })
            })
            .collect()
    }
}
