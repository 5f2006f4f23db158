//! The four tasks: the belief question at every prefix, and three endpoint tasks asked
//! once per scenario after all of its evidence has arrived.

use crate::render::templates::{self, PromptFile};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Task {
    Belief,
    Contradiction,
    Action,
    Explanation,
}

impl Task {
    pub const ALL: [Task; 4] = [
        Task::Belief,
        Task::Contradiction,
        Task::Action,
        Task::Explanation,
    ];

    /// The position in [`Task::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }

    pub fn name(self) -> &'static str {
        match self {
            Task::Belief => "belief",
            Task::Contradiction => "contradiction",
            Task::Action => "action",
            Task::Explanation => "explanation",
        }
    }

    pub fn template(self) -> &'static PromptFile {
        match self {
            Task::Belief => &templates::TASK_BELIEF,
            Task::Contradiction => &templates::TASK_CONTRADICTION,
            Task::Action => &templates::TASK_ACTION,
            Task::Explanation => &templates::TASK_EXPLANATION,
        }
    }

    /// The JSON Schema an answer must satisfy.
    pub fn contract(self) -> &'static PromptFile {
        match self {
            Task::Belief => &templates::CONTRACT_BELIEF,
            Task::Contradiction => &templates::CONTRACT_CONTRADICTION,
            Task::Action => &templates::CONTRACT_ACTION,
            Task::Explanation => &templates::CONTRACT_EXPLANATION,
        }
    }

    /// The arrival steps at which the task is asked of a scenario with `steps`
    /// observations: every prefix for the belief, the endpoint for the others.
    pub fn steps(self, steps: usize) -> std::ops::RangeInclusive<usize> {
        match self {
            Task::Belief => 1..=steps,
            Task::Contradiction | Task::Action | Task::Explanation => steps..=steps,
        }
    }
}

impl fmt::Display for Task {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug, thiserror::Error)]
#[error("unknown task `{0}` (expected belief, contradiction, action or explanation)")]
pub struct UnknownTask(pub String);

impl FromStr for Task {
    type Err = UnknownTask;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Task::ALL
            .into_iter()
            .find(|t| t.name() == s)
            .ok_or_else(|| UnknownTask(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn schema(t: Task) -> Value {
        serde_json::from_str(t.contract().text).unwrap()
    }

    /// Every property name anywhere in a schema (nested objects and array items too).
    fn property_names(v: &Value, out: &mut std::collections::BTreeSet<String>) {
        if let Some(props) = v.get("properties").and_then(Value::as_object) {
            for (k, sub) in props {
                out.insert(k.clone());
                property_names(sub, out);
            }
        }
        if let Some(items) = v.get("items") {
            property_names(items, out);
        }
    }

    /// The answer shape each template spells out names exactly the contract's
    /// properties, and the contract requires all of them.
    #[test]
    fn templates_ask_for_exactly_the_contract_fields() {
        for t in Task::ALL {
            let s = schema(t);
            assert_eq!(s["additionalProperties"], false, "{t}");
            let required = s["required"].as_array().unwrap().len();
            let top = s["properties"].as_object().unwrap().len();
            assert_eq!(required, top, "{t}: every property is required");
            let mut in_schema = std::collections::BTreeSet::new();
            property_names(&s, &mut in_schema);
            let shape = t
                .template()
                .text
                .lines()
                .find(|l| l.starts_with("{\""))
                .unwrap_or_else(|| panic!("{t}: no answer shape line"));
            let in_shape: std::collections::BTreeSet<String> = shape
                .split('"')
                .collect::<Vec<_>>()
                .windows(2)
                .filter(|w| w[1].starts_with(':'))
                .map(|w| w[0].to_string())
                .collect();
            assert_eq!(in_shape, in_schema, "{t}");
        }
    }

    /// Answers must fit the 512-token output budget: no prose around the object.
    #[test]
    fn templates_ask_for_the_json_object_alone() {
        for t in Task::ALL {
            assert!(t.template().text.contains("JSON object alone"), "{t}");
        }
    }

    #[test]
    fn action_choices_are_the_four_published_ones() {
        let s = schema(Task::Action);
        let choices: Vec<&str> = s["properties"]["action_type"]["enum"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        let expected: Vec<&str> = crate::record::ActionType::CHOICES
            .iter()
            .map(|a| a.name())
            .collect();
        assert_eq!(choices, expected);
    }

    #[test]
    fn names_round_trip() {
        for (i, t) in Task::ALL.into_iter().enumerate() {
            assert_eq!(t.name().parse::<Task>().unwrap(), t);
            assert_eq!(t.index(), i);
        }
        assert_eq!(Task::Belief.steps(4).count(), 4);
        assert_eq!(Task::Action.steps(4).collect::<Vec<_>>(), vec![4]);
    }
}
