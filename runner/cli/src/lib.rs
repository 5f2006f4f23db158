//! The suites this runner knows, listed once: `--suite` takes its values from here,
//! `runner run` has the named suite plan the run, and a journaled run finds its suite
//! here (`runner score`, `runner merge`). A new suite adds its row below; the rest it
//! needs (its crate, the architecture test's row) is listed in docs/architecture.md.

use runner_core::suite::{Registry, Suite};

pub static SUITES: Registry = Registry::new(&[&creg::SUITE as &dyn Suite, &probe::SUITE]);
