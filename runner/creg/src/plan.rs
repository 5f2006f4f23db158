//! Which requests a run makes: condition x scenario x task x prefix, each decoded once
//! per seed; `--limit` keeps the first N scenarios of every regime; `--shard I/N`
//! keeps a deterministic slice by request id, so N shard runs cover the plan exactly once.

use crate::record::{Regime, Scenario};
use crate::render::{Condition, Prompt, Renderer, Task};
pub use runner_core::plan::{BadShard, Shard};
use std::collections::BTreeMap;
use thiserror::Error;

#[derive(Debug, Error, PartialEq)]
pub enum PlanError {
    #[error(transparent)]
    BadShard(#[from] BadShard),
    #[error("--tasks {0:?}: expected belief, endpoint, contradiction, action, explanation or all")]
    BadTasks(String),
    #[error("--condition {given:?}: unknown condition; known: all, principal, {known}")]
    BadCondition { given: String, known: String },
}

/// `belief`, `endpoint` (contradiction, action, explanation), single tasks, or `all`.
pub fn parse_tasks(list: &[String]) -> Result<Vec<Task>, PlanError> {
    let mut out = Vec::new();
    for item in list {
        let more: Vec<Task> = match item.trim() {
            "all" => Task::ALL.to_vec(),
            "belief" => vec![Task::Belief],
            "endpoint" => vec![Task::Contradiction, Task::Action, Task::Explanation],
            other => vec![Task::ALL
                .into_iter()
                .find(|t| t.name() == other)
                .ok_or_else(|| PlanError::BadTasks(item.clone()))?],
        };
        for t in more {
            if !out.contains(&t) {
                out.push(t);
            }
        }
    }
    Ok(out)
}

/// `all` (the nine), `principal` (the four), or names.
pub fn parse_conditions(list: &[String]) -> Result<Vec<Condition>, PlanError> {
    let mut out = Vec::new();
    for item in list {
        let more: Vec<Condition> = match item.trim() {
            "all" => Condition::ALL.to_vec(),
            "principal" => Condition::ALL
                .into_iter()
                .filter(|c| c.is_principal())
                .collect(),
            other => vec![Condition::ALL
                .into_iter()
                .find(|c| c.name() == other)
                .ok_or_else(|| PlanError::BadCondition {
                    given: item.clone(),
                    known: Condition::ALL.map(|c| c.name()).join(", "),
                })?],
        };
        for c in more {
            if !out.contains(&c) {
                out.push(c);
            }
        }
    }
    Ok(out)
}

/// A rendered prompt and the seeds it is decoded with.
#[derive(Clone, Debug)]
pub struct PlannedRequest {
    pub prompt: Prompt,
    pub seeds: Vec<u64>,
}

/// What to plan.
#[derive(Clone, Debug, PartialEq)]
pub struct PlanSpec {
    pub conditions: Vec<Condition>,
    pub tasks: Vec<Task>,
    pub seeds: Vec<u64>,
    /// Keep the first N scenarios of every regime.
    pub limit_per_regime: Option<usize>,
    pub shard: Option<Shard>,
}

/// The scenarios a plan covers: the first `limit` of each regime, in suite order.
pub fn scenarios(suite: &[Scenario], limit_per_regime: Option<usize>) -> Vec<&Scenario> {
    let mut taken: BTreeMap<Regime, usize> = BTreeMap::new();
    suite
        .iter()
        .filter(|s| {
            let n = taken.entry(s.metadata.trajectory_regime).or_default();
            *n += 1;
            limit_per_regime.is_none_or(|limit| *n <= limit)
        })
        .collect()
}

/// Every request of the run, in a fixed order (condition, scenario, task, step).
pub fn plan(renderer: &Renderer, suite: &[Scenario], spec: &PlanSpec) -> Vec<PlannedRequest> {
    let mut out = Vec::new();
    for &condition in &spec.conditions {
        for s in scenarios(suite, spec.limit_per_regime) {
            for &task in &spec.tasks {
                renderer.prompts(s, condition, task, &mut |prompt| {
                    if spec
                        .shard
                        .is_none_or(|sh| sh.contains(prompt.request_id.as_str()))
                    {
                        out.push(PlannedRequest {
                            prompt,
                            seeds: spec.seeds.clone(),
                        });
                    }
                });
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frozen;
    use std::collections::BTreeSet;

    fn spec(shard: Option<Shard>, limit: Option<usize>) -> PlanSpec {
        PlanSpec {
            conditions: parse_conditions(&["principal".into()]).unwrap(),
            tasks: parse_tasks(&["all".into()]).unwrap(),
            seeds: runner_core::protocol::SEEDS.to_vec(),
            limit_per_regime: limit,
            shard,
        }
    }

    #[test]
    fn the_full_plan_has_every_prefix_and_endpoint_task_per_condition() {
        let suite = frozen::frozen_suite().unwrap();
        let r = Renderer::frozen().unwrap();
        let all = plan(&r, &suite, &spec(None, None));
        assert_eq!(all.len(), 4 * (1150 + 3 * 350));
        let ids: BTreeSet<&str> = all.iter().map(|p| p.prompt.request_id.as_str()).collect();
        assert_eq!(ids.len(), all.len(), "request ids are unique");
    }

    #[test]
    fn shards_partition_the_plan() {
        let suite = frozen::frozen_suite().unwrap();
        let r = Renderer::frozen().unwrap();
        let whole: BTreeSet<String> = plan(&r, &suite, &spec(None, Some(3)))
            .into_iter()
            .map(|p| p.prompt.request_id.as_str().to_string())
            .collect();
        let mut union = BTreeSet::new();
        let mut sizes = Vec::new();
        for i in 0..4 {
            let part = plan(
                &r,
                &suite,
                &spec(Some(Shard { index: i, count: 4 }), Some(3)),
            );
            sizes.push(part.len());
            for p in part {
                assert!(
                    union.insert(p.prompt.request_id.as_str().to_string()),
                    "a request in two shards"
                );
            }
        }
        assert_eq!(union, whole);
        assert!(
            sizes.iter().all(|&n| n > whole.len() / 8),
            "shards are roughly even: {sizes:?}"
        );
    }

    #[test]
    fn limit_keeps_the_first_scenarios_of_every_regime() {
        let suite = frozen::frozen_suite().unwrap();
        let kept = scenarios(&suite, Some(2));
        assert_eq!(kept.len(), 14);
        assert!(kept.iter().all(|s| s.metadata.case_index.unwrap() < 2));
    }

    #[test]
    fn bad_arguments_say_what_is_expected() {
        assert_eq!("3/3".parse::<Shard>(), Err(BadShard("3/3".into())));
        assert!("x".parse::<Shard>().is_err());
        assert_eq!("1/3".parse::<Shard>(), Ok(Shard { index: 1, count: 3 }));
        assert!(parse_tasks(&["beleif".into()]).is_err());
        let err = parse_conditions(&["fullgraph".into()])
            .unwrap_err()
            .to_string();
        assert!(err.contains("full_graph"), "{err}");
        assert_eq!(
            parse_tasks(&["endpoint".into(), "belief".into()])
                .unwrap()
                .len(),
            4
        );
    }
}
