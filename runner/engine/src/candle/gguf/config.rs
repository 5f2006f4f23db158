//! A GGUF file's metadata read as the config.json of the same model: the keys
//! llama.cpp's converter writes (`llama.*`, `gemma3.*`) mapped back to Hugging Face's,
//! so that the architecture's registry row parses and checks them as it would a folder's.

use crate::EngineError;
use candle_core::quantized::gguf_file::Value;
use serde_json::json;
use std::collections::HashMap;
use std::path::Path;

/// Typed reads of a file's metadata; every error names the file and the key.
pub struct Metadata<'a> {
    path: &'a Path,
    values: &'a HashMap<String, Value>,
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::U8(_)
        | Value::I8(_)
        | Value::U16(_)
        | Value::I16(_)
        | Value::U32(_)
        | Value::I32(_)
        | Value::U64(_)
        | Value::I64(_) => "an integer",
        Value::F32(_) | Value::F64(_) => "a float",
        Value::Bool(_) => "a bool",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
    }
}

impl<'a> Metadata<'a> {
    pub fn new(path: &'a Path, values: &'a HashMap<String, Value>) -> Self {
        Metadata { path, values }
    }

    fn bad(&self, message: String) -> EngineError {
        EngineError::BadFile {
            what: "GGUF metadata",
            path: self.path.to_path_buf(),
            message,
        }
    }

    fn wrong(&self, key: &str, v: &Value, expected: &str) -> EngineError {
        self.bad(format!("key {key} is {}, expected {expected}", kind(v)))
    }

    fn missing(&self, key: &str) -> EngineError {
        self.bad(format!("key {key} is missing"))
    }

    pub fn opt_usize(&self, key: &str) -> Result<Option<usize>, EngineError> {
        let Some(v) = self.values.get(key) else {
            return Ok(None);
        };
        let n: Option<i128> = match v {
            Value::U8(x) => Some((*x).into()),
            Value::I8(x) => Some((*x).into()),
            Value::U16(x) => Some((*x).into()),
            Value::I16(x) => Some((*x).into()),
            Value::U32(x) => Some((*x).into()),
            Value::I32(x) => Some((*x).into()),
            Value::U64(x) => Some((*x).into()),
            Value::I64(x) => Some((*x).into()),
            _ => None,
        };
        let n = n.ok_or_else(|| self.wrong(key, v, "an integer"))?;
        usize::try_from(n)
            .map(Some)
            .map_err(|_| self.bad(format!("key {key} is {n}, not a size")))
    }

    pub fn usize(&self, key: &str) -> Result<usize, EngineError> {
        self.opt_usize(key)?.ok_or_else(|| self.missing(key))
    }

    pub fn opt_f64(&self, key: &str) -> Result<Option<f64>, EngineError> {
        match self.values.get(key) {
            None => Ok(None),
            Some(Value::F32(x)) if x.is_finite() => Ok(Some(f64::from(*x))),
            Some(Value::F64(x)) if x.is_finite() => Ok(Some(*x)),
            Some(Value::F32(_) | Value::F64(_)) => {
                Err(self.bad(format!("key {key} is not a finite number")))
            }
            Some(v) => Err(self.wrong(key, v, "a float")),
        }
    }

    pub fn f64(&self, key: &str) -> Result<f64, EngineError> {
        self.opt_f64(key)?.ok_or_else(|| self.missing(key))
    }

    pub fn opt_string(&self, key: &str) -> Result<Option<String>, EngineError> {
        match self.values.get(key) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(v) => Err(self.wrong(key, v, "a string")),
        }
    }

    pub fn string(&self, key: &str) -> Result<String, EngineError> {
        self.opt_string(key)?.ok_or_else(|| self.missing(key))
    }

    /// Token ids under `key`, one or an array of them.
    pub fn token_ids(&self, key: &str) -> Result<Vec<u32>, EngineError> {
        let one = |v: &Value| -> Result<u32, EngineError> {
            v.to_u32()
                .or_else(|_| v.to_u64().map(|x| x as u32))
                .map_err(|_| self.wrong(key, v, "a token id"))
        };
        match self.values.get(key) {
            None => Ok(Vec::new()),
            Some(Value::Array(items)) => items.iter().map(one).collect(),
            Some(v) => Ok(vec![one(v)?]),
        }
    }
}

/// The architectures whose GGUF metadata this engine maps to a config.
pub const ARCHITECTURES: [&str; 3] = ["llama", "qwen2", "gemma3"];

/// config.json for the model the metadata describes. `vocab` is the embedding table's
/// rows and `tied` whether the file has no output head of its own.
pub fn hf_config(
    meta: &Metadata,
    arch: &str,
    vocab: usize,
    tied: bool,
) -> Result<serde_json::Value, EngineError> {
    let k = |key: &str| format!("{arch}.{key}");
    let heads = meta.usize(&k("attention.head_count"))?;
    let common = json!({
        "vocab_size": vocab,
        "hidden_size": meta.usize(&k("embedding_length"))?,
        "intermediate_size": meta.usize(&k("feed_forward_length"))?,
        "num_hidden_layers": meta.usize(&k("block_count"))?,
        "num_attention_heads": heads,
        "num_key_value_heads": meta.opt_usize(&k("attention.head_count_kv"))?.unwrap_or(heads),
        "rms_norm_eps": meta.f64(&k("attention.layer_norm_rms_epsilon"))?,
        "max_position_embeddings": meta.usize(&k("context_length"))?,
        "tie_word_embeddings": tied,
    });
    let mut config = common;
    let o = config.as_object_mut().expect("a json object");
    match arch {
        // Qwen2 is Llama's decoder with biases on q, k and v (the registry's qwen2 row
        // sets them); its converter keeps q and k in Hugging Face's row order, and its
        // RoPE base is 1,000,000 where the file omits it (Qwen2.5's configs).
        "llama" | "qwen2" => {
            o.insert("model_type".into(), json!(arch));
            let base = if arch == "qwen2" {
                1_000_000.0
            } else {
                10_000.0
            };
            o.insert(
                "rope_theta".into(),
                json!(meta.opt_f64(&k("rope.freq_base"))?.unwrap_or(base)),
            );
            if let Some(d) = meta.opt_usize(&k("attention.key_length"))? {
                o.insert("head_dim".into(), json!(d));
            }
            if let Some(t) = meta.opt_string(&k("rope.scaling.type"))? {
                if t != "none" {
                    return Err(meta.bad(format!(
                        "key {} is {t:?}: rope scaling is not supported for GGUF {arch} models",
                        k("rope.scaling.type")
                    )));
                }
            }
        }
        "gemma3" => {
            let head_dim = meta.opt_usize(&k("attention.key_length"))?.unwrap_or(256);
            let hidden = o["hidden_size"].as_u64().unwrap_or(0) as usize;
            let layers = o["num_hidden_layers"].as_u64().unwrap_or(0);
            // llama.cpp scales Gemma 3 27B's queries by its hidden size per head, the
            // others' by their head size (the configs' query_pre_attn_scalar).
            let query_scalar = if layers == 62 {
                hidden.checked_div(heads).unwrap_or(head_dim)
            } else {
                head_dim
            };
            o.insert("model_type".into(), json!("gemma3_text"));
            o.insert("head_dim".into(), json!(head_dim));
            o.insert("query_pre_attn_scalar".into(), json!(query_scalar));
            o.insert(
                "rope_theta".into(),
                json!(meta.opt_f64(&k("rope.freq_base"))?.unwrap_or(1_000_000.0)),
            );
            // The converter writes no local base; llama.cpp takes Gemma 3's 10,000.
            o.insert(
                "rope_local_base_freq".into(),
                json!(meta.opt_f64(&k("rope.freq_base_swa"))?.unwrap_or(10_000.0)),
            );
            if let Some(w) = meta.opt_usize(&k("attention.sliding_window"))? {
                o.insert("sliding_window".into(), json!(w));
            }
            // Every sixth layer is global in all Gemma 3 models; the file does not say.
            o.insert("sliding_window_pattern".into(), json!(6));
            if let Some(t) = meta.opt_string(&k("rope.scaling.type"))? {
                match t.as_str() {
                    "none" => {}
                    "linear" => {
                        let factor = meta.f64(&k("rope.scaling.factor"))?;
                        o.insert(
                            "rope_scaling".into(),
                            json!({"rope_type": "linear", "factor": factor}),
                        );
                    }
                    other => {
                        return Err(meta.bad(format!(
                            "key {} is {other:?}: only linear rope scaling is supported for gemma3",
                            k("rope.scaling.type")
                        )))
                    }
                }
            }
            if let Some(c) = meta.opt_f64(&k("final_logit_softcapping"))? {
                o.insert("final_logit_softcapping".into(), json!(c));
            }
            if let Some(c) = meta.opt_f64(&k("attn_logit_softcapping"))? {
                o.insert("attn_logit_softcapping".into(), json!(c));
            }
        }
        other => {
            return Err(meta.bad(format!(
                "general.architecture is {other:?}; GGUF models of these architectures load: {}",
                ARCHITECTURES.join(", ")
            )))
        }
    }
    Ok(config)
}

/// Llama 3's RoPE scaling as llama.cpp's converter stores it: no metadata key, but a
/// tensor `rope_freqs.weight` with one divisor per rotary frequency. The engine's llama
/// takes the scaling as config.json states it (`rope_scaling`, rope_type llama3), so the
/// divisors are matched to that form: the factor is the largest divisor, the rest are
/// Llama 3.1's (low 1, high 4, original context 8,192), and every divisor must be what
/// those give, within f32 rounding. Other divisors are refused rather than ignored: a
/// model run without its scaling computes other attention at every position.
pub fn llama3_rope_scaling(
    divisors: &[f32],
    head_dim: usize,
    theta: f64,
) -> Result<serde_json::Value, String> {
    if divisors.len() * 2 != head_dim {
        return Err(format!(
            "{} divisors, expected one per rotary frequency ({})",
            divisors.len(),
            head_dim / 2
        ));
    }
    let factor = divisors.iter().copied().fold(f32::MIN, f32::max) as f64;
    let (low, high, original) = (1.0, 4.0, 8192.0);
    let (low_wavelen, high_wavelen) = (original / low, original / high);
    for (i, &got) in divisors.iter().enumerate() {
        let freq = 1.0 / theta.powf((2 * i) as f64 / head_dim as f64);
        let wavelen = 2.0 * std::f64::consts::PI / freq;
        let want = if wavelen < high_wavelen {
            1.0
        } else if wavelen > low_wavelen {
            factor
        } else {
            let smooth = (original / wavelen - low) / (high - low);
            1.0 / ((1.0 - smooth) / factor + smooth)
        };
        if (got as f64 - want).abs() > 1e-5 * want {
            return Err(format!(
                "divisor {i} is {got}, but Llama 3's scaling with factor {factor} (low 1, high 4, \
                 original context 8192) gives {want}; this engine applies no other per-frequency \
                 scaling"
            ));
        }
    }
    Ok(json!({
        "rope_type": "llama3",
        "factor": factor,
        "low_freq_factor": low,
        "high_freq_factor": high,
        "original_max_position_embeddings": original,
    }))
}

#[cfg(test)]
mod rope_tests {
    use super::llama3_rope_scaling;

    /// llama.cpp's converter's divisors for Llama 3.1 8B (head 128, base 500,000,
    /// factor 8), computed here in its own form (a product with the smoothing weight).
    fn converter_divisors(factor: f64) -> Vec<f32> {
        (0..64)
            .map(|i| {
                let freq = 1.0 / 500_000f64.powf(2.0 * i as f64 / 128.0);
                let wavelen = 2.0 * std::f64::consts::PI / freq;
                if wavelen < 2048.0 {
                    1.0
                } else if wavelen > 8192.0 {
                    factor as f32
                } else {
                    let smooth = (8192.0 / wavelen - 1.0) / 3.0;
                    (1.0 / ((1.0 - smooth) / factor + smooth)) as f32
                }
            })
            .collect()
    }

    #[test]
    fn llama_3_1s_divisors_read_as_its_config_scaling() {
        let got = llama3_rope_scaling(&converter_divisors(8.0), 128, 500_000.0).unwrap();
        assert_eq!(got["rope_type"], "llama3");
        assert_eq!(got["factor"], 8.0);
        assert_eq!(got["original_max_position_embeddings"], 8192.0);
        // Llama 3.2's factor 32 is found from the divisors too.
        let got = llama3_rope_scaling(&converter_divisors(32.0), 128, 500_000.0).unwrap();
        assert_eq!(got["factor"], 32.0);
    }

    #[test]
    fn other_divisors_are_refused_naming_the_first_that_differs() {
        let mut d = converter_divisors(8.0);
        d[31] *= 1.01;
        let err = llama3_rope_scaling(&d, 128, 500_000.0).unwrap_err();
        assert!(err.contains("divisor 31"), "{err}");
        let err = llama3_rope_scaling(&d[..10], 128, 500_000.0).unwrap_err();
        assert!(err.contains("10 divisors"), "{err}");
    }
}
