//! The engine's benchmark harnesses: `runner bench` (prefill and decode at several batch
//! sizes, the mixed serving workload) and `runner bench --sampler`. Each returns its
//! results as JSON objects, one per measured configuration; `runner_core::bench_table`
//! prints them. The suites' harnesses (scorer, renderer, suite) sit in their crates.

// It times fixture models of each architecture and size.
#[cfg(feature = "fixture")]
pub mod engine;
pub mod sampler;

use crate::{EngineError, Sampling};
use serde::Serialize;
use serde_json::Value;
use std::path::PathBuf;
use thiserror::Error;

pub use crate::candle::bench::PROTOCOL_SAMPLING;

#[derive(Debug, Error)]
pub enum BenchError {
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error("writing {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A workload that measures nothing (a batch of 0 rows, an empty prompt).
    #[error("{0}")]
    Workload(String),
}

/// Token choice in the timed decode steps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BenchSampling {
    Greedy,
    /// The protocol's temperature and top-p.
    Protocol,
}

impl BenchSampling {
    pub fn name(self) -> &'static str {
        match self {
            BenchSampling::Greedy => "greedy",
            BenchSampling::Protocol => "protocol",
        }
    }

    pub fn sampling(self) -> Sampling {
        match self {
            BenchSampling::Greedy => Sampling::Greedy,
            BenchSampling::Protocol => PROTOCOL_SAMPLING,
        }
    }
}

impl std::str::FromStr for BenchSampling {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "greedy" => Ok(BenchSampling::Greedy),
            "protocol" => Ok(BenchSampling::Protocol),
            other => Err(format!("unknown sampling {other:?} (greedy, protocol)")),
        }
    }
}

/// A result as the JSON object the table and the JSON lines are made from; the struct's
/// field order is the column order.
pub fn row<T: Serialize>(result: &T) -> Value {
    // Plain structs of numbers and strings always serialize.
    serde_json::to_value(result).unwrap_or(Value::Null)
}

/// The median of some timings (the upper one of an even count); 0 for none.
pub fn median(xs: impl Iterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = xs.collect();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// A note for the end of a table: timings of a debug build say little.
pub fn build_note() -> Option<&'static str> {
    cfg!(debug_assertions).then_some("(DEBUG build: use --release for figures that mean something)")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampling_names_round_trip() {
        for s in [BenchSampling::Greedy, BenchSampling::Protocol] {
            assert_eq!(s.name().parse::<BenchSampling>(), Ok(s));
        }
        assert!("nucleus".parse::<BenchSampling>().is_err());
        assert_eq!(BenchSampling::Protocol.sampling(), PROTOCOL_SAMPLING);
    }

    #[test]
    fn the_median_is_the_middle_or_upper_middle() {
        assert_eq!(median([3.0, 1.0, 2.0].into_iter()), 2.0);
        assert_eq!(median([4.0, 1.0, 3.0, 2.0].into_iter()), 3.0);
        assert_eq!(median(std::iter::empty()), 0.0);
    }
}
