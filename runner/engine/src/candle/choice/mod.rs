//! Token choice: the next token of every row from a step's logits, with randomness that
//! belongs to the sample alone, read in place on the CPU and in blocks from a device.

pub(crate) mod nucleus;
pub(crate) mod readback;
pub mod sampler;
pub mod step;

use candle_core::{Result, Tensor};

/// Row `r` of a (rows, vocab) tensor of logits, read to the host. Only the row crosses:
/// candle's `to_vec1` of a view copies the view's whole buffer from a device first (at
/// 432 rows of Qwen2.5's vocabulary, 263 MB for one row), so the row is copied on the
/// device into a buffer of its own, then read.
pub(crate) fn host_row(logits: &Tensor, r: usize) -> Result<Vec<f32>> {
    row_alone(logits, r)?.to_vec1()
}

/// Row `r` in a buffer that holds nothing else.
fn row_alone(logits: &Tensor, r: usize) -> Result<Tensor> {
    logits.get(r)?.force_contiguous()
}

/// Host-side time and traffic of token choice, summed over steps (for `runner bench`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ChoiceStats {
    /// Seconds waiting for logits (or greedy ids) to reach the host, including the wait
    /// for the step's kernels to finish on an asynchronous device.
    pub transfer_s: f64,
    /// Seconds in the sampler on the host.
    pub sampler_s: f64,
    /// Transfers from the device and the bytes they moved (none on the CPU, where the
    /// logits are read in place).
    pub transfers: usize,
    pub transfer_bytes: usize,
    pub steps: usize,
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Storage};

    #[test]
    fn a_row_read_back_holds_that_row_and_nothing_else() -> Result<()> {
        let (rows, vocab) = (6, 50);
        let data: Vec<f32> = (0..rows * vocab).map(|i| i as f32).collect();
        let logits = Tensor::from_vec(data, (rows, vocab), &Device::Cpu)?;
        let row = row_alone(&logits, 4)?;
        let (storage, layout) = row.storage_and_layout();
        let Storage::Cpu(cpu) = &*storage else {
            panic!("a CPU tensor")
        };
        // The buffer a device would send whole is the row's own.
        assert_eq!(cpu.as_slice::<f32>()?.len(), vocab);
        assert_eq!(layout.start_offset(), 0);
        drop(storage);
        let want: Vec<f32> = (4 * vocab..5 * vocab).map(|i| i as f32).collect();
        assert_eq!(host_row(&logits, 4)?, want);
        Ok(())
    }
}
