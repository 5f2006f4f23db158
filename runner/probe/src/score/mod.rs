//! Scoring per the proposed Probe scoring: normalised answer matching with aliases,
//! abstention credit, outcome classes, and the aggregated reports. Everything here is
//! pure: no I/O, and no model text can make it panic.

pub mod abstention;
pub mod assertion;
pub mod claim;
pub mod compare;
pub mod files;
pub mod intervals;
pub mod matching;
pub mod normalize;
pub mod outcome;
pub mod pit_report;
pub mod report;
pub mod responses;

pub use compare::{compare_probe, Comparison};
pub use files::{RunReport, SystemReport};
pub use matching::{Answer, ABSTENTION_VERSION, ALIAS_VERSION};
pub use outcome::{score_pit_query, score_probe_item, ItemScore, Outcome, ProbeResponse};
pub use pit_report::{score_pit, PitReport, PitResponse};
pub use report::{score_probe, ProbeReport};
