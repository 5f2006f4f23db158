//! The CREG evaluation-v1.0 suite as one unit: records, normative specification and
//! model, generator, independent checker and the frozen file; the prompts of its nine
//! representation conditions, the plan, the baseline systems, the scorer, the reports,
//! and the workload that hands them to the run loop.

pub mod baseline;
pub mod baseline_run;
// The benchmark harnesses, a tool of the binary (the `tools` feature).
#[cfg(any(test, feature = "tools"))]
pub mod bench;
pub mod checker;
pub mod draw;
pub mod frozen;
pub mod generator;
pub mod load;
pub mod model;
pub mod place;
pub mod plan;
pub mod record;
pub mod render;
pub mod report;
pub mod score;
pub mod smoke;
pub mod spec;
pub mod stats;
pub mod workload;

pub use workload::{CregSuite, SUITE};
