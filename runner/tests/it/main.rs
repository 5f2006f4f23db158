//! Every integration test in one binary: one link of the whole crate instead of one per file.

mod baselines;
mod creg_suite;
mod engine_batching;
mod engine_chat_template;
mod engine_fixture;
mod engine_invariance;
mod engine_parity;
mod engine_reference;
mod probe_abstention;
mod probe_baselines;
mod probe_cli;
mod probe_generator;
mod probe_loader;
mod reliability;
mod report_files;
mod run_creg;
mod run_probe;
mod score_fuzz;
mod score_reports;
