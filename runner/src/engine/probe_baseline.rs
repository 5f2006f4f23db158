//! The Probe baseline systems (`oracle`, `no-propagation`, see
//! [`crate::suite::probe::baselines`]) behind the [`Backend`] trait, so that they take
//! the runner's whole path (plan, journal, streaming scorer, reports) like a model.
//! Like the CREG [`BaselineBackend`](super::baseline::BaselineBackend) it reads the
//! items, not the prompt: `questions` maps each request id to the question it asks.
//! The answer is plain text (an abstention reads "unknown") and depends on no seed.

use super::{Backend, EngineError, FinishReason, Request, Sample, Timings};
use crate::id::RequestId;
use crate::suite::probe::baselines::System;
use crate::suite::probe::prompts::Question;
use crate::suite::probe::records::{PitItem, ProbeItem};
use std::collections::HashMap;

pub struct ProbeBaselineBackend {
    system: System,
    core: Vec<ProbeItem>,
    pit: Vec<PitItem>,
    questions: HashMap<RequestId, Question>,
}

impl ProbeBaselineBackend {
    /// `core` and `pit` are the items the questions' indices point into.
    pub fn new(
        system: System,
        core: Vec<ProbeItem>,
        pit: Vec<PitItem>,
        questions: impl IntoIterator<Item = (RequestId, Question)>,
    ) -> ProbeBaselineBackend {
        ProbeBaselineBackend {
            system,
            core,
            pit,
            questions: questions.into_iter().collect(),
        }
    }
}

impl Backend for ProbeBaselineBackend {
    fn describe(&self) -> String {
        format!("Probe baseline {} (no network)", self.system)
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
            let invalid = |message: &str| EngineError::InvalidRequest {
                id: r.id.to_string(),
                message: message.to_string(),
            };
            let question = self
                .questions
                .get(&r.id)
                .ok_or_else(|| invalid("not a request of this baseline's plan"))?;
            let answer = self
                .system
                .answer(&self.core, &self.pit, *question)
                .ok_or_else(|| invalid("the question points past the Probe items"))?;
            for &seed in &r.seeds {
                on_sample(Sample {
                    request_id: r.id.clone(),
                    seed,
                    text: answer.text.clone(),
                    prompt_tokens: 0,
                    token_ids: Vec::new(),
                    finish_reason: FinishReason::Stop,
                    timings: Timings::default(),
                });
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{Prompt, Sampling};
    use crate::suite::probe::generator::{generate_pit, generate_probe};
    use crate::suite::probe::prompts::Phase;

    fn request(id: &str, seeds: Vec<u64>) -> Request {
        Request {
            id: RequestId::new(id),
            prompt: Prompt::Raw(String::new()),
            seeds,
            max_new_tokens: 8,
            sampling: Sampling::Greedy,
        }
    }

    #[test]
    fn oracle_answers_the_gold_once_per_seed_and_refuses_unknown_requests() {
        let core = generate_probe();
        let pit = generate_pit();
        let unknown_post = core.iter().position(|i| i.gold_post.is_unknown()).unwrap();
        let questions = [
            (
                RequestId::new("a"),
                Question::Core {
                    item: 0,
                    phase: Phase::Pre,
                },
            ),
            (
                RequestId::new("b"),
                Question::Core {
                    item: unknown_post,
                    phase: Phase::Post,
                },
            ),
            (RequestId::new("c"), Question::Pit { item: 0, query: 1 }),
            (RequestId::new("d"), Question::Pit { item: 0, query: 9 }),
        ];
        let gold_pre = core[0].gold_pre.to_string();
        let gold_pit = pit[0].queries[1].gold.to_string();
        let mut b = ProbeBaselineBackend::new(System::Oracle, core, pit, questions);
        let out = b
            .generate(&[
                request("a", vec![1, 2]),
                request("b", vec![1]),
                request("c", vec![1]),
            ])
            .unwrap();
        let texts: Vec<(&str, u64, &str)> = out
            .iter()
            .map(|s| (s.request_id.as_str(), s.seed, s.text.as_str()))
            .collect();
        assert_eq!(
            texts,
            vec![
                ("a", 1, gold_pre.as_str()),
                ("a", 2, gold_pre.as_str()),
                ("b", 1, "unknown"),
                ("c", 1, gold_pit.as_str()),
            ]
        );
        assert!(b.generate(&[request("d", vec![1])]).is_err());
        assert!(b.generate(&[request("zzz", vec![1])]).is_err());
    }
}
