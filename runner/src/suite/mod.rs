//! Benchmark suites: CREG (`creg`) and the Probe diagnostic (`probe`).

pub mod creg;
pub mod probe;
