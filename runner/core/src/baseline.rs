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

use runner_engine::{EngineError, FinishReason, Request, Sample, Timings};

/// A baseline name that is not one of the suite's systems.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown baseline {given:?}; known: {}", known.join(", "))]
pub struct UnknownSystem {
    pub given: String,
    pub known: Vec<&'static str>,
}

/// The generate loop both suites share: one answer per request, the same text for
/// every seed. `answer` returns the text or why the request cannot be answered.
pub fn answer_each(
    requests: &[Request],
    on_sample: &mut dyn FnMut(Sample),
    mut answer: impl FnMut(&Request) -> Result<String, String>,
) -> Result<(), EngineError> {
    for r in requests {
        let text = answer(r).map_err(|message| EngineError::InvalidRequest {
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
