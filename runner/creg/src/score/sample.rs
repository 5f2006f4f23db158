//! One sample, end to end: the model's text for a task of a scenario, parsed against
//! the task's contract and scored against the reference. The runner streams every
//! finished sample through here; `runner score` replays journals through the same code.

use crate::record::Scenario;
use crate::render::question::Question;
use crate::score::contract;
use crate::score::metrics::{self, ActionScore, BeliefScore, ContradictionScore, ExplanationScore};
use crate::score::reference::{BeliefReference, EndpointReference};
use runner_engine::finish::FinishReason;
use serde::Serialize;

#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum SampleScore {
    Belief(BeliefScore),
    Contradiction(ContradictionScore),
    Action(ActionScore),
    Explanation(ExplanationScore),
}

impl SampleScore {
    pub fn category(&self) -> &'static str {
        match self {
            SampleScore::Belief(s) => s.category,
            SampleScore::Contradiction(s) => s.category,
            SampleScore::Action(s) => s.category,
            SampleScore::Explanation(s) => s.category,
        }
    }

    /// The answer failed its task's output contract: its figures are stand-ins.
    pub fn contract_failure(&self) -> bool {
        match self {
            SampleScore::Belief(s) => s.contract_failure,
            SampleScore::Contradiction(s) => s.contract_failure,
            SampleScore::Action(s) => s.contract_failure,
            SampleScore::Explanation(s) => s.contract_failure,
        }
    }

    pub fn metrics(&self) -> Vec<(&'static str, Option<f64>)> {
        match self {
            SampleScore::Belief(s) => s.metrics(),
            SampleScore::Contradiction(s) => s.metrics(),
            SampleScore::Action(s) => s.metrics(),
            SampleScore::Explanation(s) => s.metrics(),
        }
    }
}

/// Parses and scores `text`; `None` when the question does not exist in the scenario
/// (a belief step beyond its last prefix, or the prior).
pub fn score_text(
    s: &Scenario,
    q: Question,
    text: &str,
    finish: FinishReason,
) -> Option<SampleScore> {
    Some(match q {
        Question::Belief { step } => {
            let r = BeliefReference::at(s, step)?;
            SampleScore::Belief(metrics::score_belief(
                &contract::parse_belief(text, finish),
                &r,
            ))
        }
        Question::Contradiction => SampleScore::Contradiction(metrics::score_contradiction(
            &contract::parse_contradiction(text, finish),
            &EndpointReference::of(s),
        )),
        Question::Action => SampleScore::Action(metrics::score_action(
            &contract::parse_action(text, finish),
            &EndpointReference::of(s),
        )),
        Question::Explanation => SampleScore::Explanation(metrics::score_explanation(
            &contract::parse_explanation(text, finish),
            &EndpointReference::of(s),
        )),
    })
}
