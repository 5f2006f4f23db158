//! Every integration test in one binary: one link of the whole crate instead of one per file.

mod architecture;
mod baselines;
mod bench_cli;
mod common;
mod creg_suite;
mod engine_batching;
mod engine_chat_template;
mod engine_continuous;
mod engine_fixture;
mod engine_invariance;
mod engine_memory;
mod engine_parity;
mod engine_reference;
mod engine_tokenizer;
mod probe_abstention;
mod probe_baselines;
mod probe_cli;
mod probe_generator;
mod probe_loader;
mod reliability;
mod report_files;
mod run_creg;
mod run_journal;
mod run_probe;
mod score_fuzz;
mod score_reports;

/// The device the engine tests run on: the CPU, or CUDA when CREG_TEST_DEVICE=cuda
/// (scripts/gpu-check sets it), so the same tests check the GPU path.
pub fn test_device() -> candle_core::Device {
    match std::env::var("CREG_TEST_DEVICE").as_deref() {
        Ok("cuda") => {
            candle_core::Device::new_cuda(0).expect("CREG_TEST_DEVICE=cuda: no CUDA device")
        }
        Ok("cpu") | Err(_) => candle_core::Device::Cpu,
        Ok(other) => panic!("CREG_TEST_DEVICE={other:?}: expected cpu or cuda"),
    }
}
