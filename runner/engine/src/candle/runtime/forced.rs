//! Teacher forcing: a given continuation is fed back one token at a time, and the
//! greedy choice the model would have made at each position is read. Two weight
//! formats compared this way see the same context at every position, so one near-tie
//! that rounds the other way costs one position, not the rest of a free-running
//! continuation.

use crate::candle::choice::sampler::argmax;
use crate::candle::runtime::model_runner::ModelRunner;
use crate::candle::runtime::phases::PhaseTimes;
use crate::candle::Engine;
use crate::EngineError;

impl Engine {
    /// The greedy token after `prompt` and after each prefix of `forced` but the whole:
    /// `forced.len()` choices, the k-th made with `forced[..k]` fed back. The prompt is
    /// prefilled once and the continuation decoded through the KV cache, as sampling
    /// decodes it.
    pub fn teacher_forced(&self, prompt: &[u32], forced: &[u32]) -> Result<Vec<u32>, EngineError> {
        if forced.is_empty() {
            return Ok(Vec::new());
        }
        let runner = ModelRunner::new(self);
        let whole = std::iter::once(0..1).collect::<Vec<_>>();
        let (logits, mut cache) = runner.prefill(&[prompt.to_vec()], &whole, forced.len())?;
        let mut chosen = vec![argmax(&logits.to_vec2::<f32>()?[0])];
        let mut times = PhaseTimes::default();
        for &token in &forced[..forced.len() - 1] {
            let logits = runner.decode_step(vec![token], &mut cache, &mut times)?;
            chosen.push(argmax(&logits.to_vec2::<f32>()?[0]));
        }
        Ok(chosen)
    }
}
