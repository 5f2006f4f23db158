//! Prompts: the nine representation conditions of the CREG evidence and the four task
//! prompts built around them.
//!
//! A prompt is the task template (`prompts/tasks/`) with three things put in: the
//! shared preamble, the *body* and the arrival step. The body is everything that
//! depends on the condition: the condition's legend (`prompts/legend/`, the
//! serialization's key, with the lines on deleted content dropped) followed by the
//! serialized evidence. It holds only the evidence that has arrived by the step, in
//! arrival order, and is built from [`facts::Facts`], which has no access to the
//! scenario's `evaluation`.
//!
//! # Lengths
//!
//! The published table gives a mean body length per condition. We measure it as the
//! mean number of characters (Unicode scalar values; the bodies are ASCII) of the body
//! over the 1,150 belief prefixes of the frozen suite (every scenario at every arrival
//! step 1..=n; the endpoint tasks reuse the step-n body and are not averaged again).
//! `runner render --stats` prints the figures and the test
//! `tests::mean_body_lengths_match_the_published_table` holds them to 3% of the
//! published means and 0.01 of the published ratios to full_graph.
//!
//! The original renderers are not available, so the layouts were sized against that
//! measurement. The serialized evidence alone is 1.2k (structured list) to 2.4k
//! (full graph) characters on average; the rest of each body is its legend (3.7k to
//! 4.4k: the shared field meanings plus the format's key), whose length per family is
//! what brings each condition to its published mean. The graph ablations differ from
//! full_graph almost only by the deleted records and fields (relations -200,
//! provenance -288, timestamps -204, confidence -56 characters of evidence), plus the
//! legend lines tagged for that content.

pub mod canonical;
pub mod condition;
pub mod facts;
pub mod flat;
pub mod graph;
pub mod layout;
pub mod list;
pub mod manifest;
pub mod pretty;
pub mod question;
pub mod stats;
pub mod task;
pub mod templates;

pub use condition::{Condition, Family};
pub use task::Task;

use crate::record::{Scenario, ScenarioId};
use facts::Facts;
use layout::Layout;
use runner_engine::digest::sha256_hex;
pub use runner_engine::id::RequestId;
use serde::{Deserialize, Serialize};
use templates::{Segment, TemplateError};

/// A request's identity: the SHA-256 of what defines it (suite hash, condition,
/// scenario, arrival step, task). Templates are not part of it; the run manifest
/// records their hashes, so a template change is refused on resume, not silently mixed.
pub fn request_id(
    suite_sha256: &str,
    condition: Condition,
    scenario: &ScenarioId,
    step: usize,
    task: Task,
) -> RequestId {
    RequestId::new(sha256_hex(
        format!("creg-request-v1\n{suite_sha256}\n{condition}\n{scenario}\n{step}\n{task}")
            .as_bytes(),
    ))
}

/// One rendered prompt, as written to the prompt JSONL files.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Prompt {
    pub request_id: RequestId,
    pub scenario: ScenarioId,
    /// The arrival step: how many observations the body shows.
    pub step: usize,
    pub condition: Condition,
    pub task: Task,
    pub text: String,
}

/// The templates, parsed once, and the suite hash request ids are keyed on.
pub struct Renderer {
    suite_sha256: String,
    /// Indexed by [`Condition::index`].
    legends: Vec<String>,
    /// Indexed by [`Task::index`].
    tasks: Vec<Vec<Segment>>,
    preamble: &'static str,
}

impl Renderer {
    pub fn new(suite_sha256: impl Into<String>) -> Result<Renderer, TemplateError> {
        let mut legends = Vec::new();
        for c in Condition::ALL {
            let format = match c.family() {
                Family::Graph => &templates::LEGEND_GRAPH,
                Family::Flat => &templates::LEGEND_FLAT,
                Family::CanonicalJson => &templates::LEGEND_CANONICAL_JSON,
                Family::StructuredList => &templates::LEGEND_STRUCTURED_LIST,
            };
            let mut text = templates::legend(format, c)?;
            text.push('\n');
            text.push_str(&templates::legend(&templates::LEGEND_EVIDENCE, c)?);
            text.push('\n');
            legends.push(text);
        }
        let tasks = Task::ALL
            .into_iter()
            .map(|t| templates::parse_task(t.template()))
            .collect::<Result<_, TemplateError>>()?;
        Ok(Renderer {
            suite_sha256: suite_sha256.into(),
            legends,
            tasks,
            preamble: templates::PREAMBLE.text.trim_end(),
        })
    }

    /// A renderer for the embedded frozen suite.
    pub fn frozen() -> Result<Renderer, TemplateError> {
        Renderer::new(sha256_hex(crate::frozen::FROZEN_JSONL.as_bytes()))
    }

    pub fn suite_sha256(&self) -> &str {
        &self.suite_sha256
    }

    pub fn legend(&self, c: Condition) -> &str {
        &self.legends[c.index()]
    }

    /// The scenario laid out in `c`; cut a prefix's body from it with
    /// [`Layout::render`].
    pub fn layout(&self, s: &Scenario, c: Condition) -> Layout {
        let f = Facts::of(s);
        let legend = self.legend(c);
        match c.family() {
            Family::Graph => graph::layout(&f, c, legend, s.id.as_str()),
            Family::Flat => flat::layout(&f, legend),
            Family::CanonicalJson => canonical::layout(&f, legend),
            Family::StructuredList => list::layout(&f, legend),
        }
    }

    /// The body of scenario `s` at arrival `step` in condition `c`.
    pub fn body(&self, s: &Scenario, c: Condition, step: usize) -> String {
        self.layout(s, c).render(step)
    }

    /// Calls `sink` with every prompt of `task` for scenario `s` in condition `c`.
    pub fn prompts(&self, s: &Scenario, c: Condition, task: Task, sink: &mut impl FnMut(Prompt)) {
        let layout = self.layout(s, c);
        let segments = &self.tasks[task.index()];
        for step in task.steps(s.observations.len()) {
            let mut text = String::with_capacity(12 * 1024);
            for seg in segments {
                match seg {
                    Segment::Literal(l) => text.push_str(l),
                    Segment::Preamble => text.push_str(self.preamble),
                    Segment::Body => layout.render_into(step, &mut text),
                    Segment::Step => text.push_str(&step.to_string()),
                }
            }
            sink(Prompt {
                request_id: request_id(&self.suite_sha256, c, &s.id, step, task),
                scenario: s.id.clone(),
                step,
                condition: c,
                task,
                text,
            });
        }
    }
}

#[cfg(test)]
pub(crate) mod tests;
