//! Token choice: the next token of every row from a step's logits, with randomness that
//! belongs to the sample alone, read in place on the CPU and in blocks from a device.

pub(crate) mod nucleus;
pub(crate) mod readback;
pub mod sampler;
pub mod step;

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
