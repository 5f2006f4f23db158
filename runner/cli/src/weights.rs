//! `--dtype`, `--quantization` and `--kv-cache`: the formats a model's weights and its
//! key/value cache are held in, shared by every command that loads a model.

use clap::Args;
use runner_engine::candle::weights::{DTypeChoice, KvCacheFormat, LoadOptions, Quantization};

#[derive(Args, Debug, Clone)]
pub struct WeightArgs {
    /// The weights' float format: auto (the checkpoint's own on the CPU, bf16 on a
    /// GPU), f32 or bf16. The CPU computes in f32 whatever the weights are held in.
    #[arg(long, default_value = "auto")]
    pub dtype: DTypeChoice,
    /// Quantize the weights at load, on the CPU: q8_0 (about half of bf16's memory) or
    /// q4k (about a quarter). Part of the run's identity.
    #[arg(long)]
    pub quantization: Option<Quantization>,
    /// The CPU's key/value cache: auto (the activations' f32) or f16, which halves its
    /// memory and the bytes each decode step reads, rounding keys and values as
    /// llama.cpp's default cache does. Part of the run's identity.
    #[arg(long, default_value = "auto")]
    pub kv_cache: KvCacheFormat,
}

impl WeightArgs {
    pub fn options(&self) -> LoadOptions {
        LoadOptions {
            dtype: self.dtype,
            quantization: self.quantization,
            kv_cache: self.kv_cache,
            ..Default::default()
        }
    }
}
