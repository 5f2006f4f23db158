//! The CREG benchmark harnesses: the scorer (`runner score --bench`), the suite
//! (`runner suite bench`) and the renderer (`runner render --bench`). Each returns its
//! results as JSON objects, one per measured configuration; `runner_core::bench_table`
//! prints them.

pub mod render;
pub mod score;
pub mod suite;

pub use runner_engine::bench::{median, row};
use runner_engine::EngineError;
use std::path::PathBuf;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum BenchError {
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error("loading the frozen suite: {0}")]
    Suite(#[from] crate::load::LoadError),
    #[error("regenerating the suite: {0}")]
    Generate(#[from] crate::generator::GenerateError),
    #[error("loading the prompt templates: {0}")]
    Template(#[from] crate::render::templates::TemplateError),
    #[error("a baseline's answer: {0}")]
    Baseline(#[from] crate::model::ModelError),
    #[error("writing {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("scenario {scenario}: the scorer has no question {question}")]
    MissingQuestion { scenario: String, question: String },
}
