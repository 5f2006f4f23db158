//! Token choice: the next token of every row from a step's logits, with randomness that
//! belongs to the sample alone, read in place on the CPU and in blocks from a device.

pub(crate) mod nucleus;
pub(crate) mod readback;
pub mod sampler;
pub mod step;
