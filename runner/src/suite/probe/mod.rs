//! The Probe diagnostic: multi-hop contradiction propagation in conversational memory.
//!
//! `probe.json` (168 items) crosses hop depth, contradicted edge, update/correction,
//! density and confidence over three domains; `probe_pit.json` (8 items, 24 queries)
//! asks what was true at an earlier reference time. See `README.md` in this folder for
//! the generator's design decisions.

pub mod chains;
pub mod checker;
pub mod generator;
pub mod loader;
pub mod provenance;
pub mod records;
pub mod replay;
pub mod response;
pub mod set;
mod wording;
