//! What every suite's baseline systems share (each suite keeps its own in its crate):
//! systems that answer without a network, behind the [`Backend`]
//! trait so that they take the runner's whole path (plan, journal, streaming scorer,
//! reports) like a model. They read the suite's records as data (never the scorer):
//! each request id maps to the question it asks, and the answer depends on no seed.

/// `Display` and `FromStr` for a suite's `System` enum from its `ALL` and `name()`, so
/// that both suites spell and refuse names alike.
#[macro_export]
macro_rules! system_names {
    ($system:ty) => {
        impl std::fmt::Display for $system {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }

        impl std::str::FromStr for $system {
            type Err = $crate::baseline::UnknownSystem;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                <$system>::ALL
                    .into_iter()
                    .find(|x| x.name() == s)
                    .ok_or_else(|| $crate::baseline::UnknownSystem {
                        given: s.to_string(),
                        known: <$system>::ALL.iter().map(|x| x.name()).collect(),
                    })
            }
        }
    };
}

use runner_engine::id::RequestId;
use runner_engine::{Backend, EngineError, FinishReason, Request, Sample, Timings};
use std::collections::HashMap;

/// A baseline name that is not one of the suite's systems.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown baseline {given:?}; known: {}", known.join(", "))]
pub struct UnknownSystem {
    pub given: String,
    pub known: Vec<&'static str>,
}

/// What one of a suite's baseline systems knows: the answer to each of its questions.
pub trait Answers {
    /// What a request asks, as the suite's plan says.
    type Question;
    /// How the manifest names the system.
    fn describe(&self) -> String;
    /// The answer text, or why the question cannot be answered.
    fn answer(&self, question: &Self::Question) -> Result<String, String>;
}

/// A suite's baseline system behind the [`Backend`] trait: each request id maps to its
/// question; one answer per request, the same text for every seed.
pub struct BaselineBackend<A: Answers> {
    answers: A,
    questions: HashMap<RequestId, A::Question>,
}

impl<A: Answers> BaselineBackend<A> {
    pub fn new(answers: A, questions: impl IntoIterator<Item = (RequestId, A::Question)>) -> Self {
        BaselineBackend {
            answers,
            questions: questions.into_iter().collect(),
        }
    }
}

impl<A: Answers> Backend for BaselineBackend<A> {
    fn describe(&self) -> String {
        self.answers.describe()
    }

    fn preferred_batch(&self) -> usize {
        512
    }

    fn generate_each(
        &mut self,
        requests: &[Request],
        on_sample: &mut dyn FnMut(Sample),
    ) -> Result<(), EngineError> {
        for r in requests {
            let text = self
                .questions
                .get(&r.id)
                .ok_or_else(|| "not a request of this baseline's plan".to_string())
                .and_then(|q| self.answers.answer(q))
                .map_err(|message| EngineError::InvalidRequest {
                    id: r.id.to_string(),
                    message,
                })?;
            for &seed in &r.seeds {
                on_sample(Sample {
                    request_id: r.id.clone(),
                    seed,
                    text: text.clone(),
                    prompt_tokens: 0,
                    token_ids: Vec::new(),
                    reported_tokens: None,
                    finish_reason: FinishReason::Stop,
                    timings: Timings::default(),
                });
            }
        }
        Ok(())
    }
}
