//! Reading a suite file (ours or the original published JSONL) with errors that name
//! the file, the line and the field, and never panic on user data.

use crate::record::*;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum LoadError {
    #[error("{file}: cannot read: {cause}")]
    Io {
        file: PathBuf,
        cause: std::io::Error,
    },
    #[error("{file}:{line}: not UTF-8 text (byte {byte} of the file); save the file as UTF-8")]
    NotUtf8 {
        file: PathBuf,
        line: usize,
        byte: usize,
    },
    #[error(
        "{file}:{line}: scenario `{id}` is given twice (first on line {first}); each scenario once"
    )]
    Duplicate {
        file: PathBuf,
        line: usize,
        first: usize,
        id: String,
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
    /// Over [`MAX_SUITE_BYTES`], or not a regular file (`/dev/zero`, a FIFO).
    #[error(transparent)]
    Bounded(#[from] runner_engine::bounded::BoundedReadError),
}

/// The largest suite file read: 28 times the frozen suite's 2.3 MB. A bigger file is
/// not a CREG suite, and reading a device such as `/dev/zero` would not end.
pub const MAX_SUITE_BYTES: u64 = 64 << 20;

/// Reads a JSONL suite from disk.
pub fn load_file(path: &Path) -> Result<Vec<Scenario>, LoadError> {
    load_file_hashed(path).map(|(suite, _)| suite)
}

/// Reads a JSONL suite from disk, with the SHA-256 of the bytes read (a run's request
/// ids are keyed on it).
pub fn load_file_hashed(path: &Path) -> Result<(Vec<Scenario>, String), LoadError> {
    use runner_engine::bounded::{read_regular, BoundedReadError};
    let bytes = read_regular(path, MAX_SUITE_BYTES, "a suite file").map_err(|e| match e {
        BoundedReadError::Io { path, source } => LoadError::Io {
            file: path,
            cause: source,
        },
        other => LoadError::Bounded(other),
    })?;
    let text = std::str::from_utf8(&bytes).map_err(|e| LoadError::NotUtf8 {
        file: path.to_path_buf(),
        line: runner_core::strict::line_at(&bytes, e.valid_up_to()),
        byte: e.valid_up_to() + 1,
    })?;
    Ok((
        parse_jsonl(path, text)?,
        runner_engine::digest::sha256_hex(&bytes),
    ))
}

/// Parses JSONL text; `file` is only used in messages. Blank lines are skipped, and so
/// is a leading byte-order mark. Fields the record does not define are errors whatever
/// their value (a misspelled optional field would otherwise read as absent), and so is a
/// scenario id given twice.
pub fn parse_jsonl(file: &Path, text: &str) -> Result<Vec<Scenario>, LoadError> {
    let text = runner_core::strict::text_without_bom(text);
    let mut scenarios = Vec::new();
    let mut lines_of: std::collections::HashMap<ScenarioId, usize> =
        std::collections::HashMap::new();
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
        let written: serde_json::Value =
            serde_json::from_str(raw).map_err(|e| err("(record)".into(), e.to_string()))?;
        let read_back =
            serde_json::to_value(&scenario).map_err(|e| err("(record)".into(), e.to_string()))?;
        if let Some(unknown) = runner_core::strict::first_unknown::<Scenario>(&written, &read_back)
        {
            return Err(err(unknown.path.clone(), unknown.message()));
        }
        validate(&scenario).map_err(|(field, message)| err(field, message))?;
        if let Some(&first) = lines_of.get(&scenario.id) {
            return Err(LoadError::Duplicate {
                file: file.to_path_buf(),
                line,
                first,
                id: scenario.id.to_string(),
            });
        }
        lines_of.insert(scenario.id.clone(), line);
        scenarios.push(scenario);
    }
    if scenarios.is_empty() {
        return Err(LoadError::Empty {
            file: file.to_path_buf(),
        });
    }
    Ok(scenarios)
}

/// What is wrong with a record: the offending field path and the problem.
type Invalid = (String, String);

/// Checks that every id a record uses refers to something in it, and that times and
/// probabilities are in range. Returns the offending field path and what is wrong.
pub fn validate(s: &Scenario) -> Result<(), (String, String)> {
    let agents: BTreeSet<&AgentId> = s.agents.iter().map(|a| &a.id).collect();
    let objects: BTreeSet<&ObjectId> = s.objects.iter().map(|o| &o.id).collect();
    let evidence: BTreeSet<&EvidenceId> = s.observations.iter().map(|o| &o.id).collect();
    if evidence.len() != s.observations.len() {
        return Err(("observations".into(), "two observations share an id".into()));
    }
    for (i, a) in s.agents.iter().enumerate() {
        in_unit(
            format!("agents[{i}].metadata.reliability"),
            a.metadata.reliability,
            0.5,
        )?;
    }
    for (i, r) in s.relations.iter().enumerate() {
        validate_relation(i, r, &objects)?;
    }
    for (i, o) in s.observations.iter().enumerate() {
        validate_observation(i, o, &agents, &objects, &evidence)?;
    }
    for (k, step) in s.evaluation.belief_trajectory.iter().enumerate() {
        validate_step(k, step, &evidence)?;
    }
    if s.evaluation.belief_trajectory.is_empty() {
        return Err((
            "evaluation.belief_trajectory".into(),
            "holds no step (step 0, the prior, is required)".into(),
        ));
    }
    Ok(())
}

/// `v` is in [lo, 1].
fn in_unit(field: String, v: f64, lo: f64) -> Result<(), Invalid> {
    if (lo..=1.0).contains(&v) {
        Ok(())
    } else {
        Err((field, format!("{v} is outside [{lo}, 1]")))
    }
}

/// Every id in `ids` names an observation of the record.
fn known_ids(
    evidence: &BTreeSet<&EvidenceId>,
    field: String,
    ids: &[EvidenceId],
) -> Result<(), Invalid> {
    for (j, id) in ids.iter().enumerate() {
        if !evidence.contains(id) {
            return Err((format!("{field}[{j}]"), format!("no observation {id}")));
        }
    }
    Ok(())
}

fn validate_relation(i: usize, r: &Relation, objects: &BTreeSet<&ObjectId>) -> Result<(), Invalid> {
    for (name, id) in [("source_id", &r.source_id), ("target_id", &r.target_id)] {
        if !objects.contains(id) {
            return Err((format!("relations[{i}].{name}"), format!("no object {id}")));
        }
    }
    in_unit(format!("relations[{i}].confidence"), r.confidence, 0.0)
}

fn validate_observation(
    i: usize,
    o: &Observation,
    agents: &BTreeSet<&AgentId>,
    objects: &BTreeSet<&ObjectId>,
    evidence: &BTreeSet<&EvidenceId>,
) -> Result<(), Invalid> {
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
    Ok(())
}

/// Every evidence id a stored step cites, and its beliefs' distributions.
fn validate_step(
    k: usize,
    step: &TrajectoryStep,
    evidence: &BTreeSet<&EvidenceId>,
) -> Result<(), Invalid> {
    let at = |f: &str| format!("evaluation.belief_trajectory[{k}].{f}");
    let known = |field, ids: &[EvidenceId]| known_ids(evidence, field, ids);
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
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frozen::FROZEN_JSONL;

    fn first_lines(n: usize) -> Vec<String> {
        FROZEN_JSONL.lines().take(n).map(String::from).collect()
    }

    #[test]
    fn a_misspelled_optional_field_is_an_error_naming_line_field_and_nearest_name() {
        let mut lines = first_lines(3);
        assert!(lines[1].contains("\"stale_evidence_ids\""));
        lines[1] = lines[1].replacen("\"stale_evidence_ids\"", "\"stale_evidence_idz\"", 1);
        let err = parse_jsonl(Path::new("s.jsonl"), &lines.join("\n"))
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("s.jsonl:2: field `evaluation.belief_trajectory[0].stale_evidence_idz`: unknown field, did you mean `stale_evidence_ids`?"), "{err}");
    }

    #[test]
    fn a_misspelled_field_holding_null_is_an_error_and_a_known_null_is_not() {
        let mut lines = first_lines(2);
        assert!(lines[1].contains("\"counterfactual_pair_id\":null"));
        let known = lines.join("\n");
        assert_eq!(parse_jsonl(Path::new("s.jsonl"), &known).unwrap().len(), 2);
        lines[1] = lines[1].replacen(
            "\"counterfactual_pair_id\":null",
            "\"counterfactual_pair_idz\":null",
            1,
        );
        let err = parse_jsonl(Path::new("s.jsonl"), &lines.join("\n"))
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("s.jsonl:2: field `metadata.counterfactual_pair_idz`: unknown field, did you mean `counterfactual_pair_id`?"), "{err}");
    }

    #[test]
    fn a_leading_byte_order_mark_is_read_past() {
        let text = format!("\u{feff}{}", first_lines(2).join("\n"));
        assert_eq!(parse_jsonl(Path::new("s.jsonl"), &text).unwrap().len(), 2);
    }

    #[test]
    fn a_scenario_given_twice_names_both_lines() {
        let mut lines = first_lines(3);
        lines.push(lines[1].clone());
        let err = parse_jsonl(Path::new("s.jsonl"), &lines.join("\n"))
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("s.jsonl:4: scenario `"), "{err}");
        assert!(err.contains("given twice (first on line 2)"), "{err}");
    }

    #[test]
    fn a_bad_utf8_byte_is_reported_with_its_line() {
        let dir = std::env::temp_dir().join(format!("creg-load-utf8-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.jsonl");
        let mut bytes = first_lines(2).join("\n").into_bytes();
        bytes.extend_from_slice(b"\n{\"id\": \"\xff\"}\n");
        std::fs::write(&path, &bytes).unwrap();
        let err = load_file(&path).unwrap_err().to_string();
        assert!(err.contains("s.jsonl:3: not UTF-8 text"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
