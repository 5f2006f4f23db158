//! The runtime: the scheduler that decides which rows run, the model runner that runs
//! them, the loops between the two, the KV cache, the device and where the time goes.

pub(crate) mod continuous;
pub mod device;
pub(crate) mod engine_core;
mod forced;
pub mod host_memory;
pub mod kv_cache;
pub(crate) mod model_runner;
pub mod phases;
pub(crate) mod rows;
pub(crate) mod scheduler;
pub(crate) mod static_group;
pub(crate) mod workers;
