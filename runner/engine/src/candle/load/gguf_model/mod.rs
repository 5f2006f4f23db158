//! `Engine::load` for a GGUF file: the config from its metadata, the weights in their
//! stored blocks, the memory check from the blocks' bytes.

use crate::candle::gguf::{backend::GgufBackend, config, GgufHeader};
use crate::candle::layers::Weights;
use crate::candle::load::encoder::PromptEncoder;
use crate::candle::load::hub::ModelFiles;
use crate::candle::load::memory::{MemoryNeed, MIN_CONTEXT};
use crate::candle::load::{available_bytes, check_token_ids, read_json, ConfigHead};
use crate::candle::models as registry;
use crate::candle::weights::{DTypeChoice, LoadOptions, WeightFormat};
use crate::candle::Engine;
use crate::EngineError;
use candle_core::{DType, Device};
use std::path::Path;
use std::sync::Arc;

impl Engine {
    pub(crate) fn load_gguf(
        files: &ModelFiles,
        path: &Path,
        device: Device,
        label: &str,
        options: LoadOptions,
    ) -> Result<Engine, EngineError> {
        refuse_conversions(path, options)?;
        // The blocks' products take and give f32, on the CPU and on a GPU.
        let dtype = DType::F32;
        let header = GgufHeader::read(path)?;
        let meta = config::Metadata::new(path, &header.content.metadata);
        let bad = |message: String| bad_file(path, message);
        let read = FileConfig::read(path, &header, &meta)?;
        let shape = read.config.shape();
        shape
            .check()
            .map_err(|m| bad(format!("metadata as a config: {m}")))?;
        let encoder = PromptEncoder::load(files)?;
        let eos = end_tokens(&meta, files, encoder.end_tokens())?;
        check_token_ids(&encoder, &eos, shape.vocab, files)?;
        let kv_elems = read.config.kv_values_per_token();
        let kv_dtype = options.kv_cache.dtype(dtype);
        let on_cpu = device.is_cpu();
        let blocks = header.tensor_bytes();
        // On the CPU the projections are held as q8_0 panels or as copies of their
        // blocks, and a tied head is made from the table, whose rows are otherwise
        // read from the file; the tensors are read one at a time, the largest twice
        // over while it is converted. On a GPU every tensor is held as stored.
        let (panels, replaced) = header.q8_panels();
        let need = MemoryNeed {
            weights: if on_cpu {
                blocks - replaced - read.table_blocks
                    + panels
                    + if read.tied { read.head_bytes } else { 0 }
            } else {
                blocks
            },
            load_peak: 2 * header.largest_tensor_bytes(),
            kv_row: (kv_elems * MIN_CONTEXT * kv_dtype.size_in_bytes()) as u64,
        };
        if let Some(available) = available_bytes(&device) {
            need.check(available, WeightFormat::Gguf, super::memory_place(&device))?;
        }
        // Projections of most block types are held as q8_0 panels by the CPU's
        // kernels (gguf::held_as_q8_panels): the label says so.
        let as_panels = on_cpu && !options.rehearse_gpu;
        let types = types_label(&header, as_panels);
        let model = Arc::new(header.load(&device)?);
        let weights = Weights {
            format: WeightFormat::Gguf,
            stored: dtype,
            checkpoint: None,
            gguf: Some(model.clone()),
            kernels: super::kernels_for(options, &device),
        };
        let vb = candle_nn::VarBuilder::from_backend(
            Box::new(GgufBackend(model)),
            dtype,
            device.clone(),
        );
        let model = read
            .config
            .load(vb, &read.arch.tensors, &weights)
            .map_err(|e| bad(e.to_string()))?;
        Ok(Engine::assemble(
            model,
            kv_elems * kv_dtype.size_in_bytes(),
            encoder,
            eos,
            format!(
                "{label} on {} (gguf weights: {types}; f32 activations{})",
                super::place(options, &device),
                super::kv_cache_label(kv_dtype, dtype),
            ),
            (device, dtype, WeightFormat::Gguf, kv_dtype),
        ))
    }
}

/// A GGUF file's weights are used as stored: a quantization or a bf16 load is refused.
fn refuse_conversions(path: &Path, options: LoadOptions) -> Result<(), EngineError> {
    if options.quantization.is_some() {
        return Err(EngineError::Model(format!(
            "{}: a GGUF file's weights are already in blocks; --quantization applies to \
             safetensors checkpoints",
            path.display()
        )));
    }
    if options.dtype == DTypeChoice::Bf16 {
        return Err(EngineError::Model(format!(
            "{}: a GGUF model computes in f32 (--dtype auto or f32)",
            path.display()
        )));
    }
    Ok(())
}

fn bad_file(path: &Path, message: String) -> EngineError {
    EngineError::BadFile {
        what: "GGUF model",
        path: path.to_path_buf(),
        message,
    }
}

/// What the file's metadata says the model is: its config as an architecture of the
/// engine reads it, whether the output head is the embedding table, and that table's
/// bytes.
struct FileConfig {
    config: Box<dyn registry::ModelConfig>,
    arch: &'static registry::Architecture,
    tied: bool,
    /// The table's blocks, and the bytes a head made from it takes on the CPU.
    table_blocks: u64,
    head_bytes: u64,
}

impl FileConfig {
    fn read(
        path: &Path,
        header: &GgufHeader,
        meta: &config::Metadata,
    ) -> Result<FileConfig, EngineError> {
        let bad = |message: String| bad_file(path, message);
        let arch_name = header.architecture()?;
        let embed = header
            .content
            .tensor_infos
            .get("token_embd.weight")
            .ok_or_else(|| bad("no tensor token_embd.weight (the embedding table)".into()))?;
        let vocab = embed.shape.dims().first().copied().unwrap_or(0);
        let tied = !header.content.tensor_infos.contains_key("output.weight");
        let mut value = config::hf_config(meta, &arch_name, vocab, tied)?;
        if arch_name == "llama" && header.content.tensor_infos.contains_key(ROPE_FREQS) {
            value["rope_scaling"] = llama3_scaling(path, header, &value).map_err(bad)?;
        }
        let model_type = value["model_type"].as_str().unwrap_or_default();
        let arch = registry::by_model_type(model_type)
            .ok_or_else(|| bad(format!("no engine architecture for {model_type}")))?;
        let config = (arch.parse)(&value.to_string())
            .map_err(|m| bad(format!("metadata as a config: {m}")))?;
        let n = embed.shape.elem_count();
        let table_blocks =
            (n / embed.ggml_dtype.block_size() * embed.ggml_dtype.type_size()) as u64;
        let head_bytes = match crate::candle::gguf::held_as_q8_panels(embed.ggml_dtype) {
            true => (n as u64).div_ceil(32) * 34,
            false => table_blocks,
        };
        Ok(FileConfig {
            config,
            arch,
            tied,
            table_blocks,
            head_bytes,
        })
    }
}

/// The `rope_scaling` entry Llama 3.1's `rope_freqs.weight` stands for, checked against
/// every divisor (`config::llama3_rope_scaling`).
fn llama3_scaling(
    path: &Path,
    header: &GgufHeader,
    value: &serde_json::Value,
) -> Result<serde_json::Value, String> {
    let divisors = rope_divisors(path, header)?;
    let heads = value["num_attention_heads"].as_u64().unwrap_or(1).max(1);
    let head_dim = value["head_dim"]
        .as_u64()
        .unwrap_or(value["hidden_size"].as_u64().unwrap_or(0) / heads);
    let theta = value["rope_theta"].as_f64().unwrap_or(10_000.0);
    config::llama3_rope_scaling(&divisors, head_dim as usize, theta)
        .map_err(|m| format!("tensor {ROPE_FREQS}: {m}"))
}

/// The file's tensor types with their counts, those the CPU holds as q8_0 panels marked
/// when `as_panels`.
fn types_label(header: &GgufHeader, as_panels: bool) -> String {
    let slow = header.types_as_q8_panels();
    let types: Vec<String> = header
        .tensor_types()
        .iter()
        .map(|(t, n)| match as_panels && slow.contains(t) {
            true => format!("{n} {t} (as q8_0 panels)"),
            false => format!("{n} {t}"),
        })
        .collect();
    types.join(", ")
}

/// Llama 3's per-frequency RoPE divisors, as llama.cpp's converter stores them.
const ROPE_FREQS: &str = "rope_freqs.weight";

fn rope_divisors(path: &Path, header: &GgufHeader) -> Result<Vec<f32>, String> {
    let mut file = std::fs::File::open(path).map_err(|e| format!("reading {ROPE_FREQS}: {e}"))?;
    header
        .content
        .tensor(&mut file, ROPE_FREQS, &Device::Cpu)
        .and_then(|t| t.dequantize(&Device::Cpu))
        .and_then(|t| t.flatten_all())
        .and_then(|t| t.to_vec1::<f32>())
        .map_err(|e| format!("tensor {ROPE_FREQS}: {e}"))
}

/// The tokens that end a sequence: the metadata's end-of-sequence and end-of-turn ids,
/// the control tokens that close a chat turn (`turn`, from the tokenizer's metadata), and
/// those of a generation_config.json beside the file.
fn end_tokens(
    meta: &config::Metadata,
    files: &ModelFiles,
    turn: &[u32],
) -> Result<Vec<u32>, EngineError> {
    let mut eos = turn.to_vec();
    for key in [
        "tokenizer.ggml.eos_token_id",
        "tokenizer.ggml.eot_token_id",
        "tokenizer.ggml.eom_token_id",
    ] {
        eos.extend(meta.token_ids(key)?);
    }
    if let Some(g) = &files.generation_config {
        let gen: ConfigHead = read_json(g, "generation config")?;
        eos.extend(gen.eos_token_id.map(|t| t.ids()).unwrap_or_default());
    }
    eos.sort_unstable();
    eos.dedup();
    if eos.is_empty() {
        return Err(EngineError::BadFile {
            what: "GGUF metadata",
            path: files.config.clone(),
            message: "key tokenizer.ggml.eos_token_id is missing: no token ends a sequence".into(),
        });
    }
    Ok(eos)
}

#[cfg(test)]
mod tests;
