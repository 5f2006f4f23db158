//! Benchmark suites: CREG (`creg`) and, later, the Probe diagnostic.

pub mod creg;
