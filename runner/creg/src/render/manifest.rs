//! The prompt files (`<task>/<condition>.jsonl`) and the manifest that names them with
//! their counts and SHA-256, next to the hashes of every template and contract.

use crate::record::Scenario;
use crate::render::graph::SHUFFLE_SEED;
use crate::render::{templates, Condition, Prompt, Renderer, Task};
use runner_engine::digest::sha256_hex;
use serde::Serialize;

/// Bumped whenever a renderer or template changes what a prompt says.
pub const PROMPTS_VERSION: &str = "creg-prompts-v1";

/// One prompt file, rendered in memory.
pub struct RenderedFile {
    pub condition: Condition,
    pub task: Task,
    pub count: usize,
    pub jsonl: String,
}

impl RenderedFile {
    pub fn path(&self) -> String {
        format!("{}/{}.jsonl", self.task, self.condition)
    }

    pub fn entry(&self) -> FileEntry {
        FileEntry {
            path: self.path(),
            condition: self.condition,
            task: self.task,
            count: self.count,
            sha256: sha256_hex(self.jsonl.as_bytes()),
        }
    }
}

/// Every prompt of `task` in condition `c`, one JSON object per line, scenarios in
/// suite order and steps ascending.
pub fn render_file(r: &Renderer, suite: &[Scenario], c: Condition, task: Task) -> RenderedFile {
    let mut jsonl = String::new();
    let mut count = 0;
    for s in suite {
        r.prompts(s, c, task, &mut |p: Prompt| {
            jsonl.push_str(&serde_json::to_string(&p).expect("a prompt serializes"));
            jsonl.push('\n');
            count += 1;
        });
    }
    RenderedFile {
        condition: c,
        task,
        count,
        jsonl,
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FileEntry {
    pub path: String,
    pub condition: Condition,
    pub task: Task,
    pub count: usize,
    pub sha256: String,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TemplateEntry {
    pub path: &'static str,
    pub version: u32,
    pub sha256: String,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Manifest {
    pub prompts_version: &'static str,
    pub suite_sha256: String,
    pub shuffle_seed: u64,
    pub templates: Vec<TemplateEntry>,
    pub files: Vec<FileEntry>,
    pub total_prompts: usize,
    /// SHA-256 of the `sha256  path` lines of every template and file, in order.
    pub bundle_sha256: String,
}

/// `files` are listed by task, then condition, whatever order they were rendered in,
/// so that the bundle hash names the set of files.
pub fn manifest(r: &Renderer, mut files: Vec<FileEntry>) -> Manifest {
    files.sort_by_key(|f| (f.task, f.condition));
    let templates: Vec<TemplateEntry> = templates::ALL
        .iter()
        .map(|f| TemplateEntry {
            path: f.path,
            version: f.version,
            sha256: f.sha256(),
        })
        .collect();
    let lines: String = templates
        .iter()
        .map(|t| format!("{}  {}\n", t.sha256, t.path))
        .chain(files.iter().map(|f| format!("{}  {}\n", f.sha256, f.path)))
        .collect();
    Manifest {
        prompts_version: PROMPTS_VERSION,
        suite_sha256: r.suite_sha256().to_string(),
        shuffle_seed: SHUFFLE_SEED,
        templates,
        total_prompts: files.iter().map(|f| f.count).sum(),
        files,
        bundle_sha256: sha256_hex(lines.as_bytes()),
    }
}

/// SHA-256 of the `sha256  path` lines of every template and contract: one hash that
/// changes whenever any prompt text or answer contract does (the run manifest's).
pub fn templates_sha256() -> String {
    let lines: String = templates::ALL
        .iter()
        .map(|f| format!("{}  {}\n", f.sha256(), f.path))
        .collect();
    sha256_hex(lines.as_bytes())
}
