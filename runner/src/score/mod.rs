//! The embedded scorer: parse an answer against its contract, score it against the
//! reference, aggregate with confidence intervals, and write reports.
//!
//! Scoring is pure: `score_*` functions take a sample and its reference and do no I/O;
//! streaming and aggregation sit around them.

pub mod aggregate;
pub mod bootstrap;
pub mod contract;
pub mod extract;
pub mod metrics;
pub mod probe;
pub mod reference;
pub mod report;
pub mod sample;
