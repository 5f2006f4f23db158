//! The CREG evaluation-v1.0 suite: records, normative specification and model,
//! generator, independent checker, and the frozen file.

pub mod checker;
pub mod draw;
pub mod frozen;
pub mod generator;
pub mod load;
pub mod model;
pub mod record;
pub mod spec;
pub mod stats;
