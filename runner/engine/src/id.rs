//! Identity by content: a request is named by a hash of what defines it, and a sample
//! by (request id, seed). The id is shared by every stage (render makes it, the engine
//! keys its sampler on it, the journal and scorer find samples by it), so it lives here
//! rather than in any one stage.

use serde::{Deserialize, Serialize};
use std::fmt;

/// A request's identity. Rendered requests use the hex SHA-256 of their defining
/// content; tests and one-off generation may use any stable string.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RequestId(String);

impl RequestId {
    pub fn new(id: impl Into<String>) -> RequestId {
        RequestId(id.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}
