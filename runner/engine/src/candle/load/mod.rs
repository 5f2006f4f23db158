//! Loading a model folder: the architecture's row in the registry parses config.json and
//! builds the model; eos ids come from both config files, the tokenizer and chat
//! template from theirs.

pub mod cache;
pub mod download;
pub mod encoder;
pub mod gguf_model;
pub mod gguf_tokenizer;
pub mod hub;
pub mod limits;
pub mod memory;
pub mod open;
pub mod pins;

use crate::candle::checkpoint::Checkpoint;
use crate::candle::layers::kernels::{CpuKernels, GpuKernels, Kernels};
use crate::candle::load::encoder::PromptEncoder;
use crate::candle::load::hub::ModelFiles;
use crate::candle::load::memory::MemoryNeed;
use crate::candle::models as registry;
use crate::candle::runtime::device::{default_row_cap, kv_budget};
use crate::candle::weights::LoadOptions;
use crate::candle::{BatchLimits, Engine};
use crate::EngineError;
use candle_core::Device;
use serde::Deserialize;
use std::path::Path;

/// The fields of a config.json (or generation_config.json) read before its
/// architecture is known: which architecture, and its end tokens.
#[derive(Deserialize)]
pub(crate) struct ConfigHead {
    model_type: Option<String>,
    #[serde(default)]
    pub(crate) eos_token_id: Option<TokenIds>,
}

#[derive(Clone, Deserialize)]
#[serde(untagged)]
pub(crate) enum TokenIds {
    One(u32),
    Many(Vec<u32>),
}

impl TokenIds {
    pub(crate) fn ids(self) -> Vec<u32> {
        match self {
            TokenIds::One(i) => vec![i],
            TokenIds::Many(v) => v,
        }
    }
}

pub(crate) fn read_json<T: serde::de::DeserializeOwned>(
    path: &Path,
    what: &'static str,
) -> Result<T, EngineError> {
    let text = std::fs::read_to_string(path).map_err(|source| EngineError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|e| EngineError::BadFile {
        what,
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

impl Engine {
    /// Loads with the default weight format (the checkpoint's own on the CPU).
    pub fn load(files: &ModelFiles, device: Device, label: &str) -> Result<Engine, EngineError> {
        Self::load_with(files, device, label, LoadOptions::default())
    }

    /// Loads with the weight format `options` ask for, after checking that it fits.
    pub fn load_with(
        files: &ModelFiles,
        device: Device,
        label: &str,
        options: LoadOptions,
    ) -> Result<Engine, EngineError> {
        if let Some(path) = files.gguf() {
            return Self::load_gguf(files, path, device, label, options);
        }
        let checkpoint = Checkpoint::open(&files.weights)?;
        let checkpoint_dtype = checkpoint.stored_dtype();
        let (dtype, format) = options.resolve(&device, checkpoint_dtype)?;
        let head: ConfigHead = read_json(&files.config, "model config")?;
        let eos = declared_end_tokens(files, &head)?;
        let arch = architecture_of(files, &head)?;
        let bad_config = |message| EngineError::BadFile {
            what: "model config",
            path: files.config.clone(),
            message,
        };
        let config = parsed_config(files, arch)?;
        let shape = config.shape();
        shape
            .check()
            .and_then(|()| shape.against(&checkpoint))
            .map_err(bad_config)?;
        let encoder = PromptEncoder::load(files)?;
        check_token_ids(&encoder, &eos, shape.vocab, files)?;
        let kv_elems = config.kv_values_per_token();
        let kv_dtype = options.kv_cache.dtype(dtype);
        let need = MemoryNeed::estimate(
            &checkpoint,
            format,
            (dtype, kv_dtype),
            kv_elems,
            device.is_cpu(),
        );
        if let Some(available) = available_bytes(&device) {
            need.check(available, format, memory_place(&device))?;
        }
        let kernels = kernels_for(options, &device);
        let weights = crate::candle::layers::Weights {
            format,
            stored: checkpoint_dtype,
            checkpoint: kernels.table_from_file().then(|| checkpoint.clone()),
            gguf: None,
            kernels,
        };
        let vb = candle_nn::VarBuilder::from_backend(Box::new(checkpoint), dtype, device.clone());
        let model = config.load(vb, &arch.tensors, &weights)?;
        Ok(Engine::assemble(
            model,
            kv_elems * kv_dtype.size_in_bytes(),
            encoder,
            eos,
            format!(
                "{label} on {} ({format} weights, {} activations{})",
                place(options, &device),
                dtype.as_str(),
                kv_cache_label(kv_dtype, dtype),
            ),
            (device, dtype, format, kv_dtype),
        ))
    }

    /// An engine with the default limits and scheduler around a loaded model.
    pub(crate) fn assemble(
        model: Box<dyn crate::candle::CausalLm>,
        kv_bytes_per_token: usize,
        encoder: PromptEncoder,
        eos: Vec<u32>,
        label: String,
        (device, dtype, format, kv_dtype): (
            Device,
            candle_core::DType,
            crate::candle::weights::WeightFormat,
            candle_core::DType,
        ),
    ) -> Engine {
        let limits = BatchLimits {
            max_rows: default_row_cap(&device),
            kv_budget_bytes: kv_budget(&device),
            ..BatchLimits::default()
        };
        Engine {
            model,
            kv_bytes_per_token,
            simulated_oom_above: None,
            block_reads: false,
            logit_trace: None,
            encoder,
            eos,
            label,
            refill: crate::candle::Refill::default(),
            device,
            dtype,
            kv_dtype,
            weights: format,
            limits,
            batching: crate::candle::Batching::default(),
            batch_stats: Default::default(),
            phase_times: Default::default(),
            activity: Default::default(),
        }
    }
}

/// The end tokens config.json and generation_config.json declare, at least one.
fn declared_end_tokens(files: &ModelFiles, head: &ConfigHead) -> Result<Vec<u32>, EngineError> {
    let mut eos = head
        .eos_token_id
        .clone()
        .map(TokenIds::ids)
        .unwrap_or_default();
    if let Some(g) = &files.generation_config {
        let gen: ConfigHead = read_json(g, "generation config")?;
        eos.extend(gen.eos_token_id.map(TokenIds::ids).unwrap_or_default());
    }
    eos.sort_unstable();
    eos.dedup();
    if eos.is_empty() {
        return Err(EngineError::Model(format!(
            "{} declares no eos_token_id",
            files.config.display()
        )));
    }
    Ok(eos)
}

/// The engine's architecture for config.json's `model_type`, or an error naming those
/// it has.
fn architecture_of(
    files: &ModelFiles,
    head: &ConfigHead,
) -> Result<&'static registry::Architecture, EngineError> {
    let model_type = head.model_type.as_deref().unwrap_or_default();
    registry::by_model_type(model_type).ok_or_else(|| {
        let known: Vec<&str> = registry::ARCHITECTURES
            .iter()
            .flat_map(|a| a.model_types.iter().copied())
            .collect();
        EngineError::Model(format!(
            "architecture {:?} in {} is not supported (model_type: {})",
            head.model_type,
            files.config.display(),
            known.join(", ")
        ))
    })
}

/// config.json as `arch` reads it, after the keys transformers 5 renamed are read back
/// under their classic names.
fn parsed_config(
    files: &ModelFiles,
    arch: &registry::Architecture,
) -> Result<Box<dyn registry::ModelConfig>, EngineError> {
    let text = std::fs::read_to_string(&files.config).map_err(|source| EngineError::Io {
        path: files.config.clone(),
        source,
    })?;
    let bad_config = |message| EngineError::BadFile {
        what: "model config",
        path: files.config.clone(),
        message,
    };
    let mut value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| bad_config(e.to_string()))?;
    registry::hf_config::classic_keys(&mut value).map_err(bad_config)?;
    (arch.parse)(&value.to_string()).map_err(bad_config)
}

/// What the memory check calls the device's memory.
pub(crate) fn memory_place(device: &Device) -> &'static str {
    if device.is_cpu() {
        "memory"
    } else {
        "GPU memory"
    }
}

/// What an engine's description adds for a key/value cache held in another dtype
/// than the activations.
pub(crate) fn kv_cache_label(kv: candle_core::DType, activations: candle_core::DType) -> String {
    match kv == activations {
        true => String::new(),
        false => format!("; {} key/value cache", kv.as_str()),
    }
}

/// The kernel set the layers run on `device`, chosen here once for the whole model:
/// the CPU's on the CPU, the GPU's on a GPU, and the GPU's too where a test rehearses
/// the CUDA path on the CPU. The layers never check a device themselves.
pub(crate) fn kernels_for(options: LoadOptions, device: &Device) -> &'static dyn Kernels {
    if device.is_cpu() && !options.rehearse_gpu {
        &CpuKernels
    } else {
        &GpuKernels
    }
}

/// Where the model runs, as an engine's description says it: the device, and the
/// kernel set where it is not the device's own.
pub(crate) fn place(options: LoadOptions, device: &Device) -> String {
    let name = crate::candle::runtime::device::name(device);
    match options.rehearse_gpu {
        true => format!("{name} with the GPU's kernels"),
        false => name,
    }
}

/// What the device can still take: available memory on the CPU, free memory on a GPU.
pub(crate) fn available_bytes(device: &Device) -> Option<u64> {
    if device.is_cpu() {
        crate::candle::runtime::host_memory::available()
    } else {
        crate::candle::runtime::device::gpu_free(device)
    }
}

/// Refuses token ids the model has no row for: the tokenizer's and the eos ids. Found
/// mid-run they fail a sample with a message about an embedding table; found here they
/// name the file.
pub(crate) fn check_token_ids(
    encoder: &PromptEncoder,
    eos: &[u32],
    vocab_size: usize,
    files: &ModelFiles,
) -> Result<(), EngineError> {
    if let Some((token, id)) = encoder
        .highest_id()
        .filter(|(_, id)| *id as usize >= vocab_size)
    {
        return Err(EngineError::BadFile {
            what: "tokenizer",
            path: files.tokenizer.clone(),
            message: format!(
                "token {token:?} has id {id}, outside the model's vocab_size {vocab_size} \
                 (in {}): the tokenizer is not this model's",
                files.config.display()
            ),
        });
    }
    if let Some(id) = eos.iter().find(|&&id| id as usize >= vocab_size) {
        return Err(EngineError::BadFile {
            what: "model config",
            path: files.config.clone(),
            message: format!("eos_token_id {id} is outside vocab_size {vocab_size}"),
        });
    }
    Ok(())
}
