//! Kernels for f32 on the CPU. `layers` calls into here when every tensor of an op is
//! f32 on the CPU and takes candle's ops everywhere else, so that nothing here is
//! needed for (or tested against) other devices.

pub(crate) mod row_matmul;

pub mod attention;
pub mod kernels;
pub mod vectorised;

pub use kernels::{gated, rms_norm, split_rotate};
pub use vectorised::GatedAct;
