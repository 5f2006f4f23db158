//! GGUF files written from the fixtures' safetensors (renamed, q and k reordered and
//! Gemma's norms offset as llama.cpp's converter does) load into the model the folder
//! loads; damaged files are refused by name.

use crate::candle::fixture::{write_fixture, Size};
use crate::candle::gguf::names;
use crate::candle::gguf::unpermute_rows;
use crate::candle::load::hub::ModelFiles;
use crate::candle::models::Arch;
use crate::candle::Engine;
use crate::EngineError;
use candle_core::quantized::gguf_file::{self, Value};
use candle_core::quantized::{GgmlDType, QTensor};
use candle_core::{Device, Tensor};
use std::path::{Path, PathBuf};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("gguf-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// llama.cpp's reordering of a q or k weight's rows (the inverse of [`unpermute_rows`]).
fn permute(w: &Tensor, heads: usize) -> Tensor {
    let (rows, cols) = w.dims2().unwrap();
    w.reshape((heads, 2, rows / heads / 2, cols))
        .unwrap()
        .transpose(1, 2)
        .unwrap()
        .reshape((rows, cols))
        .unwrap()
}

/// A fixture folder whose config says only what GGUF metadata can (no llama3 rope
/// scaling; Gemma's every-sixth-layer pattern), and a folder beside it with the same
/// model as `model.gguf` with matrices in `matrices`; the tokenizer files in both.
fn fixture_pair(arch: Arch, name: &str, matrices: GgmlDType) -> (PathBuf, PathBuf) {
    let folder = scratch(&format!("{name}-folder"));
    write_fixture(arch, Size::Tiny, &folder).unwrap();
    let config_path = folder.join("config.json");
    let mut config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&config_path).unwrap()).unwrap();
    let o = config.as_object_mut().unwrap();
    let arch_name = match arch {
        Arch::Llama => {
            o.remove("rope_scaling");
            "llama"
        }
        Arch::Gemma3 => {
            o.remove("layer_types");
            o.insert("sliding_window_pattern".into(), 6.into());
            "gemma3"
        }
        _ => unreachable!(),
    };
    std::fs::write(&config_path, config.to_string()).unwrap();
    let c = |k: &str| config[k].as_u64().unwrap() as u32;
    let tensors =
        candle_core::safetensors::load(folder.join("model.safetensors"), &Device::Cpu).unwrap();
    let mut out: Vec<(String, QTensor)> = Vec::new();
    for (hf, t) in &tensors {
        let gguf = names::gguf_name(hf, arch_name).unwrap_or_else(|| panic!("{hf}"));
        let mut t = t.to_dtype(candle_core::DType::F32).unwrap();
        if arch_name == "llama" && gguf.ends_with("attn_q.weight") {
            t = permute(&t, c("num_attention_heads") as usize);
        }
        if arch_name == "llama" && gguf.ends_with("attn_k.weight") {
            t = permute(&t, c("num_key_value_heads") as usize);
        }
        if arch_name == "gemma3" && gguf.ends_with("norm.weight") {
            t = (t + 1.0).unwrap();
        }
        let q = if t.rank() == 2 {
            QTensor::quantize(&t, matrices).unwrap()
        } else {
            QTensor::quantize(&t, GgmlDType::F32).unwrap()
        };
        out.push((gguf, q));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    let k = |key: &str| format!("{arch_name}.{key}");
    let mut meta: Vec<(String, Value)> = vec![
        (
            "general.architecture".into(),
            Value::String(arch_name.into()),
        ),
        (k("context_length"), Value::U32(4096)),
        (k("embedding_length"), Value::U32(c("hidden_size"))),
        (k("feed_forward_length"), Value::U32(c("intermediate_size"))),
        (k("block_count"), Value::U32(c("num_hidden_layers"))),
        (
            k("attention.head_count"),
            Value::U32(c("num_attention_heads")),
        ),
        (
            k("attention.head_count_kv"),
            Value::U32(c("num_key_value_heads")),
        ),
        (k("attention.key_length"), Value::U32(c("head_dim"))),
        (
            k("attention.layer_norm_rms_epsilon"),
            Value::F32(config["rms_norm_eps"].as_f64().unwrap() as f32),
        ),
        (
            k("rope.freq_base"),
            Value::F32(config["rope_theta"].as_f64().unwrap() as f32),
        ),
        (
            "tokenizer.ggml.eos_token_id".into(),
            Value::U32(match &config["eos_token_id"] {
                serde_json::Value::Array(a) => a[0].as_u64().unwrap() as u32,
                v => v.as_u64().unwrap() as u32,
            }),
        ),
    ];
    meta.extend(tokenizer_metadata(&folder, arch_name == "gemma3"));
    if arch_name == "gemma3" {
        meta.push((
            k("attention.sliding_window"),
            Value::U32(c("sliding_window")),
        ));
        meta.push((k("rope.scaling.type"), Value::String("linear".into())));
        meta.push((k("rope.scaling.factor"), Value::F32(8.0)));
    }
    let dir = scratch(&format!("{name}-gguf"));
    std::fs::create_dir_all(&dir).unwrap();
    for f in [
        "tokenizer.json",
        "tokenizer_config.json",
        "generation_config.json",
    ] {
        if folder.join(f).is_file() {
            std::fs::copy(folder.join(f), dir.join(f)).unwrap();
        }
    }
    write_gguf(&dir.join("model.gguf"), &meta, &out);
    (folder, dir)
}

/// The fixture's tokenizer.json as a GGUF file states a tokenizer: its tokens in id
/// order, the added special tokens as control tokens; a gpt2 byte-level BPE with its
/// merges, or (`sentencepiece`, Gemma's) a llama SentencePiece vocabulary with scores.
fn tokenizer_metadata(folder: &Path, sentencepiece: bool) -> Vec<(String, Value)> {
    let text = std::fs::read_to_string(folder.join("tokenizer.json")).unwrap();
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut tokens: Vec<(u64, String, i32)> = json["model"]["vocab"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(t, id)| (id.as_u64().unwrap(), t.clone(), 1))
        .collect();
    for added in json["added_tokens"].as_array().unwrap() {
        let special = added["special"].as_bool().unwrap_or(false);
        let id = added["id"].as_u64().unwrap();
        tokens.retain(|(i, _, _)| *i != id);
        let kind = if special { 3 } else { 4 };
        tokens.push((id, added["content"].as_str().unwrap().into(), kind));
    }
    tokens.sort();
    assert!(
        tokens.iter().enumerate().all(|(i, t)| t.0 == i as u64),
        "the fixture's ids run without a gap"
    );
    let merges: Vec<Value> = json["model"]["merges"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| match m {
            serde_json::Value::Array(pair) => Value::String(format!(
                "{} {}",
                pair[0].as_str().unwrap(),
                pair[1].as_str().unwrap()
            )),
            other => Value::String(other.as_str().unwrap().into()),
        })
        .collect();
    if sentencepiece {
        return vec![
            ("tokenizer.ggml.model".into(), Value::String("llama".into())),
            (
                "tokenizer.ggml.tokens".into(),
                Value::Array(tokens.iter().map(|t| Value::String(t.1.clone())).collect()),
            ),
            (
                "tokenizer.ggml.scores".into(),
                Value::Array(tokens.iter().map(|t| Value::F32(-(t.0 as f32))).collect()),
            ),
            (
                "tokenizer.ggml.token_type".into(),
                Value::Array(tokens.iter().map(|t| Value::I32(t.2)).collect()),
            ),
        ];
    }
    vec![
        ("tokenizer.ggml.model".into(), Value::String("gpt2".into())),
        (
            "tokenizer.ggml.tokens".into(),
            Value::Array(tokens.iter().map(|t| Value::String(t.1.clone())).collect()),
        ),
        (
            "tokenizer.ggml.token_type".into(),
            Value::Array(tokens.iter().map(|t| Value::I32(t.2)).collect()),
        ),
        ("tokenizer.ggml.merges".into(), Value::Array(merges)),
    ]
}

fn write_gguf(path: &Path, meta: &[(String, Value)], tensors: &[(String, QTensor)]) {
    let mut f = std::fs::File::create(path).unwrap();
    let meta: Vec<(&str, &Value)> = meta.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let tensors: Vec<(&str, &QTensor)> = tensors.iter().map(|(k, v)| (k.as_str(), v)).collect();
    gguf_file::write(&mut f, &meta, &tensors).unwrap();
}

fn load(dir: &Path) -> Result<Engine, EngineError> {
    Engine::load(&ModelFiles::from_dir(dir)?, Device::Cpu, "fixture")
}

fn logits(engine: &Engine) -> Vec<Vec<f32>> {
    let prompts = vec![vec![5u32, 9, 14, 3, 27, 8, 11, 40], vec![7u32, 2, 19]];
    engine.prompt_logits(&prompts).unwrap()
}

fn max_diff(a: &[Vec<f32>], b: &[Vec<f32>]) -> f32 {
    a.iter()
        .flatten()
        .zip(b.iter().flatten())
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

#[test]
fn an_f32_gguf_gives_its_folders_logits() {
    for (arch, name) in [(Arch::Llama, "llama-f32"), (Arch::Gemma3, "gemma3-f32")] {
        let (folder, gguf) = fixture_pair(arch, name, GgmlDType::F32);
        let want = logits(&load(&folder).unwrap());
        let engine = load(&gguf).unwrap();
        assert_eq!(
            engine.weight_format(),
            crate::candle::weights::WeightFormat::Gguf
        );
        let got = logits(&engine);
        let d = max_diff(&want, &got);
        assert!(d < 1e-3, "{name}: logits differ by {d}");
        let _ = std::fs::remove_dir_all(folder);
        let _ = std::fs::remove_dir_all(gguf);
    }
}

#[test]
fn a_q8_0_gguf_stays_near_its_folders_logits_and_each_row_is_its_own() {
    for (arch, name) in [(Arch::Llama, "llama-q8"), (Arch::Gemma3, "gemma3-q8")] {
        let (folder, gguf) = fixture_pair(arch, name, GgmlDType::Q8_0);
        let want = logits(&load(&folder).unwrap());
        let engine = load(&gguf).unwrap();
        let got = logits(&engine);
        let spread = want[0].iter().map(|x| x.abs()).fold(0.0, f32::max);
        let d = max_diff(&want, &got);
        assert!(
            d > 0.0 && d < 0.05 * spread,
            "{name}: logits differ by {d} (max {spread})"
        );
        // A prompt's logits are the same bits alone as beside another.
        let alone = engine.prompt_logits(&[vec![7u32, 2, 19]]).unwrap();
        assert_eq!(alone[0], got[1], "{name}");
        let _ = std::fs::remove_dir_all(folder);
        let _ = std::fs::remove_dir_all(gguf);
    }
}

/// The error of loading `dir`, which must name the file and each of `parts`.
#[track_caller]
fn refused(dir: &Path, parts: &[&str]) {
    let err = match load(dir) {
        Ok(_) => panic!("{} loaded", dir.display()),
        Err(e) => e.to_string(),
    };
    assert!(err.contains("model.gguf"), "no file name in: {err}");
    for p in parts {
        assert!(err.contains(p), "{p:?} missing from: {err}");
    }
}

#[test]
fn a_truncated_file_is_refused_by_name() {
    let (folder, dir) = fixture_pair(Arch::Llama, "truncated", GgmlDType::Q8_0);
    let path = dir.join("model.gguf");
    let bytes = std::fs::read(&path).unwrap();
    std::fs::write(&path, &bytes[..bytes.len() - 1000]).unwrap();
    refused(&dir, &["truncated", "tensor "]);
    // Cut inside the header.
    std::fs::write(&path, &bytes[..200]).unwrap();
    refused(&dir, &["GGUF"]);
    let _ = std::fs::remove_dir_all(folder);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn an_unknown_tensor_type_is_refused_by_name() {
    let (folder, dir) = fixture_pair(Arch::Llama, "unknown-type", GgmlDType::Q8_0);
    let path = dir.join("model.gguf");
    let mut bytes = std::fs::read(&path).unwrap();
    // The type follows the name, the rank and two dimensions.
    let name = b"blk.0.attn_v.weight";
    let at = bytes.windows(name.len()).position(|w| w == name).unwrap() + name.len() + 4 + 16;
    assert_eq!(u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()), 8);
    bytes[at..at + 4].copy_from_slice(&99u32.to_le_bytes());
    std::fs::write(&path, &bytes).unwrap();
    refused(&dir, &["unknown dtype", "99", "Q4_K"]);
    // A type candle knows but this engine does not read.
    bytes[at..at + 4].copy_from_slice(&9u32.to_le_bytes());
    std::fs::write(&path, &bytes).unwrap();
    refused(&dir, &["blk.0.attn_v.weight", "Q8_1"]);
    let _ = std::fs::remove_dir_all(folder);
    let _ = std::fs::remove_dir_all(dir);
}

/// Rewrites `dir`'s model.gguf with its metadata and tensors passed through `edit`.
fn rewrite(dir: &Path, edit: impl FnOnce(&mut Vec<(String, Value)>, &mut Vec<(String, QTensor)>)) {
    let path = dir.join("model.gguf");
    let mut file = std::fs::File::open(&path).unwrap();
    let content = gguf_file::Content::read(&mut file).unwrap();
    let mut meta: Vec<(String, Value)> = content.metadata.clone().into_iter().collect();
    meta.sort_by(|a, b| a.0.cmp(&b.0));
    let mut tensors: Vec<(String, QTensor)> = content
        .tensor_infos
        .keys()
        .map(|n| {
            (
                n.clone(),
                content.tensor(&mut file, n, &Device::Cpu).unwrap(),
            )
        })
        .collect();
    tensors.sort_by(|a, b| a.0.cmp(&b.0));
    edit(&mut meta, &mut tensors);
    write_gguf(&path, &meta, &tensors);
}

#[test]
fn a_metadata_key_of_the_wrong_type_is_refused_by_name() {
    let (folder, dir) = fixture_pair(Arch::Gemma3, "wrong-key", GgmlDType::Q8_0);
    rewrite(&dir, |meta, _| {
        for (k, v) in meta.iter_mut() {
            if k == "gemma3.block_count" {
                *v = Value::String("two".into());
            }
        }
    });
    refused(
        &dir,
        &["gemma3.block_count", "a string", "expected an integer"],
    );
    let _ = std::fs::remove_dir_all(folder);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn a_tensor_shape_the_architecture_does_not_have_is_refused_by_name() {
    let (folder, dir) = fixture_pair(Arch::Llama, "wrong-shape", GgmlDType::Q8_0);
    rewrite(&dir, |_, tensors| {
        for (n, t) in tensors.iter_mut() {
            if n == "blk.1.ffn_up.weight" {
                let (rows, cols) = t.shape().dims2().unwrap();
                let w =
                    Tensor::zeros((rows / 2, cols), candle_core::DType::F32, &Device::Cpu).unwrap();
                *t = QTensor::quantize(&w, GgmlDType::Q8_0).unwrap();
            }
        }
    });
    refused(&dir, &["blk.1.ffn_up.weight", "shape"]);
    let _ = std::fs::remove_dir_all(folder);
    let _ = std::fs::remove_dir_all(dir);
}

/// Llama 3's RoPE divisors for `head_dim` and `theta` (factor 8, low 1, high 4,
/// original context 8,192), in the converter's form, times `skew` from index 1 on.
fn rope_freqs(head_dim: usize, theta: f64, skew: f32) -> QTensor {
    let d: Vec<f32> = (0..head_dim / 2)
        .map(|i| {
            let wavelen = 2.0 * std::f64::consts::PI * theta.powf(2.0 * i as f64 / head_dim as f64);
            let r = if wavelen < 2048.0 {
                1.0
            } else if wavelen > 8192.0 {
                8.0
            } else {
                let smooth = (8192.0 / wavelen - 1.0) / 3.0;
                1.0 / ((1.0 - smooth) / 8.0 + smooth)
            };
            r as f32 * if i > 0 { skew } else { 1.0 }
        })
        .collect();
    let t = Tensor::from_vec(d, head_dim / 2, &Device::Cpu).unwrap();
    QTensor::quantize(&t, GgmlDType::F32).unwrap()
}

#[test]
fn a_llama_files_rope_freqs_are_its_llama3_scaling_or_refused_by_name() {
    let (folder, dir) = fixture_pair(Arch::Llama, "rope-freqs", GgmlDType::F32);
    let config_path = folder.join("config.json");
    let mut config: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&config_path).unwrap()).unwrap();
    let head_dim = config["head_dim"].as_u64().unwrap() as usize;
    let theta = config["rope_theta"].as_f64().unwrap();
    // The folder with the scaling in its config, and the file with its tensor.
    config["rope_scaling"] = serde_json::json!({
        "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
        "high_freq_factor": 4.0, "original_max_position_embeddings": 8192
    });
    std::fs::write(&config_path, config.to_string()).unwrap();
    rewrite(&dir, |_, tensors| {
        tensors.push(("rope_freqs.weight".into(), rope_freqs(head_dim, theta, 1.0)));
    });
    let want = logits(&load(&folder).unwrap());
    let d = max_diff(&want, &logits(&load(&dir).unwrap()));
    assert!(d < 1e-3, "logits differ by {d}");
    // Divisors of no Llama 3 scaling: refused, not run without them.
    rewrite(&dir, |_, tensors| {
        for (n, t) in tensors.iter_mut() {
            if n == "rope_freqs.weight" {
                *t = rope_freqs(head_dim, theta, 1.5);
            }
        }
    });
    refused(&dir, &["rope_freqs.weight", "divisor 1"]);
    let _ = std::fs::remove_dir_all(folder);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn unpermuting_undoes_llama_cpps_row_order() {
    let w = Tensor::arange(0f32, 8.0 * 3.0, &Device::Cpu)
        .unwrap()
        .reshape((8, 3))
        .unwrap();
    let permuted = permute(&w, 2);
    let bytes: Vec<u8> = permuted
        .flatten_all()
        .unwrap()
        .to_vec1::<f32>()
        .unwrap()
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    let back = unpermute_rows(&bytes, &[8, 3], 2).unwrap();
    let back: Vec<f32> = back
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(back, w.flatten_all().unwrap().to_vec1::<f32>().unwrap());
    assert!(unpermute_rows(&bytes, &[8, 3], 3).is_err());
}

#[test]
fn a_tensors_rows_read_from_the_file_are_its_blocks_rows_in_hugging_faces_order() {
    use crate::candle::cpu::quantized::RowSource;
    use crate::candle::gguf::GgufHeader;
    let (folder, dir) = fixture_pair(Arch::Llama, "file-rows", GgmlDType::Q8_0);
    let path = dir.join("model.gguf");
    let model = GgufHeader::read(&path).unwrap().load(&Device::Cpu).unwrap();
    // q is stored with its rows interleaved per head, the table as it is.
    for name in [
        "blk.0.attn_q.weight",
        "blk.1.attn_k.weight",
        "token_embd.weight",
    ] {
        let whole = model
            .read(name)
            .unwrap()
            .dequantize(&Device::Cpu)
            .unwrap()
            .to_vec2::<f32>()
            .unwrap();
        let rows = model.rows(name).unwrap();
        assert_eq!(rows.dims(), (whole.len(), whole[0].len()), "{name}");
        let mut row = vec![0f32; whole[0].len()];
        for (r, want) in whole.iter().enumerate() {
            rows.row_f32(r, &mut row).unwrap();
            assert_eq!(&row, want, "{name} row {r}");
        }
    }
    let table = model.rows("token_embd.weight").unwrap();
    let vocab = table.dims().0 as u32;
    let e = table.gather(&[1, vocab]).unwrap_err().to_string();
    assert!(e.contains(&format!("token id {vocab} is outside")), "{e}");
    // A file emptied after it was opened: the read names the file, tensor and row.
    std::fs::write(&path, b"").unwrap();
    let e = table.gather(&[vocab - 1]).unwrap_err().to_string();
    assert!(
        e.contains("model.gguf") && e.contains("token_embd.weight row"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(folder);
    let _ = std::fs::remove_dir_all(dir);
}
