//! creg-runner: regenerate and check the CREG evaluation-v1.0 suite, render its prompts,
//! decode them with local models, and score the answers against the normative reference.
//!
//! Data flows one way: suite -> render -> plan -> engine -> journal -> score -> report.
//! Each stage is a module that knows the stage before it only through its output types.

pub mod alloc_count;
pub mod batch;
pub mod bench;
pub mod digest;
pub mod engine;
pub mod finish;
pub mod fsutil;
pub mod id;
pub mod journal;
pub mod plan;
pub mod render;
pub mod run;
pub mod score;
pub mod strict;
pub mod suite;
