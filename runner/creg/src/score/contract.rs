//! The answer contracts, read leniently from a model's text: every sample lands in
//! exactly one category (valid, repaired, invalid, truncated) and nothing is dropped.

use crate::record::{ActionType, EvidenceId, ReferenceState};
use runner_core::extract::{extract_object, NoObject, Repair};
use serde::Serialize;
use serde_json::{Map, Value};

use runner_engine::finish::FinishReason;

pub use runner_core::contract::{Category, Invalid};

/// A contradiction as an answer states it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StatedContradiction {
    pub involved_evidence_ids: Vec<EvidenceId>,
    pub contradiction_type: Option<String>,
}

/// The belief task's answer at one prefix.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BeliefAnswer {
    /// What the answer is about, as `entity.attribute`.
    pub target: String,
    pub p_anomalous: f64,
    pub top_state: ReferenceState,
    pub supporting_evidence: Vec<EvidenceId>,
    pub contradicting_evidence: Vec<EvidenceId>,
    pub contradictions: Vec<StatedContradiction>,
}

/// The contradiction-detection task's answer.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ContradictionAnswer {
    pub contradiction_present: bool,
    pub involved_evidence_ids: Vec<EvidenceId>,
    pub contradiction_type: Option<String>,
    pub resolution_status: Option<String>,
}

/// The next-action task's answer.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ActionAnswer {
    pub action_type: ActionType,
    pub target_entity_id: Option<String>,
}

/// The explanation task's answer.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ExplanationAnswer {
    pub top_state: ReferenceState,
    pub explanation: String,
    pub cited_evidence_ids: Vec<EvidenceId>,
}

/// A parsed sample: its category and, unless it failed, the answer.
#[derive(Clone, Debug, PartialEq)]
pub struct Parsed<T> {
    pub category: Category,
    pub answer: Option<T>,
}

/// Reads fields out of an object, remembering repairs. The first name of each field is
/// the contract's; another spelling is accepted as a repair, and so are fields the
/// contract does not have.
struct Fields<'a> {
    obj: &'a Map<String, Value>,
    repairs: Vec<Repair>,
    used: Vec<&'a str>,
}

impl<'a> Fields<'a> {
    fn new(obj: &'a Map<String, Value>, repairs: Vec<Repair>) -> Self {
        Fields {
            obj,
            repairs,
            used: Vec::new(),
        }
    }

    fn get(&mut self, names: &[&str]) -> Option<&'a Value> {
        let (i, key, value) = names
            .iter()
            .enumerate()
            .find_map(|(i, n)| self.obj.get_key_value(*n).map(|(k, v)| (i, k, v)))?;
        self.used.push(key.as_str());
        if i > 0 {
            self.repairs.push(Repair::RenamedField);
        }
        Some(value).filter(|v| !v.is_null())
    }

    /// A field the contract requires but allows to be null.
    fn nullable_token(&mut self, names: &[&str]) -> Result<Option<String>, Invalid> {
        if !names.iter().any(|n| self.obj.contains_key(*n)) {
            return Err(Invalid::MissingField(names[0].to_string()));
        }
        self.token(names)
    }

    fn required(&mut self, names: &[&str]) -> Result<&'a Value, Invalid> {
        self.get(names)
            .ok_or_else(|| Invalid::MissingField(names[0].to_string()))
    }

    fn string(&mut self, names: &[&str]) -> Result<Option<String>, Invalid> {
        match self.get(names) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(_) => Err(Invalid::WrongType(names[0].to_string())),
        }
    }

    /// A lower-case, trimmed token; other spellings count as a repair.
    fn token(&mut self, names: &[&str]) -> Result<Option<String>, Invalid> {
        Ok(self.string(names)?.map(|s| {
            let t = s.trim().to_lowercase().replace([' ', '-'], "_");
            if t != s {
                self.repairs.push(Repair::NormalizedSpelling);
            }
            t
        }))
    }

    /// A required list of evidence ids.
    fn ids(&mut self, names: &[&str]) -> Result<Vec<EvidenceId>, Invalid> {
        match self.required(names)? {
            Value::Array(items) => items
                .iter()
                .map(|v| match v {
                    Value::String(s) => {
                        let t = s.trim();
                        if t != s {
                            self.repairs.push(Repair::NormalizedSpelling);
                        }
                        Ok(EvidenceId::new(t))
                    }
                    _ => Err(Invalid::WrongType(names[0].to_string())),
                })
                .collect(),
            _ => Err(Invalid::WrongType(names[0].to_string())),
        }
    }

    /// Flags fields the contract does not define.
    fn finish(mut self) -> Vec<Repair> {
        if self.obj.keys().any(|k| !self.used.contains(&k.as_str())) {
            self.repairs.push(Repair::ExtraField);
        }
        self.repairs
    }
}

fn reference_state(token: &str) -> Option<ReferenceState> {
    match token {
        "anomalous" => Some(ReferenceState::Anomalous),
        "normal" => Some(ReferenceState::Normal),
        "undetermined" | "tie" | "uncertain" => Some(ReferenceState::Undetermined),
        _ => None,
    }
}

fn action_type(token: &str) -> Option<ActionType> {
    [
        ActionType::Verify,
        ActionType::Inspect,
        ActionType::RequestObservation,
        ActionType::Monitor,
        ActionType::Ignore,
        ActionType::Shutdown,
        ActionType::Actuate,
    ]
    .into_iter()
    .find(|a| a.name() == token)
}

fn probability(v: &Value, field: &str) -> Result<f64, Invalid> {
    match v {
        Value::Number(n) => n
            .as_f64()
            .filter(|p| p.is_finite() && *p >= 0.0)
            .ok_or_else(|| Invalid::BadDistribution(format!("{field} is {n}"))),
        Value::String(s) => s
            .trim()
            .trim_end_matches('%')
            .parse::<f64>()
            .ok()
            .filter(|p| p.is_finite() && *p >= 0.0)
            .ok_or_else(|| Invalid::BadDistribution(format!("{field} is {s:?}"))),
        _ => Err(Invalid::WrongType(field.to_string())),
    }
}

/// Parses with `read`, then files the result into its category.
fn parse_with<T>(
    text: &str,
    finish: FinishReason,
    read: impl FnOnce(&mut Fields) -> Result<T, Invalid>,
) -> Parsed<T> {
    let outcome = extract_object(text)
        .map_err(Invalid::NoObject)
        .and_then(|extracted| {
            let Value::Object(obj) = &extracted.value else {
                return Err(Invalid::NoObject(NoObject::Unparseable));
            };
            let mut fields = Fields::new(obj, extracted.repairs.clone());
            let answer = read(&mut fields)?;
            let mut repairs = fields.finish();
            repairs.sort();
            repairs.dedup();
            Ok((answer, repairs))
        });
    match (finish, outcome) {
        (FinishReason::Length, Ok((answer, _))) => Parsed {
            category: Category::Truncated { recovered: true },
            answer: Some(answer),
        },
        (FinishReason::Length, Err(_)) => Parsed {
            category: Category::Truncated { recovered: false },
            answer: None,
        },
        (FinishReason::Stop, Ok((answer, repairs))) => Parsed {
            category: if repairs.is_empty() {
                Category::Valid
            } else {
                Category::Repaired { repairs }
            },
            answer: Some(answer),
        },
        (FinishReason::Stop, Err(why)) => Parsed {
            category: Category::Invalid { why },
            answer: None,
        },
    }
}

/// The belief answer (`prompts/contracts/belief.v1.schema.json`): the target, a
/// distribution over anomalous and normal, the top state, supporting and contradicting
/// evidence, active contradictions.
pub fn parse_belief(text: &str, finish: FinishReason) -> Parsed<BeliefAnswer> {
    parse_with(text, finish, |f| {
        // The target is read, not enforced: naming another entity is what entity
        // grounding measures, apart from belief quality.
        let target = f
            .string(&["target", "entity"])?
            .map(|t| t.trim().to_string())
            .ok_or_else(|| Invalid::MissingField("target".into()))?;
        let dist = f.required(&["distribution", "reference_distribution", "belief"])?;
        let Value::Object(d) = dist else {
            return Err(Invalid::WrongType("distribution".into()));
        };
        let a = probability(
            d.get("anomalous")
                .ok_or_else(|| Invalid::MissingField("distribution.anomalous".into()))?,
            "distribution.anomalous",
        )?;
        let n = probability(
            d.get("normal")
                .ok_or_else(|| Invalid::MissingField("distribution.normal".into()))?,
            "distribution.normal",
        )?;
        let sum = a + n;
        // Where the sum overflows, both are divided by the larger first: {1e308, 1e308}
        // is 0.5/0.5.
        let larger = a.max(n);
        if larger <= 0.0 {
            return Err(Invalid::BadDistribution(
                "the probabilities sum to 0".into(),
            ));
        }
        if (sum - 1.0).abs() > 1e-6 {
            f.repairs.push(Repair::RenormalizedDistribution);
        }
        let top = f
            .token(&["top_state", "reference_state", "state"])?
            .ok_or_else(|| Invalid::MissingField("top_state".into()))?;
        let top_state =
            reference_state(&top).ok_or(Invalid::UnknownValue(format!("top_state {top}")))?;
        let supporting_evidence = f.ids(&["supporting_evidence_ids", "supporting_evidence"])?;
        let contradicting_evidence =
            f.ids(&["contradicting_evidence_ids", "contradicting_evidence"])?;
        let mut contradictions = Vec::new();
        let Value::Array(items) = f.required(&["active_contradictions", "contradictions"])? else {
            return Err(Invalid::WrongType("active_contradictions".into()));
        };
        for item in items {
            let Value::Object(obj) = item else {
                return Err(Invalid::WrongType("active_contradictions[]".into()));
            };
            let mut inner = Fields::new(obj, Vec::new());
            contradictions.push(StatedContradiction {
                involved_evidence_ids: inner.ids(&[
                    "involved_evidence_ids",
                    "involved_ids",
                    "evidence_ids",
                ])?,
                contradiction_type: inner.token(&["type", "contradiction_type"])?,
            });
            f.repairs.extend(inner.finish());
        }
        Ok(BeliefAnswer {
            target,
            p_anomalous: if sum.is_finite() {
                a / sum
            } else {
                (a / larger) / (a / larger + n / larger)
            },
            top_state,
            supporting_evidence,
            contradicting_evidence,
            contradictions,
        })
    })
}

/// The contradiction-detection answer.
pub fn parse_contradiction(text: &str, finish: FinishReason) -> Parsed<ContradictionAnswer> {
    parse_with(text, finish, |f| {
        let present = match f.required(&["contradiction_present", "present"])? {
            Value::Bool(b) => *b,
            _ => return Err(Invalid::WrongType("contradiction_present".into())),
        };
        Ok(ContradictionAnswer {
            contradiction_present: present,
            involved_evidence_ids: f.ids(&["involved_evidence_ids", "involved_ids"])?,
            contradiction_type: f.nullable_token(&["contradiction_type", "type"])?,
            resolution_status: f.nullable_token(&["resolution_status", "status"])?,
        })
    })
}

/// The next-action answer.
pub fn parse_action(text: &str, finish: FinishReason) -> Parsed<ActionAnswer> {
    parse_with(text, finish, |f| {
        let token = f
            .token(&["action_type", "action", "next_action"])?
            .ok_or_else(|| Invalid::MissingField("action_type".into()))?;
        let action_type =
            action_type(&token).ok_or(Invalid::UnknownValue(format!("action_type {token}")))?;
        Ok(ActionAnswer {
            action_type,
            target_entity_id: Some(
                f.string(&["target_entity_id", "target"])?
                    .ok_or_else(|| Invalid::MissingField("target_entity_id".into()))?,
            ),
        })
    })
}

/// The explanation answer (`prompts/contracts/explanation.v1.schema.json`).
pub fn parse_explanation(text: &str, finish: FinishReason) -> Parsed<ExplanationAnswer> {
    parse_with(text, finish, |f| {
        let top = f
            .token(&["top_state", "state"])?
            .ok_or_else(|| Invalid::MissingField("top_state".into()))?;
        let top_state =
            reference_state(&top).ok_or(Invalid::UnknownValue(format!("top_state {top}")))?;
        let explanation = f
            .string(&["explanation", "text"])?
            .filter(|e| !e.trim().is_empty())
            .ok_or_else(|| Invalid::MissingField("explanation".into()))?;
        let cited_evidence_ids = f.ids(&["cited_evidence_ids", "evidence_ids", "citations"])?;
        if cited_evidence_ids.is_empty() {
            return Err(Invalid::MissingField(
                "cited_evidence_ids (at least one id)".into(),
            ));
        }
        Ok(ExplanationAnswer {
            top_state,
            explanation,
            cited_evidence_ids,
        })
    })
}

#[cfg(test)]
mod tests;
