//! The runtime: the scheduler that decides which rows run, continuous batching, the
//! engine-owned KV cache, the device and its memory, and where the wall time goes.

pub(crate) mod continuous;
pub mod device;
pub mod kv_cache;
pub mod phases;
pub(crate) mod scheduler;
