//! A (request, seed) being decoded and its hand-over as a sample once it finishes: the
//! row bookkeeping that both batching loops share, apart from the tensors it runs on.

use crate::candle::choice::sampler::StreamKey;
use crate::candle::choice::step;
use crate::candle::runtime::model_runner::RowDraw;
use crate::candle::runtime::phases::PhaseTimes;
use crate::candle::runtime::scheduler::Demand;
use crate::candle::Engine;
use crate::{EngineError, Request, Sample, Timings};
use std::time::Instant;

/// A (request, seed) being decoded.
pub(crate) struct Row<'a> {
    pub request: &'a Request,
    pub seed: u64,
    key: StreamKey,
    pub tokens: Vec<u32>,
    prompt_tokens: usize,
    prefill_s: f64,
    pub decode_s: f64,
}

impl<'a> Row<'a> {
    /// The row of `seed` of a request whose prompt of `prompt_tokens` took `prefill_s`.
    pub fn new(request: &'a Request, seed: u64, prompt_tokens: usize, prefill_s: f64) -> Self {
        Row {
            request,
            seed,
            key: StreamKey::new(seed, &request.id),
            tokens: Vec::new(),
            prompt_tokens,
            prefill_s,
            decode_s: 0.0,
        }
    }

    /// What the row asks of the batch, as the scheduler weighs it.
    pub fn demand(&self) -> Demand {
        Demand {
            rows: 1,
            ..Demand::of(self.request, self.prompt_tokens)
        }
    }

    /// The row as its next token is drawn.
    pub fn draw(&self) -> RowDraw<'_> {
        RowDraw {
            request: self.request,
            seed: self.seed,
            key: &self.key,
            generated: self.tokens.len(),
        }
    }

    /// The token the next decode step feeds.
    pub fn last_token(&self) -> u32 {
        *self.tokens.last().expect("a running row has a token")
    }
}

/// Adds `token` to `row`; a row that this finishes is handed over (None back).
pub(crate) fn advance<'a>(
    engine: &Engine,
    mut row: Row<'a>,
    token: u32,
    times: &mut PhaseTimes,
    on_sample: &mut dyn FnMut(Sample),
) -> Result<Option<Row<'a>>, EngineError> {
    let max_new = row.request.max_new_tokens;
    let Some(reason) = step::advance(&mut row.tokens, token, &engine.eos, max_new) else {
        return Ok(Some(row));
    };
    let t = Instant::now();
    on_sample(Sample {
        request_id: row.request.id.clone(),
        seed: row.seed,
        text: engine.decode(&row.tokens)?,
        prompt_tokens: row.prompt_tokens,
        token_ids: row.tokens,
        reported_tokens: None,
        finish_reason: reason,
        timings: Timings {
            prefill_s: row.prefill_s,
            decode_s: row.decode_s,
        },
    });
    times.hand_over_s += t.elapsed().as_secs_f64();
    Ok(None)
}
