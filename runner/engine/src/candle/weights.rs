//! The format the linear layers' weights are held in: the checkpoint's own float
//! format, another one asked for, or a quantization made at load. It is part of a
//! model's identity: a run in q8_0 is not the run in bf16.

use crate::EngineError;
use candle_core::{DType, Device};

/// How the weights of the linear layers are held in memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WeightFormat {
    F32,
    Bf16,
    /// 8-bit blocks of 32 with an f16 scale (GGML's q8_0).
    Q8_0,
    /// 4-bit super-blocks of 256 (GGML's q4_K).
    Q4K,
    /// The blocks a GGUF file stores, each tensor in its own type.
    Gguf,
}

impl WeightFormat {
    /// The name in manifests, reports and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            WeightFormat::F32 => "f32",
            WeightFormat::Bf16 => "bf16",
            WeightFormat::Q8_0 => "q8_0",
            WeightFormat::Q4K => "q4k",
            WeightFormat::Gguf => "gguf",
        }
    }

    /// Bytes one weight takes, scales included (0 for a GGUF file's, which vary by
    /// tensor: no format the runner converts to is smaller).
    pub fn bytes_per_weight(self) -> f64 {
        match self {
            WeightFormat::F32 => 4.0,
            WeightFormat::Bf16 => 2.0,
            WeightFormat::Q8_0 => 34.0 / 32.0,
            WeightFormat::Q4K => 144.0 / 256.0,
            WeightFormat::Gguf => 0.0,
        }
    }

    /// Inputs per block the format quantizes together (1: not quantized).
    pub fn block(self) -> usize {
        match self {
            WeightFormat::F32 | WeightFormat::Bf16 | WeightFormat::Gguf => 1,
            WeightFormat::Q8_0 => 32,
            WeightFormat::Q4K => 256,
        }
    }

    pub fn is_quantized(self) -> bool {
        self.block() > 1
    }
}

impl std::fmt::Display for WeightFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// `--dtype`: the float format of the weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DTypeChoice {
    /// The checkpoint's own on the CPU; bf16 on a GPU.
    #[default]
    Auto,
    F32,
    Bf16,
}

impl std::str::FromStr for DTypeChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(DTypeChoice::Auto),
            "f32" | "float32" => Ok(DTypeChoice::F32),
            "bf16" | "bfloat16" => Ok(DTypeChoice::Bf16),
            _ => Err(format!("unknown dtype {s:?} (auto, f32, bf16)")),
        }
    }
}

/// `--quantization`: weights quantized at load from the pinned safetensors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quantization {
    Q8_0,
    Q4K,
}

impl std::str::FromStr for Quantization {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "q8_0" => Ok(Quantization::Q8_0),
            "q4k" | "q4_k" => Ok(Quantization::Q4K),
            _ => Err(format!("unknown quantization {s:?} (q8_0, q4k)")),
        }
    }
}

/// `--kv-cache`: what the CPU's key/value cache holds keys and values in. f16 halves
/// the bytes a decode step reads from it (a long prompt's attention reads the whole
/// cache at every step), and rounds every key and value to f16 as llama.cpp's default
/// cache does; the attention still computes in f32.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum KvCacheFormat {
    /// The activations' own dtype.
    #[default]
    Auto,
    F16,
}

impl KvCacheFormat {
    /// The dtype the cache holds for activations in `activations`.
    pub fn dtype(self, activations: DType) -> DType {
        match self {
            KvCacheFormat::Auto => activations,
            KvCacheFormat::F16 => DType::F16,
        }
    }
}

impl std::str::FromStr for KvCacheFormat {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(KvCacheFormat::Auto),
            "f16" | "float16" => Ok(KvCacheFormat::F16),
            _ => Err(format!("unknown key/value cache format {s:?} (auto, f16)")),
        }
    }
}

/// How to load a model's weights.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LoadOptions {
    pub dtype: DTypeChoice,
    pub quantization: Option<Quantization>,
    pub kv_cache: KvCacheFormat,
    /// Test hook: load as for a GPU (its dtypes, its kernel set of candle's ops) on
    /// whatever device this is, so that the CPU runs the CUDA path's code.
    pub rehearse_gpu: bool,
}

impl LoadOptions {
    /// The activations' dtype and the weights' format on `device`, for a checkpoint
    /// stored as `stored`.
    pub fn resolve(
        self,
        device: &Device,
        stored: DType,
    ) -> Result<(DType, WeightFormat), EngineError> {
        if !device.is_cpu() || self.rehearse_gpu {
            if let Some(q) = self.quantization {
                return Err(EngineError::Model(format!(
                    "--quantization {} runs on the CPU only; on a GPU the weights load as bf16 (--dtype bf16) or f32",
                    match q {
                        Quantization::Q8_0 => "q8_0",
                        Quantization::Q4K => "q4k",
                    }
                )));
            }
            if self.kv_cache == KvCacheFormat::F16 {
                return Err(EngineError::Model(
                    "--kv-cache f16 runs on the CPU only; on a GPU the cache holds the activations' dtype (bf16 by default)".into(),
                ));
            }
            return Ok(match self.dtype {
                DTypeChoice::F32 => (DType::F32, WeightFormat::F32),
                DTypeChoice::Auto | DTypeChoice::Bf16 => (DType::BF16, WeightFormat::Bf16),
            });
        }
        // The CPU computes in f32 whatever the weights' format: the packed and the
        // quantized products accumulate in f32 (cpu/packed.rs).
        let format = match (self.quantization, self.dtype) {
            (Some(Quantization::Q8_0), _) => WeightFormat::Q8_0,
            (Some(Quantization::Q4K), _) => WeightFormat::Q4K,
            (None, DTypeChoice::F32) => WeightFormat::F32,
            (None, DTypeChoice::Bf16) => WeightFormat::Bf16,
            (None, DTypeChoice::Auto) if stored == DType::F32 => WeightFormat::F32,
            (None, DTypeChoice::Auto) => WeightFormat::Bf16,
        };
        Ok((DType::F32, format))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cpu_default_is_the_checkpoints_own_format() {
        let cpu = Device::Cpu;
        let auto = LoadOptions::default();
        assert_eq!(
            auto.resolve(&cpu, DType::BF16).unwrap(),
            (DType::F32, WeightFormat::Bf16)
        );
        assert_eq!(
            auto.resolve(&cpu, DType::F16).unwrap(),
            (DType::F32, WeightFormat::Bf16)
        );
        assert_eq!(
            auto.resolve(&cpu, DType::F32).unwrap(),
            (DType::F32, WeightFormat::F32)
        );
        let q = LoadOptions {
            dtype: DTypeChoice::F32,
            quantization: Some(Quantization::Q8_0),
            ..Default::default()
        };
        assert_eq!(q.resolve(&cpu, DType::BF16).unwrap().1, WeightFormat::Q8_0);
        let f32 = LoadOptions {
            dtype: "f32".parse().unwrap(),
            quantization: None,
            ..Default::default()
        };
        assert_eq!(f32.resolve(&cpu, DType::BF16).unwrap().1, WeightFormat::F32);
        assert!("f16"
            .parse::<DTypeChoice>()
            .unwrap_err()
            .contains("auto, f32, bf16"));
        assert!("bf16"
            .parse::<KvCacheFormat>()
            .unwrap_err()
            .contains("auto, f16"));
        assert_eq!(KvCacheFormat::F16.dtype(DType::F32), DType::F16);
        assert_eq!(KvCacheFormat::Auto.dtype(DType::F32), DType::F32);
        let on_gpu = LoadOptions {
            kv_cache: KvCacheFormat::F16,
            rehearse_gpu: true,
            ..Default::default()
        };
        let err = on_gpu.resolve(&cpu, DType::BF16).unwrap_err().to_string();
        assert!(err.contains("--kv-cache f16 runs on the CPU only"), "{err}");
        assert!("q4_0"
            .parse::<Quantization>()
            .unwrap_err()
            .contains("q8_0, q4k"));
    }
}
