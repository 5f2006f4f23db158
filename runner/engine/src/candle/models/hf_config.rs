//! config.json as transformers 5 writes it, read into the keys the model configs take.
//!
//! transformers 5 moved RoPE's settings into `rope_parameters`: one object
//! (`{"rope_theta": .., "rope_type": "default" | "llama3" | "linear" | ..}` with the
//! type's own fields) or, for models whose layers differ (Gemma 3), one object per layer
//! type (`full_attention`, `sliding_attention`). Checkpoints written before it carry
//! `rope_theta`, `rope_scaling` and Gemma's `rope_local_base_freq` instead. Both are read:
//! the newer form is turned into the older keys here, once, so that each architecture's
//! config has one form to parse. A config that states both and disagrees is refused.

use serde_json::{Map, Value};

/// Rewrites `rope_parameters` (top level, and in a multimodal `text_config`) into
/// `rope_theta`, `rope_scaling` and `rope_local_base_freq`.
pub fn classic_keys(config: &mut Value) -> Result<(), String> {
    if let Some(text) = config.get_mut("text_config").filter(|t| t.is_object()) {
        rewrite(text, "text_config.")?;
    }
    rewrite(config, "")
}

fn rewrite(config: &mut Value, at: &str) -> Result<(), String> {
    let Some(o) = config.as_object_mut() else {
        return Ok(());
    };
    if let Some(pattern) = o.get("_sliding_window_pattern").cloned() {
        o.entry("sliding_window_pattern").or_insert(pattern);
    }
    let Some(params) = o.get("rope_parameters").cloned() else {
        return Ok(());
    };
    if params.is_null() {
        return Ok(());
    }
    let Some(p) = params.as_object() else {
        return Err(format!("{at}rope_parameters is not an object: {params}"));
    };
    let per_layer_type = p.contains_key("full_attention") || p.contains_key("sliding_attention");
    if !per_layer_type {
        return apply(o, p, "rope_theta", at, "rope_parameters");
    }
    for kind in p.keys() {
        if kind != "full_attention" && kind != "sliding_attention" {
            return Err(format!(
                "{at}rope_parameters.{kind}: unknown layer type (full_attention and \
                 sliding_attention are read)"
            ));
        }
    }
    if let Some(full) = p.get("full_attention") {
        let full = full.as_object().ok_or_else(|| {
            format!("{at}rope_parameters.full_attention is not an object: {full}")
        })?;
        apply(o, full, "rope_theta", at, "rope_parameters.full_attention")?;
    }
    if let Some(local) = p.get("sliding_attention") {
        let field = "rope_parameters.sliding_attention";
        let local = local
            .as_object()
            .ok_or_else(|| format!("{at}{field} is not an object: {local}"))?;
        if scaling(local).is_some() {
            return Err(format!(
                "{at}{field}: RoPE scaling on sliding-window layers is not supported"
            ));
        }
        set_theta(o, local, "rope_local_base_freq", at, field)?;
    }
    Ok(())
}

/// The object's RoPE scaling, if its type is other than the plain ("default") one.
fn scaling(p: &Map<String, Value>) -> Option<Value> {
    match p.get("rope_type").and_then(Value::as_str) {
        None | Some("default") => None,
        Some(_) => {
            let mut s = p.clone();
            s.remove("rope_theta");
            Some(Value::Object(s))
        }
    }
}

fn apply(
    o: &mut Map<String, Value>,
    p: &Map<String, Value>,
    theta_key: &str,
    at: &str,
    field: &str,
) -> Result<(), String> {
    set_theta(o, p, theta_key, at, field)?;
    if let Some(s) = scaling(p) {
        match o.get("rope_scaling") {
            Some(old) if !old.is_null() && !same_scaling(old, &s) => {
                return Err(format!(
                    "{at}{field} ({s}) disagrees with {at}rope_scaling ({old})"
                ))
            }
            _ => {
                o.insert("rope_scaling".into(), s);
            }
        }
    }
    Ok(())
}

fn set_theta(
    o: &mut Map<String, Value>,
    p: &Map<String, Value>,
    key: &str,
    at: &str,
    field: &str,
) -> Result<(), String> {
    let Some(theta) = p.get("rope_theta") else {
        return Ok(());
    };
    let value = theta
        .as_f64()
        .filter(|t| t.is_finite() && *t > 0.0)
        .ok_or_else(|| format!("{at}{field}.rope_theta is not a positive number: {theta}"))?;
    match o.get(key).and_then(Value::as_f64) {
        Some(old) if old != value => Err(format!(
            "{at}{field}.rope_theta ({value}) disagrees with {at}{key} ({old})"
        )),
        _ => {
            o.insert(key.into(), Value::from(value));
            Ok(())
        }
    }
}

/// Scalings compare by their fields, whichever key names the type (`type` is the
/// older spelling of `rope_type`).
fn same_scaling(a: &Value, b: &Value) -> bool {
    let norm = |v: &Value| -> Value {
        let mut m = v.as_object().cloned().unwrap_or_default();
        if let Some(t) = m.remove("type") {
            m.entry("rope_type").or_insert(t);
        }
        Value::Object(m)
    };
    norm(a) == norm(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn classic(mut v: Value) -> Result<Value, String> {
        classic_keys(&mut v)?;
        Ok(v)
    }

    #[test]
    fn a_single_default_rope_becomes_rope_theta_without_scaling() {
        let v =
            classic(json!({"rope_parameters": {"rope_theta": 100000.0, "rope_type": "default"}}))
                .unwrap();
        assert_eq!(v["rope_theta"], json!(100000.0));
        assert!(v.get("rope_scaling").is_none());
    }

    #[test]
    fn llama3_scaling_moves_to_rope_scaling_with_its_fields() {
        let v = classic(json!({"rope_parameters": {
            "rope_theta": 500000.0, "rope_type": "llama3", "factor": 8.0,
            "low_freq_factor": 1.0, "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192
        }}))
        .unwrap();
        assert_eq!(v["rope_theta"], json!(500000.0));
        assert_eq!(
            v["rope_scaling"],
            json!({"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                   "high_freq_factor": 4.0, "original_max_position_embeddings": 8192})
        );
    }

    #[test]
    fn gemma3_per_layer_type_sets_global_and_local_bases() {
        let v = classic(json!({"text_config": {"rope_parameters": {
            "full_attention": {"rope_theta": 1000000.0, "rope_type": "linear", "factor": 8.0},
            "sliding_attention": {"rope_theta": 10000.0, "rope_type": "default"}
        }, "_sliding_window_pattern": 6}}))
        .unwrap();
        let t = &v["text_config"];
        assert_eq!(t["rope_theta"], json!(1000000.0));
        assert_eq!(t["rope_local_base_freq"], json!(10000.0));
        assert_eq!(
            t["rope_scaling"],
            json!({"rope_type": "linear", "factor": 8.0})
        );
        assert_eq!(t["sliding_window_pattern"], json!(6));
    }

    #[test]
    fn both_forms_must_agree() {
        let err = classic(json!({"rope_theta": 10000.0,
            "rope_parameters": {"rope_theta": 500000.0, "rope_type": "default"}}))
        .unwrap_err();
        assert!(
            err.contains("rope_parameters.rope_theta (500000) disagrees with rope_theta (10000)"),
            "{err}"
        );
        let same = classic(
            json!({"rope_theta": 500000.0, "rope_scaling": {"type": "linear", "factor": 2.0},
            "rope_parameters": {"rope_theta": 500000.0, "rope_type": "linear", "factor": 2.0}}),
        );
        assert!(same.is_ok(), "{same:?}");
    }

    #[test]
    fn bad_values_name_the_field() {
        let err = classic(json!({"rope_parameters": {"rope_theta": "x"}})).unwrap_err();
        assert!(
            err.contains("rope_parameters.rope_theta is not a positive number"),
            "{err}"
        );
        let err = classic(
            json!({"rope_parameters": {"full_attention": {"rope_theta": 1.0},
            "chunked_attention": {}}}),
        )
        .unwrap_err();
        assert!(
            err.contains("rope_parameters.chunked_attention: unknown layer type"),
            "{err}"
        );
        let err = classic(json!({"rope_parameters": {
            "sliding_attention": {"rope_theta": 1.0, "rope_type": "linear", "factor": 2.0}}}))
        .unwrap_err();
        assert!(err.contains("not supported"), "{err}");
    }
}
