//! Statistics every suite's report shares.

pub mod bootstrap;
