//! The evaluation core: what every suite's run shares, and nothing of any one suite.
//!
//! A run ([`run::execute`]) takes a suite's [`run::Workload`] through a backend into the
//! [`journal`], scores each sample as it arrives and writes the reports at the end;
//! [`suite::Registry`] finds a journaled run's suite again. The statistics
//! ([`stats`]) and the report kit ([`report`]) are the pieces each suite's report is
//! built from.

pub mod baseline;
pub mod bench_table;
pub mod contract;
pub mod extract;
pub mod facets;
pub mod fsutil;
pub mod journal;
pub mod json_strings;
pub mod plan;
pub mod protocol;
pub mod report;
pub mod run;
pub mod stats;
pub mod strict;

pub use run::suite;
