//! Typed records for `probe.json` and `probe_pit.json`, in the published field layout.
//!
//! Design-axis values are enums so that a misspelt value fails at load time with the
//! field's path instead of silently forming a new cell.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// The literal the published files use for "no answer is supported".
pub const UNKNOWN: &str = "unknown";

macro_rules! string_newtype {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(#[serde(deserialize_with = "runner_core::strict::bounded_id")] pub String);

        impl $name {
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

string_newtype!(
    /// `probe_id` of a core item.
    ProbeId
);
string_newtype!(
    /// `pit_id` of a point-in-time item.
    PitId
);
string_newtype!(
    /// A relation name such as `works_at` or `work_timezone`.
    Relation
);
string_newtype!(
    /// A PIT query label; only `before_any_fact` is fixed by the published description.
    QueryLabel
);

macro_rules! axis_enum {
    ($(#[$doc:meta])* $name:ident { $($variant:ident = $text:literal $(| $alias:literal)*),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        pub enum $name {
            $(
                #[serde(rename = $text $(, alias = $alias)*)]
                $variant,
            )+
        }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

axis_enum!(
    /// The three core domains; PIT uses the first two.
    Domain { Employment = "employment", Residence = "residence", Training = "training" }
);
axis_enum!(
    /// Whether the contradicted edge was stated by the user or inferred along the chain.
    Contradicted { Asserted = "asserted", Derived = "derived" }
);
axis_enum!(
    /// Update (valid time closes) versus correction (transaction time supersedes).
    Axis { Update = "update", Correction = "correction" }
);
axis_enum!(
    /// Adjacent turns in one session, or one session per statement with fillers between.
    Density { Adjacent = "adjacent", Distant = "distant" }
);
axis_enum!(
    /// Stated confidence of the root fact. The published text says `hedged`; the v0 file
    /// writes `low`, read here as the same value.
    Confidence { High = "high", Hedged = "hedged" | "low" }
);
axis_enum!(
    /// The two PIT event histories.
    Scenario { DoubleUpdate = "double_update", CorrectionThenUpdate = "correction_then_update" }
);

/// Hop depth 1..=4; other values are rejected when the file is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HopDepth(u8);

impl HopDepth {
    pub const MIN: u8 = 1;
    pub const MAX: u8 = 4;

    pub fn new(k: u8) -> Option<Self> {
        (Self::MIN..=Self::MAX).contains(&k).then_some(HopDepth(k))
    }

    pub fn get(self) -> u8 {
        self.0
    }

    pub fn all() -> impl Iterator<Item = HopDepth> {
        (Self::MIN..=Self::MAX).map(HopDepth)
    }
}

impl fmt::Display for HopDepth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl Serialize for HopDepth {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u8(self.0)
    }
}

impl<'de> Deserialize<'de> for HopDepth {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let k = u8::deserialize(d)?;
        HopDepth::new(k)
            .ok_or_else(|| serde::de::Error::custom(format!("hop depth {k} is outside 1..=4")))
    }
}

/// A gold answer: a value, or `"unknown"` when the conversation supports no answer.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Gold {
    Unknown,
    Value(String),
}

impl Gold {
    pub fn value(&self) -> Option<&str> {
        match self {
            Gold::Unknown => None,
            Gold::Value(v) => Some(v),
        }
    }

    pub fn is_unknown(&self) -> bool {
        matches!(self, Gold::Unknown)
    }

    pub fn as_str(&self) -> &str {
        self.value().unwrap_or(UNKNOWN)
    }
}

impl fmt::Display for Gold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<Option<String>> for Gold {
    fn from(v: Option<String>) -> Self {
        v.map_or(Gold::Unknown, Gold::Value)
    }
}

impl Serialize for Gold {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for Gold {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if s.trim().is_empty() {
            return Err(serde::de::Error::custom("gold answer is empty"));
        }
        Ok(if s == UNKNOWN {
            Gold::Unknown
        } else {
            Gold::Value(s)
        })
    }
}

/// One structured fact of the oracle representation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OracleFact {
    pub subject: String,
    pub relation: Relation,
    pub object: String,
    /// ISO date (`YYYY-MM-DD`); null throughout probe.json, set in probe_pit.json.
    pub valid_from: Option<String>,
    pub valid_to: Option<String>,
    pub confidence: f64,
    pub is_correction: bool,
    pub premises: Vec<serde_json::Value>,
}

/// A withdrawal of a fact: `was_wrong` voids it, otherwise it ends now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OracleRetraction {
    pub subject: String,
    pub relation: Relation,
    pub object: String,
    pub was_wrong: bool,
}

/// One user message; sessions carry no roles or dates.
pub type Session = Vec<String>;

/// One core item of `probe.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeItem {
    pub probe_id: ProbeId,
    pub domain: Domain,
    pub hop_depth: HopDepth,
    pub contradicted: Contradicted,
    pub axis: Axis,
    pub density: Density,
    pub confidence: Confidence,
    pub sessions: Vec<Session>,
    pub oracle_facts: Vec<Vec<OracleFact>>,
    pub oracle_retractions: Vec<Vec<OracleRetraction>>,
    pub question: String,
    pub gold_pre: Gold,
    pub gold_post: Gold,
    pub gold_invalidated: Vec<Relation>,
    pub gold_axis: Axis,
}

/// One evaluation point of a PIT item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PitQuery {
    pub label: QueryLabel,
    /// ISO date the question is asked "as of".
    pub reference_time: String,
    pub gold: Gold,
}

/// One item of `probe_pit.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PitItem {
    pub pit_id: PitId,
    pub domain: Domain,
    pub scenario: Scenario,
    pub density: Density,
    pub sessions: Vec<Session>,
    /// Optional ISO date per session; this project's generator leaves it out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_dates: Option<Vec<String>>,
    pub oracle_facts: Vec<Vec<OracleFact>>,
    pub oracle_retractions: Vec<Vec<OracleRetraction>>,
    pub question: String,
    pub queries: Vec<PitQuery>,
}

pub const BEFORE_ANY_FACT: &str = "before_any_fact";
pub const AFTER_FIRST_FACT: &str = "after_first_fact";
pub const AFTER_SECOND_FACT: &str = "after_second_fact";

/// Loose identity of entity names: `sable_finch` and `Sable & Finch` name the same entity.
pub fn loose_key(s: &str) -> String {
    s.chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn confidence_reads_low_as_hedged_and_writes_hedged() {
        let c: Confidence = serde_json::from_str("\"low\"").unwrap();
        assert_eq!(c, Confidence::Hedged);
        assert_eq!(serde_json::to_string(&c).unwrap(), "\"hedged\"");
    }

    #[test]
    fn hop_depth_outside_range_is_rejected() {
        assert!(serde_json::from_str::<HopDepth>("0").is_err());
        assert!(serde_json::from_str::<HopDepth>("5").is_err());
        assert_eq!(serde_json::from_str::<HopDepth>("3").unwrap().get(), 3);
    }

    #[test]
    fn gold_unknown_round_trips() {
        let g: Gold = serde_json::from_str("\"unknown\"").unwrap();
        assert!(g.is_unknown());
        assert_eq!(serde_json::to_string(&g).unwrap(), "\"unknown\"");
        assert!(serde_json::from_str::<Gold>("\" \"").is_err());
    }

    #[test]
    fn loose_key_joins_snake_case_and_display_names() {
        assert_eq!(loose_key("sable_finch"), loose_key("Sable & Finch"));
        assert_ne!(loose_key("Sable"), loose_key("Sable & Finch"));
    }
}
