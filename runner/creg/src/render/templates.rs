//! The frozen prompt files under `prompts/`, embedded so the binary is self-contained.
//! Each carries a version (in its file name) and is identified by its SHA-256.
//!
//! Legend files may start a line with `[tag] ` (kept only when the condition shows
//! that content) or `[!tag] ` (kept only when it does not), so an ablation removes a
//! field's explanation together with the field. Task templates use `{{preamble}}`,
//! `{{body}}` and `{{step}}`.

use crate::render::condition::{Condition, Content};
use runner_engine::digest::sha256_hex;
use thiserror::Error;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PromptFile {
    /// Relative to the repository root.
    pub path: &'static str,
    pub version: u32,
    pub text: &'static str,
}

impl PromptFile {
    pub fn sha256(&self) -> String {
        sha256_hex(self.text.as_bytes())
    }
}

macro_rules! prompt_file {
    ($path:literal, $version:literal) => {
        PromptFile {
            path: $path,
            version: $version,
            text: include_str!(concat!("../../../../", $path)),
        }
    };
}

pub const LEGEND_EVIDENCE: PromptFile = prompt_file!("prompts/legend/evidence.v1.txt", 1);
pub const LEGEND_GRAPH: PromptFile = prompt_file!("prompts/legend/graph.v1.txt", 1);
pub const LEGEND_FLAT: PromptFile = prompt_file!("prompts/legend/flat.v1.txt", 1);
pub const LEGEND_CANONICAL_JSON: PromptFile =
    prompt_file!("prompts/legend/canonical_json.v1.txt", 1);
pub const LEGEND_STRUCTURED_LIST: PromptFile =
    prompt_file!("prompts/legend/structured_list.v1.txt", 1);
pub const PREAMBLE: PromptFile = prompt_file!("prompts/tasks/preamble.v1.txt", 1);
pub const TASK_BELIEF: PromptFile = prompt_file!("prompts/tasks/belief.v1.txt", 1);
pub const TASK_CONTRADICTION: PromptFile = prompt_file!("prompts/tasks/contradiction.v1.txt", 1);
pub const TASK_ACTION: PromptFile = prompt_file!("prompts/tasks/action.v1.txt", 1);
pub const TASK_EXPLANATION: PromptFile = prompt_file!("prompts/tasks/explanation.v1.txt", 1);
pub const CONTRACT_BELIEF: PromptFile = prompt_file!("prompts/contracts/belief.v1.schema.json", 1);
pub const CONTRACT_CONTRADICTION: PromptFile =
    prompt_file!("prompts/contracts/contradiction.v1.schema.json", 1);
pub const CONTRACT_ACTION: PromptFile = prompt_file!("prompts/contracts/action.v1.schema.json", 1);
pub const CONTRACT_EXPLANATION: PromptFile =
    prompt_file!("prompts/contracts/explanation.v1.schema.json", 1);

/// Every embedded prompt file, in manifest order.
pub const ALL: [PromptFile; 14] = [
    LEGEND_EVIDENCE,
    LEGEND_GRAPH,
    LEGEND_FLAT,
    LEGEND_CANONICAL_JSON,
    LEGEND_STRUCTURED_LIST,
    PREAMBLE,
    TASK_BELIEF,
    TASK_CONTRADICTION,
    TASK_ACTION,
    TASK_EXPLANATION,
    CONTRACT_BELIEF,
    CONTRACT_CONTRADICTION,
    CONTRACT_ACTION,
    CONTRACT_EXPLANATION,
];

#[derive(Debug, Error)]
pub enum TemplateError {
    #[error("{file}:{line}: unknown legend tag `{tag}`")]
    UnknownTag {
        file: &'static str,
        line: usize,
        tag: String,
    },
    #[error("{file}: unknown placeholder `{{{{{name}}}}}`")]
    UnknownPlaceholder { file: &'static str, name: String },
    #[error("{file}: unclosed placeholder")]
    Unclosed { file: &'static str },
    #[error("{file}: needs exactly one `{{{{body}}}}`, has {count}")]
    Body { file: &'static str, count: usize },
}

/// The legend text of `file` as `condition` shows it.
pub fn legend(file: &PromptFile, condition: Condition) -> Result<String, TemplateError> {
    let mut out = String::with_capacity(file.text.len());
    for (n, line) in file.text.lines().enumerate() {
        let mut text = line;
        let mut keep = true;
        if let Some(rest) = line.strip_prefix('[') {
            if let Some((tag, after)) = rest.split_once("] ") {
                let (negated, name) = match tag.strip_prefix('!') {
                    Some(name) => (true, name),
                    None => (false, tag),
                };
                let content = Content::ALL
                    .into_iter()
                    .find(|c| c.tag() == name)
                    .ok_or_else(|| TemplateError::UnknownTag {
                        file: file.path,
                        line: n + 1,
                        tag: tag.to_string(),
                    })?;
                keep = condition.keeps(content) != negated;
                text = after;
            }
        }
        if keep {
            out.push_str(text);
            out.push('\n');
        }
    }
    Ok(out)
}

/// A piece of a parsed task template.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Segment {
    Literal(&'static str),
    Preamble,
    Body,
    Step,
}

/// Splits a task template at its placeholders.
pub fn parse_task(file: &PromptFile) -> Result<Vec<Segment>, TemplateError> {
    let mut segments = Vec::new();
    let mut rest = file.text;
    while let Some(start) = rest.find("{{") {
        if start > 0 {
            segments.push(Segment::Literal(&rest[..start]));
        }
        let after = &rest[start + 2..];
        let end = after
            .find("}}")
            .ok_or(TemplateError::Unclosed { file: file.path })?;
        segments.push(match &after[..end] {
            "preamble" => Segment::Preamble,
            "body" => Segment::Body,
            "step" => Segment::Step,
            other => {
                return Err(TemplateError::UnknownPlaceholder {
                    file: file.path,
                    name: other.to_string(),
                })
            }
        });
        rest = &after[end + 2..];
    }
    if !rest.is_empty() {
        segments.push(Segment::Literal(rest));
    }
    let count = segments.iter().filter(|s| **s == Segment::Body).count();
    if count != 1 {
        return Err(TemplateError::Body {
            file: file.path,
            count,
        });
    }
    Ok(segments)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_carry_the_version() {
        for f in ALL {
            assert!(
                f.path.contains(&format!(".v{}.", f.version)),
                "{} lacks .v{}.",
                f.path,
                f.version
            );
            assert!(!f.text.is_empty());
        }
    }

    #[test]
    fn every_legend_parses_for_every_condition_and_ablations_drop_lines() {
        for f in [
            LEGEND_EVIDENCE,
            LEGEND_GRAPH,
            LEGEND_FLAT,
            LEGEND_CANONICAL_JSON,
            LEGEND_STRUCTURED_LIST,
        ] {
            for c in Condition::ALL {
                let text = legend(&f, c).unwrap();
                assert!(!text.contains("[!"), "{}: tag left in text", f.path);
            }
        }
        let full = legend(&LEGEND_EVIDENCE, Condition::FullGraph).unwrap();
        let ablated = legend(&LEGEND_EVIDENCE, Condition::NoProvenance).unwrap();
        assert!(ablated.len() < full.len());
    }

    #[test]
    fn unknown_tags_and_placeholders_are_errors() {
        let bad = PromptFile {
            path: "x",
            version: 1,
            text: "[colour] red\n",
        };
        assert!(legend(&bad, Condition::FullGraph).is_err());
        let bad = PromptFile {
            path: "x",
            version: 1,
            text: "{{body}} {{answer}}",
        };
        assert!(parse_task(&bad).is_err());
        let bad = PromptFile {
            path: "x",
            version: 1,
            text: "{{step}}",
        };
        assert!(parse_task(&bad).is_err());
    }

    #[test]
    fn contracts_are_json_objects() {
        for f in [
            CONTRACT_BELIEF,
            CONTRACT_CONTRADICTION,
            CONTRACT_ACTION,
            CONTRACT_EXPLANATION,
        ] {
            let v: serde_json::Value = serde_json::from_str(f.text).unwrap();
            assert_eq!(v["type"], "object", "{}", f.path);
        }
    }
}
