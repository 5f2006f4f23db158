//! The Probe diagnostic as one unit: multi-hop contradiction propagation in
//! conversational memory, from its items to its prompts, plan, baselines, scorer,
//! reports and the workload that hands them to the run loop.
//!
//! `probe.json` (168 items) crosses hop depth, contradicted edge, update/correction,
//! density and confidence over three domains; `probe_pit.json` (8 items, 24 queries)
//! asks what was true at an earlier reference time. See `README.md` in this folder for
//! the generator's design decisions.

pub mod baseline;
pub mod chains;
pub mod checker;
pub mod generator;
pub mod load;
pub mod place;
pub mod plan;
pub mod provenance;
pub mod record;
pub mod render;
pub mod replay;
pub mod report;
pub mod response;
pub mod score;
pub mod set;
mod wording;
pub mod workload;

pub use workload::{ProbeSuite, SUITE};
