//! Systems that answer without a network, to pin the scorer's ends.
//!
//! * `oracle` answers the golds; it must score perfectly.
//! * `no-propagation` reads the oracle facts as a parser would and remembers the chain
//!   exactly as it was stated: the latest stated root and the link values in the order
//!   they were stated. It replaces a value only when the same statement is made again,
//!   never re-derives what hangs off a changed root, ignores user-level statements about
//!   derived conclusions (it keeps no conclusions), and ignores withdrawals, which state
//!   no new value. So it answers the last stated value: right on hop-1 replacements,
//!   stale on every derived and multi-hop item.

//!
//! [`backend`] puts them behind the [`Backend`] trait; like the CREG
//! baselines it reads the items, not the prompt. An abstention reads "unknown".

use crate::record::{Axis, PitItem, ProbeItem};
use crate::render::{Phase, Question};
use crate::response::{Answer, PitResponse, ProbeResponse};
use runner_core::baseline::{Answers, BaselineBackend};
use runner_engine::id::RequestId;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum System {
    Oracle,
    NoPropagation,
}

impl System {
    pub const ALL: [System; 2] = [System::Oracle, System::NoPropagation];

    pub fn name(self) -> &'static str {
        match self {
            System::Oracle => "oracle",
            System::NoPropagation => "no-propagation",
        }
    }

    pub fn answer_probe(self, item: &ProbeItem) -> ProbeResponse {
        match self {
            System::Oracle => oracle_probe(item),
            System::NoPropagation => no_propagation_probe(item),
        }
    }

    pub fn answer_pit(self, item: &PitItem) -> PitResponse {
        match self {
            System::Oracle => PitResponse {
                answers: item
                    .queries
                    .iter()
                    .map(|q| gold_answer(q.gold.value()))
                    .collect(),
            },
            System::NoPropagation => {
                let last = item
                    .oracle_facts
                    .iter()
                    .flatten()
                    .rfind(|f| f.subject == "user")
                    .map(|f| f.object.clone());
                PitResponse {
                    answers: item
                        .queries
                        .iter()
                        .map(|_| gold_answer(last.as_deref()))
                        .collect(),
                }
            }
        }
    }
}

impl System {
    /// The answer to one question of a Probe set (`core` and `pit` are its items);
    /// `None` when the question points past the items or queries.
    pub fn answer(self, core: &[ProbeItem], pit: &[PitItem], question: Question) -> Option<Answer> {
        match question {
            Question::Core { item, phase } => {
                let r = self.answer_probe(core.get(item)?);
                Some(match phase {
                    Phase::Pre => r.pre,
                    Phase::Post => r.post,
                    Phase::Followup => Answer::text(
                        serde_json::json!({
                            "invalidated": r.invalidated.unwrap_or_default(),
                            "axis": r.axis_pred,
                        })
                        .to_string(),
                    ),
                })
            }
            Question::Pit { item, query } => self
                .answer_pit(pit.get(item)?)
                .answers
                .into_iter()
                .nth(query),
        }
    }
}

runner_core::system_names!(System);

fn gold_answer(value: Option<&str>) -> Answer {
    match value {
        Some(v) => Answer::text(v),
        None => Answer::abstention(),
    }
}

fn oracle_probe(item: &ProbeItem) -> ProbeResponse {
    ProbeResponse {
        pre: gold_answer(item.gold_pre.value()),
        post: gold_answer(item.gold_post.value()),
        invalidated: Some(item.gold_invalidated.iter().map(|r| r.0.clone()).collect()),
        axis_pred: Some(item.gold_axis),
        followup_failed: false,
    }
}

/// The value at chain position k as stated in the first `sessions` sessions.
fn stated_value(item: &ProbeItem, sessions: usize, k: usize) -> Option<String> {
    let mut facts = item.oracle_facts.iter().take(sessions).flatten();
    let root_relation = item
        .oracle_facts
        .iter()
        .flatten()
        .find(|f| f.subject == "user")?
        .relation
        .clone();
    if k == 1 {
        return facts
            .rfind(|f| f.subject == "user" && f.relation == root_relation)
            .map(|f| f.object.clone());
    }
    facts
        .filter(|f| f.subject != "user")
        .nth(k - 2)
        .map(|f| f.object.clone())
}

fn no_propagation_probe(item: &ProbeItem) -> ProbeResponse {
    let n = item.oracle_facts.len();
    let k = usize::from(item.hop_depth.get());
    let root_relation = item
        .oracle_facts
        .iter()
        .flatten()
        .find(|f| f.subject == "user")
        .map(|f| f.relation.clone());
    let restated_root = item
        .oracle_facts
        .last()
        .into_iter()
        .flatten()
        .any(|f| f.subject == "user" && Some(&f.relation) == root_relation.as_ref());
    ProbeResponse {
        pre: gold_answer(stated_value(item, n.saturating_sub(1), k).as_deref()),
        post: gold_answer(stated_value(item, n, k).as_deref()),
        invalidated: Some(
            root_relation
                .filter(|_| restated_root)
                .map(|r| vec![r.0])
                .unwrap_or_default(),
        ),
        axis_pred: Some(Axis::Update),
        followup_failed: false,
    }
}

/// A Probe baseline system's answers over the items its questions point into, behind
/// the [`Backend`](runner_engine::Backend) trait through
/// [`runner_core::baseline::BaselineBackend`].
pub struct ProbeAnswers {
    system: System,
    core: Vec<ProbeItem>,
    pit: Vec<PitItem>,
}

/// The baseline `system` over `core` and `pit` (the items the questions' indices point
/// into), for requests asking `questions`.
pub fn backend(
    system: System,
    core: Vec<ProbeItem>,
    pit: Vec<PitItem>,
    questions: impl IntoIterator<Item = (RequestId, Question)>,
) -> BaselineBackend<ProbeAnswers> {
    BaselineBackend::new(ProbeAnswers { system, core, pit }, questions)
}

impl Answers for ProbeAnswers {
    type Question = Question;

    fn describe(&self) -> String {
        format!("Probe baseline {} (no network)", self.system)
    }

    fn answer(&self, question: &Question) -> Result<String, String> {
        self.system
            .answer(&self.core, &self.pit, *question)
            .map(|a| a.text)
            .ok_or_else(|| "the question points past the Probe items".to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generator::{generate_pit, generate_probe};
    use runner_engine::{Backend, Prompt, Request, Sampling};

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
        let mut b = backend(System::Oracle, core, pit, questions);
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
