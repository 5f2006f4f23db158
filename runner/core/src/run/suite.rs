//! A suite as the rest of the runner sees it: a name the command line and a run's
//! manifest record, the workload a run asks for, and the way back from that manifest to
//! the workload. The suites are listed once, in a [`Registry`] the binary builds;
//! nothing in this crate names one, and the binary names none but in that list.

use crate::plan::Shard;
use crate::run::{RunError, Workload};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// What a run asks of its suite, as the command line gives it. The suite plans its
/// workload from the fields that apply to it and refuses the ones that do not.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlanRequest {
    /// `--condition` as given; `None`: the suite's default.
    pub conditions: Option<Vec<String>>,
    /// `--tasks` as given; `None`: the suite's default.
    pub tasks: Option<Vec<String>>,
    pub seeds: Vec<u64>,
    /// `--limit`: the first N scenarios (or items) of every regime (or domain).
    pub limit: Option<usize>,
    pub shard: Option<Shard>,
    /// `--suite-file`: a file of the suite's in place of its frozen one.
    pub suite_file: Option<PathBuf>,
    pub max_new_tokens: usize,
}

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
    /// The workload a new run asks for.
    fn plan(&self, request: &PlanRequest) -> Result<Box<dyn Workload>, RunError>;
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

    /// The suites' names, as `--suite` takes them.
    pub fn names(&self) -> Vec<&'static str> {
        self.suites.iter().map(|s| s.name()).collect()
    }

    /// The suite `--suite NAME` asks for.
    pub fn named(&self, name: &str) -> Result<&'static dyn Suite, RunError> {
        self.suites
            .iter()
            .copied()
            .find(|s| s.name() == name)
            .ok_or_else(|| {
                RunError::Setup(format!(
                    "--suite {name:?}: no such suite (known: {})",
                    self.names().join(", ")
                ))
            })
    }

    /// The workload a new run of suite `name` asks for: how the binary builds every
    /// run's workload.
    pub fn plan(&self, name: &str, request: &PlanRequest) -> Result<Box<dyn Workload>, RunError> {
        self.named(name)?.plan(request)
    }

    /// The suite a manifest identity is of.
    pub fn of_identity(&self, identity: &Value) -> Result<&'static dyn Suite, RunError> {
        self.suites
            .iter()
            .copied()
            .find(|s| s.recognises(identity))
            .ok_or_else(|| {
                let recorded = identity.pointer("/suite/name").and_then(Value::as_str);
                RunError::Setup(format!(
                    "suite {recorded:?} is none this runner knows ({})",
                    self.names().join(", ")
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
