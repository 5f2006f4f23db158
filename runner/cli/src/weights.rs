//! `--dtype` and `--quantization`: the format a model's weights are loaded in, shared by
//! every command that loads a model.

use clap::Args;
use runner_engine::candle::weights::{DTypeChoice, LoadOptions, Quantization};

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
}

impl WeightArgs {
    pub fn options(&self) -> LoadOptions {
        LoadOptions {
            dtype: self.dtype,
            quantization: self.quantization,
            ..Default::default()
        }
    }
}
