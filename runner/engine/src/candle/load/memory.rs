//! Whether a model fits before it is loaded. A load that outgrows memory is killed by
//! the kernel without a message, minutes in; the sizes are all in the checkpoint's
//! headers, so the answer is known in a second.

use crate::candle::checkpoint::Checkpoint;
use crate::candle::weights::WeightFormat;
use crate::EngineError;
use candle_core::DType;

/// One row of this many tokens must fit beside the weights: the smallest useful run.
pub const MIN_CONTEXT: usize = 4096;

/// What loading a model and running one row takes, in bytes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MemoryNeed {
    /// The weights as held after loading.
    pub weights: u64,
    /// The largest tensor's copies while it is converted (read, widened, packed).
    pub load_peak: u64,
    /// The KV cache of one row of [`MIN_CONTEXT`] tokens.
    pub kv_row: u64,
}

impl MemoryNeed {
    pub fn total(&self) -> u64 {
        self.weights + self.load_peak + self.kv_row
    }

    /// The need of `checkpoint` held as `format`, with activations of `activations`.
    pub fn estimate(
        checkpoint: &Checkpoint,
        format: WeightFormat,
        (activations, kv_cache): (DType, DType),
        kv_values_per_token: usize,
        on_cpu: bool,
    ) -> Self {
        let mut weights = 0f64;
        let mut largest = 0usize;
        let mut embedding = None;
        // A tied output head is a copy of the table in the weights' format.
        let tied = !checkpoint
            .tensors()
            .keys()
            .any(|k| k.ends_with("lm_head.weight"));
        for (name, t) in checkpoint.tensors() {
            let n = t.elements();
            largest = largest.max(n);
            let bytes_each = if t.shape.len() < 2 {
                activations.size_in_bytes() as f64
            } else if name.ends_with("embed_tokens.weight") {
                embedding = Some(n);
                table_bytes(activations, on_cpu)
            } else if format == WeightFormat::Q4K && t.shape[1] % format.block() != 0 {
                // Such a layer falls back to q8_0 (layers::Proj).
                weight_bytes(WeightFormat::Q8_0, activations, on_cpu)
            } else {
                weight_bytes(format, activations, on_cpu)
            };
            weights += n as f64 * bytes_each;
        }
        if let (true, Some(n)) = (tied, embedding) {
            weights += n as f64 * weight_bytes(format, activations, on_cpu);
        }
        // Read in its stored dtype, then its copy in the kept format (quantizing goes
        // through f32 first).
        let stored = checkpoint.stored_dtype().size_in_bytes() as f64;
        let convert = if format.is_quantized() {
            4.0
        } else {
            weight_bytes(format, activations, on_cpu)
        };
        let load_peak = largest as f64 * (stored + convert);
        MemoryNeed {
            weights: weights as u64,
            load_peak: load_peak as u64,
            kv_row: (kv_values_per_token * MIN_CONTEXT * kv_cache.size_in_bytes()) as u64,
        }
    }

    /// Refuses when the need exceeds `available`, with the figures and the ways out.
    pub fn check(
        &self,
        available: u64,
        format: WeightFormat,
        where_: &str,
    ) -> Result<(), EngineError> {
        if self.total() <= available {
            return Ok(());
        }
        let mut ways = Vec::new();
        for smaller in [WeightFormat::Bf16, WeightFormat::Q8_0, WeightFormat::Q4K] {
            if smaller.bytes_per_weight() < format.bytes_per_weight() {
                let flag = match smaller {
                    WeightFormat::Bf16 => "--dtype bf16",
                    WeightFormat::Q8_0 => "--quantization q8_0",
                    _ => "--quantization q4k",
                };
                let scaled =
                    self.weights as f64 * smaller.bytes_per_weight() / format.bytes_per_weight();
                ways.push(format!("{flag} (weights about {})", gb(scaled as u64)));
            }
        }
        let ways = if ways.is_empty() {
            "a machine with more memory".to_string()
        } else {
            ways.join(", or ")
        };
        Err(EngineError::Memory(format!(
            "the model does not fit in {where_}: {} weights take {}, loading peaks {} higher, \
             and one {MIN_CONTEXT}-token row of KV cache takes {}: {} in all, {} available. \
             Try {ways}; a smaller --max-batch or shorter prompts only shrink the KV cache",
            format.name(),
            gb(self.weights),
            gb(self.load_peak),
            gb(self.kv_row),
            gb(self.total()),
            gb(available)
        )))
    }
}

fn weight_bytes(format: WeightFormat, activations: DType, on_cpu: bool) -> f64 {
    if on_cpu {
        format.bytes_per_weight()
    } else {
        activations.size_in_bytes() as f64
    }
}

/// The embedding table stays in the checkpoint's file on the CPU (layers::Embedding).
fn table_bytes(activations: DType, on_cpu: bool) -> f64 {
    if on_cpu {
        0.0
    } else {
        activations.size_in_bytes() as f64
    }
}

/// `12.3 GB`.
pub fn gb(bytes: u64) -> String {
    format!("{:.1} GB", bytes as f64 / 1e9)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_need_over_what_is_available_is_refused_with_the_figures_and_smaller_formats() {
        let need = MemoryNeed {
            weights: 30_500_000_000,
            load_peak: 2_200_000_000,
            kv_row: 230_000_000,
        };
        let err = need
            .check(24_000_000_000, WeightFormat::F32, "memory")
            .unwrap_err()
            .to_string();
        for part in [
            "30.5 GB",
            "2.2 GB",
            "0.2 GB",
            "32.9 GB",
            "24.0 GB",
            "--dtype bf16 (weights about 15.2 GB)",
            "--quantization q8_0 (weights about 8.1 GB)",
            "--max-batch",
        ] {
            assert!(err.contains(part), "{part:?} missing from: {err}");
        }
        assert!(need
            .check(33_000_000_000, WeightFormat::F32, "memory")
            .is_ok());
        let q4 = need
            .check(1_000_000_000, WeightFormat::Q4K, "memory")
            .unwrap_err()
            .to_string();
        assert!(q4.contains("more memory"), "{q4}");
    }
}
