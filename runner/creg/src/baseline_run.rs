//! A baseline's answers scored without the run loop: every question of the suite,
//! answered once and counted under each condition and seed (an answer depends on
//! neither), for `runner baseline` and the scorer's own tests.

use crate::baseline::{self as creg, System};
use crate::model::ModelError;
use crate::record::Scenario;
use crate::render::question::questions;
use crate::score::aggregate::Scored;
use crate::score::sample::score_text;
use runner_engine::FinishReason;

/// Answers every question of `suite` with `system`, under each named condition and seed
/// (a baseline's answer depends on neither), and scores the text like a model's.
pub fn run_suite(
    system: System,
    suite: &[Scenario],
    conditions: &[String],
    seeds: &[u64],
) -> Result<Vec<Scored>, ModelError> {
    let mut out = Vec::new();
    for s in suite {
        for q in questions(s) {
            let text = creg::answer(system, s, q)?;
            let Some(score) = score_text(s, q, &text, FinishReason::Stop) else {
                continue;
            };
            for condition in conditions {
                for &seed in seeds {
                    out.push(Scored::new(
                        system.name(),
                        condition,
                        seed,
                        s,
                        q,
                        score.clone(),
                    ));
                }
            }
        }
    }
    Ok(out)
}
