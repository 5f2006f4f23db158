//! What a served run's manifest records about the model: what defines its answers
//! (served name, the server's own account of the model, prompt mode, tokenizer, the
//! exact sampling body, declared determinism), and never the endpoint or the key.

use crate::served::protocol::{self, BodySpec};
use crate::served::ServedBackend;
use crate::Sampling;
use serde_json::{json, Map, Value};

/// Fields of a `/models` entry that describe the model; others (`created`, a load
/// status) change between calls and would make every resume a new run.
const STABLE_FIELDS: [&str; 5] = ["id", "owned_by", "root", "parent", "max_model_len"];

/// Why a `/models` answer gives no entry for the model.
#[derive(Debug, thiserror::Error)]
pub enum NoEntry {
    /// Not an OpenAI model list at all: likely not the API root.
    #[error("{0}")]
    NotAModelList(String),
    #[error("{0}")]
    NotServed(String),
}

/// The entry of `model` in a `/models` answer, less its volatile fields.
pub fn model_entry(models_json: &str, model: &str) -> Result<Value, NoEntry> {
    let v: Value = serde_json::from_str(models_json)
        .map_err(|e| NoEntry::NotAModelList(format!("the model list is not JSON ({e})")))?;
    let data = v
        .get("data")
        .and_then(Value::as_array)
        .ok_or_else(|| NoEntry::NotAModelList("the model list has no `data` array".into()))?;
    let entry = data
        .iter()
        .find(|m| m.get("id").and_then(Value::as_str) == Some(model))
        .ok_or_else(|| {
            let ids: Vec<&str> = data
                .iter()
                .filter_map(|m| m.get("id").and_then(Value::as_str))
                .collect();
            NoEntry::NotServed(format!(
                "the server does not serve {model:?}; it serves {}",
                if ids.is_empty() {
                    "nothing".to_string()
                } else {
                    ids.join(", ")
                }
            ))
        })?;
    let mut out = Map::new();
    for f in STABLE_FIELDS {
        if let Some(x) = entry.get(f).filter(|x| !x.is_null()) {
            out.insert(f.into(), x.clone());
        }
    }
    Ok(Value::Object(out))
}

impl ServedBackend {
    /// The manifest's `model` entry for requests of `sampling` and `max_tokens`.
    pub fn identity(&self, label: &str, sampling: Sampling, max_tokens: usize) -> Value {
        let spec = BodySpec {
            sampling,
            max_tokens,
            dialect: self.dialect,
        };
        json!({
            "kind": "served",
            "name": label,
            "served_model": self.model,
            "server_reports": self.server_model,
            "prompt_mode": self.mode.name(),
            "endpoint_path": self.mode.path(),
            "tokenizer": self.prompts.as_ref().map(|p| p.identity.clone()),
            "sampling_body": protocol::sampling_fields(&spec),
            "overrides": self.dialect.name(),
            "seed": protocol::SEED_RULE,
            "server_deterministic": self.server_deterministic,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::model_entry;

    use serde_json::json;

    #[test]
    fn the_model_entry_keeps_what_describes_the_model_only() {
        let list = r#"{"object":"list","data":[
            {"id":"a","owned_by":"vllm","created":1733000000,"root":"org/a","max_model_len":4096},
            {"id":"b","created":5,"status":{"value":"loaded"}}]}"#;
        assert_eq!(
            model_entry(list, "a").unwrap(),
            json!({"id":"a","owned_by":"vllm","root":"org/a","max_model_len":4096})
        );
        assert_eq!(model_entry(list, "b").unwrap(), json!({"id":"b"}));
        let err = model_entry(list, "c").unwrap_err().to_string();
        assert!(err.contains("\"c\"") && err.contains("a, b"), "{err}");
    }
}
