//! Reading a suite file (ours or the original published JSONL) with errors that name
//! the file, the line and the field, and never panic on user data.

use super::record::*;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum LoadError {
    #[error("{file}: cannot read: {source}")]
    Io {
        file: PathBuf,
        source: std::io::Error,
    },
    #[error("{file}:{line}: field `{field}`: {message}")]
    Record {
        file: PathBuf,
        line: usize,
        field: String,
        message: String,
    },
    #[error("{file}: holds no scenario")]
    Empty { file: PathBuf },
}

/// Reads a JSONL suite from disk.
pub fn load_file(path: &Path) -> Result<Vec<Scenario>, LoadError> {
    let text = std::fs::read_to_string(path).map_err(|source| LoadError::Io {
        file: path.to_path_buf(),
        source,
    })?;
    parse_jsonl(path, &text)
}

/// Parses JSONL text; `file` is only used in messages. Blank lines are skipped.
pub fn parse_jsonl(file: &Path, text: &str) -> Result<Vec<Scenario>, LoadError> {
    let mut scenarios = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        if raw.trim().is_empty() {
            continue;
        }
        let err = |field: String, message: String| LoadError::Record {
            file: file.to_path_buf(),
            line,
            field,
            message,
        };
        let mut de = serde_json::Deserializer::from_str(raw);
        let scenario: Scenario = serde_path_to_error::deserialize(&mut de).map_err(|e| {
            let field = e.path().to_string();
            let field = if field == "." {
                "(record)".to_string()
            } else {
                field
            };
            err(field, e.into_inner().to_string())
        })?;
        validate(&scenario).map_err(|(field, message)| err(field, message))?;
        scenarios.push(scenario);
    }
    if scenarios.is_empty() {
        return Err(LoadError::Empty {
            file: file.to_path_buf(),
        });
    }
    Ok(scenarios)
}

/// Checks that every id a record uses refers to something in it, and that times and
/// probabilities are in range. Returns the offending field path and what is wrong.
pub fn validate(s: &Scenario) -> Result<(), (String, String)> {
    let agents: BTreeSet<&AgentId> = s.agents.iter().map(|a| &a.id).collect();
    let objects: BTreeSet<&ObjectId> = s.objects.iter().map(|o| &o.id).collect();
    let evidence: BTreeSet<&EvidenceId> = s.observations.iter().map(|o| &o.id).collect();
    if evidence.len() != s.observations.len() {
        return Err(("observations".into(), "two observations share an id".into()));
    }
    let in_unit = |field: String, v: f64, lo: f64| {
        if (lo..=1.0).contains(&v) {
            Ok(())
        } else {
            Err((field, format!("{v} is outside [{lo}, 1]")))
        }
    };
    for (i, a) in s.agents.iter().enumerate() {
        in_unit(
            format!("agents[{i}].metadata.reliability"),
            a.metadata.reliability,
            0.5,
        )?;
    }
    for (i, r) in s.relations.iter().enumerate() {
        for (name, id) in [("source_id", &r.source_id), ("target_id", &r.target_id)] {
            if !objects.contains(id) {
                return Err((format!("relations[{i}].{name}"), format!("no object {id}")));
            }
        }
        in_unit(format!("relations[{i}].confidence"), r.confidence, 0.0)?;
    }
    for (i, o) in s.observations.iter().enumerate() {
        let at = |f: &str| format!("observations[{i}].{f}");
        if !agents.contains(&o.agent_id) {
            return Err((at("agent_id"), format!("no agent {}", o.agent_id)));
        }
        if !objects.contains(&o.subject_id) {
            return Err((at("subject_id"), format!("no object {}", o.subject_id)));
        }
        in_unit(at("confidence"), o.confidence, 0.5)?;
        if parse_time(&o.timestamp).is_none() {
            return Err((
                at("timestamp"),
                format!("{:?} is not an RFC 3339 time", o.timestamp),
            ));
        }
        if parse_time(&o.metadata.arrival_time).is_none() {
            return Err((
                at("metadata.arrival_time"),
                format!("{:?} is not an RFC 3339 time", o.metadata.arrival_time),
            ));
        }
        for (j, id) in o.metadata.supersedes_evidence_ids.iter().enumerate() {
            if !evidence.contains(id) {
                return Err((
                    at(&format!("metadata.supersedes_evidence_ids[{j}]")),
                    format!("no observation {id}"),
                ));
            }
        }
    }
    let known = |field: String, ids: &[EvidenceId]| {
        for (j, id) in ids.iter().enumerate() {
            if !evidence.contains(id) {
                return Err((format!("{field}[{j}]"), format!("no observation {id}")));
            }
        }
        Ok(())
    };
    for (k, step) in s.evaluation.belief_trajectory.iter().enumerate() {
        let at = |f: &str| format!("evaluation.belief_trajectory[{k}].{f}");
        known(at("new_evidence_ids"), &step.new_evidence_ids)?;
        known(at("active_evidence_ids"), &step.active_evidence_ids)?;
        known(at("stale_evidence_ids"), &step.stale_evidence_ids)?;
        known(at("superseded_evidence_ids"), &step.superseded_evidence_ids)?;
        known(at("isolated_evidence_ids"), &step.isolated_evidence_ids)?;
        for (b, belief) in step.reference_beliefs.iter().enumerate() {
            let at = |f: &str| at(&format!("reference_beliefs[{b}].{f}"));
            known(at("supporting_evidence"), &belief.supporting_evidence)?;
            known(at("contradicting_evidence"), &belief.contradicting_evidence)?;
            let d = &belief.reference_distribution;
            in_unit(at("reference_distribution.anomalous"), d.anomalous, 0.0)?;
            in_unit(at("reference_distribution.normal"), d.normal, 0.0)?;
        }
        for (c, record) in step.contradictions.iter().enumerate() {
            let at = |f: &str| at(&format!("contradictions[{c}].{f}"));
            known(at("involved_evidence_ids"), &record.involved_evidence_ids)?;
            known(
                at("superseded_evidence_ids"),
                &record.superseded_evidence_ids,
            )?;
        }
    }
    if s.evaluation.belief_trajectory.is_empty() {
        return Err((
            "evaluation.belief_trajectory".into(),
            "holds no step (step 0, the prior, is required)".into(),
        ));
    }
    Ok(())
}
