//! The integration tests of `tests/it` in one binary: one link of the whole crate instead
//! of one per file. The served tests (`tests/served`) and the tests on real checkpoints
//! (`tests/real`) are targets of their own, which `cargo test` leaves out.

mod architecture;
mod baselines;
mod bench_cli;
#[path = "../support/cgroup.rs"]
mod cgroup;
mod common;
mod creg_suite;
mod engine_batching;
mod engine_chat_template;
mod engine_continuous;
mod engine_fixture;
mod engine_forced;
mod engine_invariance;
mod engine_memory;
mod engine_parity;
mod engine_reference;
mod engine_tokenizer;
mod first_hour;
mod gguf_hostile;
mod hf_conventions;
mod hostile_mirror;
mod hostile_models;
mod http_stub;
mod integrity_round4;
mod interrupt_drain;
mod journal_format;
mod pins;
mod probe_abstention;
mod probe_baselines;
mod probe_cli;
mod probe_generator;
mod probe_loader;
mod reliability;
mod reliability_bounds;
mod reliability_edges;
mod reliability_files;
mod reliability_inputs;
mod report_files;
mod run_creg;
mod run_journal;
mod run_probe;
mod score_fuzz;
mod score_reports;
mod score_round5;
mod served_endpoints;
mod served_threads;

use runner_engine::candle::load::hub::ModelFiles;
use runner_engine::candle::weights::{DTypeChoice, LoadOptions};
use runner_engine::candle::Engine;

/// Where the engine tests run, from CREG_TEST_DEVICE (scripts/gpu-check sets it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TestDevice {
    /// The CPU as the runner loads there (the checkpoint's own format, f32 activations).
    Cpu,
    /// CUDA device 0: bf16 throughout, matmuls through cuBLAS (not batch-invariant).
    Cuda,
    /// The CPU, with the weights loaded as the GPU would (bf16) and the GPU's branch of
    /// every assertion, so CI without a GPU exercises that branch.
    Rehearse,
}

fn test_device_kind() -> TestDevice {
    match std::env::var("CREG_TEST_DEVICE").as_deref() {
        Ok("cpu") | Err(_) => TestDevice::Cpu,
        Ok("cuda") => TestDevice::Cuda,
        Ok("rehearse") => TestDevice::Rehearse,
        Ok(other) => panic!("CREG_TEST_DEVICE={other:?}: expected cpu, cuda or rehearse"),
    }
}

/// The device the engine tests run on: the CPU, or CUDA under CREG_TEST_DEVICE=cuda.
pub fn test_device() -> candle_core::Device {
    match test_device_kind() {
        TestDevice::Cpu | TestDevice::Rehearse => candle_core::Device::Cpu,
        TestDevice::Cuda => {
            candle_core::Device::new_cuda(0).expect("CREG_TEST_DEVICE=cuda: no CUDA device")
        }
    }
}

/// Whether tests must assert what holds on a GPU (cuda, rehearse): within bf16's
/// resolution and without batch invariance, rather than the CPU's bit identity.
pub fn gpu_like() -> bool {
    test_device_kind() != TestDevice::Cpu
}

/// How the engine tests load a model: the runner's default (bf16 on a GPU), and bf16
/// weights when rehearsing the GPU on the CPU.
pub fn test_load_options() -> LoadOptions {
    match test_device_kind() {
        TestDevice::Cpu | TestDevice::Cuda => LoadOptions::default(),
        TestDevice::Rehearse => LoadOptions {
            dtype: DTypeChoice::Bf16,
            quantization: None,
            ..Default::default()
        },
    }
}

/// The engine for `files` on the test device, loaded with `test_load_options()`.
pub fn load_test_engine(files: &ModelFiles, label: &str) -> Engine {
    Engine::load_with(files, test_device(), label, test_load_options()).unwrap()
}
