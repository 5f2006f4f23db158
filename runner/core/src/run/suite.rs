//! A suite as the rest of the runner sees it: a name a run's manifest records, and the
//! way back from that manifest to the suite's workload. The suites are listed once, in
//! a [`Registry`] the binary builds; nothing in this crate names one.

use crate::run::{RunError, Workload};
use serde_json::Value;
use std::path::Path;

/// One suite: CREG, the Probe diagnostic, or any other crate that implements it.
pub trait Suite: Sync {
    /// The suite's name as the command line and reports spell it.
    fn name(&self) -> &'static str;
    /// Whether a run whose manifest identity is `identity` is of this suite (a suite
    /// may record several set names, e.g. one per published set).
    fn recognises(&self, identity: &Value) -> bool;
    /// The workload a journaled run was planned with, rebuilt from its manifest
    /// identity over `suite_file` where the run used one.
    fn rebuild(
        &self,
        identity: &Value,
        suite_file: Option<&Path>,
    ) -> Result<Box<dyn Workload>, RunError>;
}

/// Every suite the runner knows, in the order `--help` lists them.
pub struct Registry {
    suites: &'static [&'static dyn Suite],
}

impl Registry {
    pub const fn new(suites: &'static [&'static dyn Suite]) -> Registry {
        Registry { suites }
    }

    pub fn suites(&self) -> &'static [&'static dyn Suite] {
        self.suites
    }

    /// The suite a manifest identity is of.
    pub fn of_identity(&self, identity: &Value) -> Result<&'static dyn Suite, RunError> {
        self.suites
            .iter()
            .copied()
            .find(|s| s.recognises(identity))
            .ok_or_else(|| {
                let recorded = identity.pointer("/suite/name").and_then(Value::as_str);
                let known: Vec<&str> = self.suites.iter().map(|s| s.name()).collect();
                RunError::Setup(format!(
                    "suite {recorded:?} is none this runner knows ({})",
                    known.join(", ")
                ))
            })
    }

    /// The workload a journaled run was planned with, rebuilt from its manifest.
    pub fn rebuild(
        &self,
        identity: &Value,
        suite_file: Option<&Path>,
    ) -> Result<Box<dyn Workload>, RunError> {
        self.of_identity(identity)?.rebuild(identity, suite_file)
    }
}
