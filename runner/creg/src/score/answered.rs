//! How many samples of each cell kept the output contract: the reports show it beside
//! every figure, so that none computed on stand-ins reads as a score.

use crate::record::Regime;
use serde::Serialize;
use std::collections::BTreeMap;

/// The task under which the contract failures of every task of a model and condition
/// are pooled: the headline's contract-fail column covers the whole run, not one task.
pub const ALL_TASKS: &str = "all";

/// The contract-failure metric, the one figure that is never computed on a stand-in.
pub const CONTRACT_FAILURE: &str = "contract_failure";

/// How many samples of a cell kept the output contract. A sample that failed it is
/// scored on a stand-in answer (p = 0.5, no action, no ids): its figures say nothing of
/// the model's reasoning, so the reports show this count beside every figure.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Answered {
    pub model: String,
    pub condition: String,
    pub task: &'static str,
    pub regime: Option<Regime>,
    pub answered: usize,
    pub total: usize,
}

/// Answered and total samples per model, condition and task (and all tasks), pooled
/// and per regime, from each sample's (model, condition, task, regime, contract failure).
pub fn count<'a>(
    samples: impl Iterator<Item = (&'a str, &'a str, &'static str, Regime, bool)>,
) -> Vec<Answered> {
    type Key<'a> = (&'a str, &'a str, &'static str, Option<Regime>);
    let mut counts: BTreeMap<Key, (usize, usize)> = BTreeMap::new();
    for (model, condition, task, regime, failed) in samples {
        for task in [task, ALL_TASKS] {
            for regime in [None, Some(regime)] {
                let c = counts.entry((model, condition, task, regime)).or_default();
                c.0 += usize::from(!failed);
                c.1 += 1;
            }
        }
    }
    counts
        .into_iter()
        .map(
            |((model, condition, task, regime), (answered, total))| Answered {
                model: model.to_string(),
                condition: condition.to_string(),
                task,
                regime,
                answered,
                total,
            },
        )
        .collect()
}
