//! Why decoding of a sample ended: made by the engine, journaled, and read by the
//! scorer (a cut-off answer is judged differently), so it sits with the types every
//! stage shares rather than in the engine.

use serde::{Deserialize, Serialize};

/// Why decoding of a sample ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FinishReason {
    /// The model produced one of its end-of-sequence tokens (not included in the text).
    Stop,
    /// `max_new_tokens` were produced without an end-of-sequence token.
    Length,
}
