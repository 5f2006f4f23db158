//! The CREG scorer: parse an answer against its task's contract, score it against the
//! reference, aggregate with confidence intervals.
//!
//! Scoring is pure: `score_*` functions take a sample and its reference and do no I/O;
//! streaming and aggregation sit around them.

pub mod aggregate;
pub mod answered;
pub mod contract;
pub mod metrics;
pub mod reference;
pub mod sample;
