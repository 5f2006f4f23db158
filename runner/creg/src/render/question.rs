//! The questions a CREG scenario asks: the belief at every prefix, then the three
//! endpoint tasks. Rendering, answering (the baselines) and scoring all key on them.

use crate::record::Scenario;
use serde::Serialize;

/// What a sample answers: the belief at one prefix, or one of the endpoint tasks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case", tag = "task")]
pub enum Question {
    Belief { step: usize },
    Contradiction,
    Action,
    Explanation,
}

impl Question {
    pub fn task_name(self) -> &'static str {
        match self {
            Question::Belief { .. } => "belief",
            Question::Contradiction => "contradiction",
            Question::Action => "action",
            Question::Explanation => "explanation",
        }
    }
}

/// Every question a scenario poses: one belief per prefix, then the endpoint tasks.
pub fn questions(s: &Scenario) -> Vec<Question> {
    let prefixes = s.evaluation.belief_trajectory.len().saturating_sub(1);
    (1..=prefixes)
        .map(|step| Question::Belief { step })
        .chain([
            Question::Contradiction,
            Question::Action,
            Question::Explanation,
        ])
        .collect()
}
