//! Kernels for f32 on the CPU. `layers` calls into here when every tensor of an op is
//! f32 on the CPU and takes candle's ops everywhere else, so that nothing here is
//! needed for (or tested against) other devices. The linear layers' products take
//! packed weights (`packed`), f32 or bf16.

pub mod attention;
pub mod kernels;
pub mod packed;
pub mod quantized;
pub mod vectorised;

pub use kernels::{gated, rms_norm, split_rotate};
pub use vectorised::GatedAct;
