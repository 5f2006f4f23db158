//! The suites this runner knows, listed once: a journaled run finds its suite here
//! (`runner score`, `runner merge`), and a new suite is one crate and one row below.

use runner_core::suite::{Registry, Suite};

pub static SUITES: Registry = Registry::new(&[&creg::SUITE as &dyn Suite, &probe::SUITE]);
