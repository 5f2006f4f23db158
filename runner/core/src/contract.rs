//! The categories a suite's JSON answer lands in, read leniently from a model's text:
//! every sample lands in exactly one (valid, repaired, invalid, truncated), and nothing
//! is dropped. Each suite reads its own fields; the categories are shared.

use crate::extract::{NoObject, Repair};
use serde::Serialize;

/// Why an answer breaks the contract.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case", tag = "reason", content = "detail")]
pub enum Invalid {
    NoObject(NoObject),
    MissingField(String),
    WrongType(String),
    UnknownValue(String),
    BadDistribution(String),
}

impl std::fmt::Display for Invalid {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Invalid::NoObject(NoObject::NoBrace) => write!(f, "no JSON object in the output"),
            Invalid::NoObject(NoObject::Unparseable) => write!(f, "no parseable JSON object"),
            Invalid::MissingField(x) => write!(f, "missing field {x}"),
            Invalid::WrongType(x) => write!(f, "wrong type for {x}"),
            Invalid::UnknownValue(x) => write!(f, "unknown value {x}"),
            Invalid::BadDistribution(x) => write!(f, "bad distribution: {x}"),
        }
    }
}

/// The one category a sample lands in.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case", tag = "category")]
pub enum Category {
    Valid,
    Repaired {
        repairs: Vec<Repair>,
    },
    Invalid {
        why: Invalid,
    },
    /// Cut off by the token budget; scored from what could be recovered, if anything.
    Truncated {
        recovered: bool,
    },
}

impl Category {
    pub fn name(&self) -> &'static str {
        match self {
            Category::Valid => "valid",
            Category::Repaired { .. } => "repaired",
            Category::Invalid { .. } => "invalid",
            Category::Truncated { .. } => "truncated",
        }
    }

    /// A sample with no usable answer: scored as a contract failure.
    pub fn is_failure(&self) -> bool {
        matches!(
            self,
            Category::Invalid { .. } | Category::Truncated { recovered: false }
        )
    }
}
