//! A run's manifest: what defines the run (the workload's identity, the model, the
//! runner's version) and where it ran. Each suite writes its identity with a typed
//! builder beside its workload (`creg/identity.rs`, `probe/identity.rs`) and reads it
//! back with the decoder next to it, so that `runner score` and `runner merge` rebuild
//! exactly the plan a journal was made under.

use crate::journal::Manifest;
use crate::run::Workload;
use runner_engine::Sampling;
use serde_json::{json, Value};
use thiserror::Error;

/// A manifest identity that does not read back: the field and what is wrong with it.
#[derive(Debug, Error, PartialEq)]
#[error("field `{field}`: {message}")]
pub struct IdentityError {
    /// JSON pointer into the identity, e.g. `/plan/seeds`.
    pub field: String,
    pub message: String,
}

impl IdentityError {
    pub fn new(field: &str, message: impl Into<String>) -> IdentityError {
        IdentityError {
            field: field.to_string(),
            message: message.into(),
        }
    }
}

/// How every sample of a run is decoded.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Decoding {
    pub sampling: Sampling,
    pub max_new_tokens: usize,
}

impl Decoding {
    pub fn to_json(self) -> Value {
        json!({
            "sampling": crate::run::sampling_as_typed(self.sampling),
            "max_new_tokens": self.max_new_tokens,
        })
    }

    /// Reads `/decoding` of an identity.
    pub fn from_identity(identity: &Value) -> Result<Decoding, IdentityError> {
        let at = "/decoding/sampling";
        let sampling = serde_json::from_value(field(identity, at)?.clone())
            .map_err(|e| IdentityError::new(at, e.to_string()))?;
        Ok(Decoding {
            sampling,
            max_new_tokens: usize_field(identity, "/decoding/max_new_tokens")?,
        })
    }
}

/// The field at `pointer`, which must be there.
pub fn field<'a>(identity: &'a Value, pointer: &str) -> Result<&'a Value, IdentityError> {
    identity
        .pointer(pointer)
        .ok_or_else(|| IdentityError::new(pointer, "missing"))
}

pub fn str_field<'a>(identity: &'a Value, pointer: &str) -> Result<&'a str, IdentityError> {
    field(identity, pointer)?
        .as_str()
        .ok_or_else(|| IdentityError::new(pointer, "expected a string"))
}

pub fn usize_field(identity: &Value, pointer: &str) -> Result<usize, IdentityError> {
    field(identity, pointer)?
        .as_u64()
        .and_then(|n| usize::try_from(n).ok())
        .ok_or_else(|| IdentityError::new(pointer, "expected a whole number"))
}

/// A field that may be `null` or absent, alike: a merged run's manifest has no
/// `/shard`, and the journal's identity hash treats null and absent fields the same.
pub fn optional<'a>(identity: &'a Value, pointer: &str) -> Option<&'a Value> {
    identity.pointer(pointer).filter(|v| !v.is_null())
}

/// A whole number, `null` or absent.
pub fn optional_usize(identity: &Value, pointer: &str) -> Result<Option<usize>, IdentityError> {
    match optional(identity, pointer) {
        None => Ok(None),
        Some(_) => usize_field(identity, pointer).map(Some),
    }
}

/// A list of seeds.
pub fn seeds_field(identity: &Value, pointer: &str) -> Result<Vec<u64>, IdentityError> {
    let bad = || IdentityError::new(pointer, "expected a list of whole numbers");
    field(identity, pointer)?
        .as_array()
        .ok_or_else(bad)?
        .iter()
        .map(|v| v.as_u64().ok_or_else(bad))
        .collect()
}

/// `/shard`: `I/N`, `null` or absent.
pub fn shard_field(identity: &Value) -> Result<Option<crate::plan::Shard>, IdentityError> {
    match optional(identity, "/shard").unwrap_or(&Value::Null) {
        Value::Null => Ok(None),
        Value::String(s) => s
            .parse()
            .map(Some)
            .map_err(|e: crate::plan::BadShard| IdentityError::new("/shard", e.to_string())),
        _ => Err(IdentityError::new("/shard", "expected null or \"I/N\"")),
    }
}

/// The manifest of a run of `workload` on the model `model` (its identity as the
/// loader gives it), started now by `command`; `context` is where it runs.
pub fn manifest(
    workload: &dyn Workload,
    model: &Value,
    context: &Value,
    command: &str,
) -> Manifest {
    let mut identity = workload.identity();
    if let Some(obj) = identity.as_object_mut() {
        obj.insert("model".into(), model.clone());
        obj.insert("runner_version".into(), json!(env!("CARGO_PKG_VERSION")));
    }
    let mut context = context.clone();
    if let Some(obj) = context.as_object_mut() {
        obj.insert(
            "started".into(),
            json!(
                chrono::DateTime::<chrono::Utc>::from(std::time::SystemTime::now())
                    .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
            ),
        );
        obj.insert("command".into(), json!(command));
    }
    Manifest { identity, context }
}
