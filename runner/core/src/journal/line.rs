//! Reading one journal line: the record's own fields, the identity it was written
//! under, and every other field as the suite's facets.
//!
//! Read field by field rather than through serde's `flatten`, which would first buffer
//! each line (a sample's whole text and scores) as a tree of values.

use super::SampleRecord;
use crate::facets::{self, Facets, MAX_FACETS};
use runner_engine::finish::FinishReason;
use serde::de::{Deserialize, Deserializer, Error, MapAccess, Visitor};
use serde_json::Value;
use std::fmt;

pub(super) struct LineIn {
    record: SampleRecord,
    identity_sha256: Option<String>,
}

impl LineIn {
    pub(super) fn split(self) -> (SampleRecord, Option<String>) {
        (self.record, self.identity_sha256)
    }
}

impl<'de> Deserialize<'de> for LineIn {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<LineIn, D::Error> {
        d.deserialize_map(LineVisitor)
    }
}

struct LineVisitor;

/// Sets a field read once; a second occurrence is refused as serde's derive would.
fn once<T, E: Error>(slot: &mut Option<T>, value: T, name: &'static str) -> Result<(), E> {
    if slot.replace(value).is_some() {
        return Err(E::duplicate_field(name));
    }
    Ok(())
}

fn given<T, E: Error>(slot: Option<T>, name: &'static str) -> Result<T, E> {
    slot.ok_or_else(|| E::missing_field(name))
}

impl<'de> Visitor<'de> for LineVisitor {
    type Value = LineIn;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a journal line (a JSON object)")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<LineIn, A::Error> {
        let mut request_id: Option<String> = None;
        let mut seed: Option<u64> = None;
        let mut prompt_sha256: Option<String> = None;
        let mut text: Option<String> = None;
        let mut tokens: Option<usize> = None;
        let mut finish_reason: Option<FinishReason> = None;
        let mut prefill_ms: Option<f64> = None;
        let mut decode_ms: Option<f64> = None;
        let mut scores: Option<Value> = None;
        let mut identity_sha256: Option<Option<String>> = None;
        let mut facets = Facets::new();
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "request_id" => once(&mut request_id, map.next_value()?, "request_id")?,
                "seed" => once(&mut seed, map.next_value()?, "seed")?,
                "prompt_sha256" => once(&mut prompt_sha256, map.next_value()?, "prompt_sha256")?,
                "text" => once(&mut text, map.next_value()?, "text")?,
                "tokens" => once(&mut tokens, map.next_value()?, "tokens")?,
                "finish_reason" => once(&mut finish_reason, map.next_value()?, "finish_reason")?,
                "prefill_ms" => once(&mut prefill_ms, map.next_value()?, "prefill_ms")?,
                "decode_ms" => once(&mut decode_ms, map.next_value()?, "decode_ms")?,
                "scores" => once(&mut scores, map.next_value()?, "scores")?,
                "identity_sha256" => {
                    once(&mut identity_sha256, map.next_value()?, "identity_sha256")?
                }
                _ => {
                    // Bounded before each lookup: a line's facets are searched linearly,
                    // which stays cheap only while they are few.
                    if facets.len() == MAX_FACETS {
                        return Err(A::Error::custom(facets::too_many()));
                    }
                    if facets.get(&key).is_some() {
                        return Err(A::Error::custom(format_args!("duplicate field `{key}`")));
                    }
                    facets.insert(key, map.next_value()?);
                }
            }
        }
        Ok(LineIn {
            record: SampleRecord {
                request_id: given(request_id, "request_id")?,
                seed: given(seed, "seed")?,
                facets,
                prompt_sha256: given(prompt_sha256, "prompt_sha256")?,
                text: given(text, "text")?,
                tokens: given(tokens, "tokens")?,
                finish_reason: given(finish_reason, "finish_reason")?,
                prefill_ms: given(prefill_ms, "prefill_ms")?,
                decode_ms: given(decode_ms, "decode_ms")?,
                scores: given(scores, "scores")?,
            },
            identity_sha256: identity_sha256.flatten(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(line: &str) -> Result<(SampleRecord, Option<String>), String> {
        serde_json::from_str::<LineIn>(line)
            .map(LineIn::split)
            .map_err(|e| e.to_string())
    }

    const LINE: &str = r#"{"request_id":"r","seed":42,"scenario":"s","condition":"c","task":"belief","step":2,"prompt_sha256":"p","text":"t","tokens":3,"finish_reason":"stop","prefill_ms":1.5,"decode_ms":2.0,"scores":{"x":1},"identity_sha256":"i"}"#;

    #[test]
    fn a_lines_other_fields_are_its_facets_in_their_order_and_it_writes_back_the_same() {
        let (record, identity) = read(LINE).unwrap();
        assert_eq!(identity.as_deref(), Some("i"));
        let keys: Vec<&str> = record.facets.iter().map(|(k, _)| k).collect();
        assert_eq!(keys, ["scenario", "condition", "task", "step"]);
        assert_eq!(record.facets.count("step"), Ok(2));
        let back = serde_json::to_string(&super::super::LineOut {
            record: &record,
            identity_sha256: "i",
        })
        .unwrap();
        assert_eq!(back, LINE);
    }

    #[test]
    fn missing_and_repeated_fields_are_named() {
        let without_seed = LINE.replace(r#""seed":42,"#, "");
        assert!(read(&without_seed)
            .unwrap_err()
            .contains("missing field `seed`"));
        let twice = LINE.replace(r#""seed":42,"#, r#""seed":42,"seed":43,"#);
        assert!(read(&twice).unwrap_err().contains("duplicate field `seed`"));
        let facet_twice = LINE.replace(r#""task":"belief","#, r#""task":"belief","task":"x","#);
        assert!(read(&facet_twice)
            .unwrap_err()
            .contains("duplicate field `task`"));
        let no_identity = LINE.replace(r#","identity_sha256":"i""#, "");
        assert_eq!(read(&no_identity).unwrap().1, None);
    }
}
