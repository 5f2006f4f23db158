//! The contents of a Probe run's report files (or of several runs scored together):
//! `scores.json` (the serialised [`RunReport`]; `summary.md` and `scores.csv` are the
//! report's, in `crate::report`), built
//! from the core and PIT reports of each system and the paired comparisons between
//! systems. Pure, like the rest of `scoring`: the run writes the files.

use crate::provenance::SetProvenance;
use crate::score::compare::Comparison;
use crate::score::matching::{ABSTENTION_VERSION, ALIAS_VERSION};
use crate::score::pit_report::PitReport;
use crate::score::report::ProbeReport;
use serde::Serialize;

/// One system's results: the core report where the run asked core items, the PIT
/// report where it asked PIT queries.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SystemReport {
    pub system: String,
    pub probe: Option<ProbeReport>,
    pub pit: Option<PitReport>,
    /// Questions of a started (item, seed) with no journaled answer, scored as empty
    /// answers (an unfinished run, or shards not all merged).
    pub unanswered: usize,
}

/// Everything the report files hold.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunReport {
    pub title: String,
    /// Which set was run: the published validated set, the generated set, a user's file.
    pub set: Option<SetProvenance>,
    pub alias_version: &'static str,
    pub abstention_version: &'static str,
    pub systems: Vec<SystemReport>,
    /// The first system against each other one, on the core items both answered.
    pub comparisons: Vec<Comparison>,
    /// How full the engine kept its decode batch, as the run folder recorded it
    /// (summary.md only: scores.json holds scores).
    #[serde(skip)]
    pub batch_utilization: Option<String>,
}

impl RunReport {
    pub fn new(title: &str, systems: Vec<SystemReport>, comparisons: Vec<Comparison>) -> Self {
        RunReport {
            title: title.to_string(),
            set: None,
            alias_version: ALIAS_VERSION,
            abstention_version: ABSTENTION_VERSION,
            systems,
            comparisons,
            batch_utilization: None,
        }
    }

    /// The report with the run's batch utilization line (see `batch_utilization`).
    pub fn with_batch_utilization(mut self, utilization: Option<String>) -> Self {
        self.batch_utilization = utilization;
        self
    }

    /// The report with the set it describes.
    pub fn with_set(mut self, set: SetProvenance) -> Self {
        self.set = Some(set);
        self
    }
}
