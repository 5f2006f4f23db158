//! The follow-up answer contract of a Probe run, read like CREG's: the first JSON
//! object in the text (prose, fences and a cut-off tail are tolerated and counted as
//! repairs), with `invalidated` (a list of statement keys) and `axis` (`update` or
//! `correction`). Every sample lands in one category; a failure is counted, never
//! dropped, and scores as no invalidation and a wrong axis.

use crate::record::Axis;
use runner_core::contract::{Category, Invalid};
use runner_core::extract::{extract_object, Repair};
use runner_engine::FinishReason;
use serde_json::Value;

/// What a follow-up answer says, where it could be read.
#[derive(Debug, Clone, PartialEq)]
pub struct Followup {
    pub invalidated: Vec<String>,
    pub axis: Axis,
}

/// Read one follow-up answer.
pub fn parse_followup(text: &str, finish: FinishReason) -> (Category, Option<Followup>) {
    let truncated = finish == FinishReason::Length;
    let read = extract_object(text)
        .map_err(Invalid::NoObject)
        .and_then(|e| fields(&e.value).map(|(f, extra)| (f, e.repairs, extra)));
    match read {
        Ok((f, _, _)) if truncated => (Category::Truncated { recovered: true }, Some(f)),
        Ok((f, mut repairs, extra)) => {
            repairs.extend(extra);
            let category = if repairs.is_empty() {
                Category::Valid
            } else {
                Category::Repaired { repairs }
            };
            (category, Some(f))
        }
        Err(_) if truncated => (Category::Truncated { recovered: false }, None),
        Err(why) => (Category::Invalid { why }, None),
    }
}

fn fields(v: &Value) -> Result<(Followup, Vec<Repair>), Invalid> {
    let obj = v.as_object().ok_or(Invalid::WrongType("object".into()))?;
    let mut repairs = Vec::new();
    let invalidated = match obj.get("invalidated") {
        None | Some(Value::Null) => return Err(Invalid::MissingField("invalidated".into())),
        Some(Value::Array(a)) => a
            .iter()
            .map(|x| match x {
                Value::String(s) => {
                    if s.trim() != s {
                        repairs.push(Repair::NormalizedSpelling);
                    }
                    Ok(s.trim().to_string())
                }
                _ => Err(Invalid::WrongType("invalidated".into())),
            })
            .collect::<Result<Vec<_>, _>>()?,
        Some(_) => return Err(Invalid::WrongType("invalidated".into())),
    };
    let axis = match obj.get("axis") {
        None | Some(Value::Null) => return Err(Invalid::MissingField("axis".into())),
        Some(Value::String(s)) => {
            let t = s.trim().to_lowercase();
            if t != *s {
                repairs.push(Repair::NormalizedSpelling);
            }
            match t.as_str() {
                "update" => Axis::Update,
                "correction" => Axis::Correction,
                _ => return Err(Invalid::UnknownValue(format!("axis {s:?}"))),
            }
        }
        Some(_) => return Err(Invalid::WrongType("axis".into())),
    };
    if obj.keys().any(|k| k != "invalidated" && k != "axis") {
        repairs.push(Repair::ExtraField);
    }
    Ok((Followup { invalidated, axis }, repairs))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> (Category, Option<Followup>) {
        parse_followup(text, FinishReason::Stop)
    }

    #[test]
    fn a_plain_object_is_valid() {
        let (c, f) = parse(r#"{"invalidated": ["works_at", "workplace_city"], "axis": "update"}"#);
        assert_eq!(c, Category::Valid);
        let f = f.unwrap();
        assert_eq!(f.invalidated, vec!["works_at", "workplace_city"]);
        assert_eq!(f.axis, Axis::Update);
    }

    #[test]
    fn prose_fences_and_spelling_are_repairs() {
        let (c, f) = parse(
            "Sure:\n```json\n{\"invalidated\": [\" lives_in \"], \"axis\": \"Correction\", \"why\": \"x\",}\n```",
        );
        assert_eq!(c.name(), "repaired", "{c:?}");
        assert_eq!(f.unwrap().axis, Axis::Correction);
    }

    #[test]
    fn contract_failures_are_named() {
        let cases = [
            ("I think it was an update.", "no JSON object in the output"),
            (r#"{"axis": "update"}"#, "missing field invalidated"),
            (
                r#"{"invalidated": "works_at", "axis": "update"}"#,
                "wrong type for invalidated",
            ),
            (
                r#"{"invalidated": [], "axis": "both"}"#,
                "unknown value axis \"both\"",
            ),
            (
                r#"{"invalidated": [1], "axis": "update"}"#,
                "wrong type for invalidated",
            ),
        ];
        for (text, why) in cases {
            match parse(text) {
                (Category::Invalid { why: w }, None) => assert_eq!(w.to_string(), why, "{text}"),
                other => panic!("{text}: {other:?}"),
            }
        }
        let (c, f) = parse_followup(r#"{"invalidated": ["works_at"], "ax"#, FinishReason::Length);
        assert_eq!(c, Category::Truncated { recovered: false });
        assert!(f.is_none() && c.is_failure());
    }
}
