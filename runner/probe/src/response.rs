//! What a system answered, in the published response format: the record shape the
//! scorer reads and the baselines write. It lives with the suite's records so that
//! answering (engine baselines) and scoring both depend on it, and not on each other.

use crate::record::Axis;
use serde::{Deserialize, Serialize};

/// A model answer: free text, optionally with a structured abstention flag.
///
/// Read from JSON as a plain string or as `{"answer": ..., "abstain": bool}` (`text`
/// is accepted for `answer`); both are scored the same way.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(from = "AnswerForm")]
pub struct Answer {
    pub text: String,
    #[serde(default)]
    pub abstain: bool,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum AnswerForm {
    Text(String),
    Structured {
        #[serde(alias = "text", default)]
        answer: Option<String>,
        #[serde(default)]
        abstain: bool,
    },
}

impl From<AnswerForm> for Answer {
    fn from(f: AnswerForm) -> Self {
        match f {
            AnswerForm::Text(text) => Answer {
                text,
                abstain: false,
            },
            AnswerForm::Structured { answer, abstain } => Answer {
                text: answer.unwrap_or_default(),
                abstain,
            },
        }
    }
}

impl Answer {
    pub fn text(text: impl Into<String>) -> Answer {
        Answer {
            text: text.into(),
            abstain: false,
        }
    }

    pub fn abstention() -> Answer {
        Answer {
            text: "unknown".to_string(),
            abstain: true,
        }
    }
}

/// What a system says about one core item.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ProbeResponse {
    /// Answer after sessions 1..n-1; missing reads as empty (scored wrong).
    #[serde(default)]
    pub pre: Answer,
    /// Answer after all sessions; missing reads as empty (scored wrong).
    #[serde(default)]
    pub post: Answer,
    /// Relations the system now marks as no longer current, if it reports them.
    #[serde(default)]
    pub invalidated: Option<Vec<String>>,
    /// The system's update/correction label for the final event, if it gives one.
    #[serde(default)]
    pub axis_pred: Option<Axis>,
    /// The follow-up answer broke its contract: no invalidation and a wrong axis.
    #[serde(default)]
    pub followup_failed: bool,
}

/// A system's answers to the queries of one PIT item, parallel to `queries`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PitResponse {
    #[serde(default)]
    pub answers: Vec<Answer>,
}
