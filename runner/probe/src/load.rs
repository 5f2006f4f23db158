//! Reading `probe.json` and `probe_pit.json`.
//!
//! The file is parsed in two steps so that a bad item is reported with its own id:
//! first the whole array as untyped JSON (syntax errors, truncation), then each element
//! into its record with `serde_path_to_error` (missing fields, wrong types, bad values).

use crate::record::{PitItem, ProbeItem};
use runner_core::strict;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::path::Path;

#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{file}: cannot read: {source}")]
    Io {
        file: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{file}: not valid JSON (line {line}, column {column}): {message}")]
    Syntax {
        file: String,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{file}: the top level must be a JSON array of items")]
    NotAnArray { file: String },
    #[error("{file}:{line}: item {item}, field `{field}`: {message}")]
    Unknown {
        file: String,
        line: usize,
        item: String,
        field: String,
        message: String,
    },
    #[error("{file}:{line}: item {id}, field `{field}`: given twice (first on line {first}); each item once")]
    Duplicate {
        file: String,
        line: usize,
        first: usize,
        id: String,
        field: String,
    },
    #[error("{file}: item {item}, field `{field}`: {message}")]
    Item {
        file: String,
        /// The item's id where it has a readable one, else `#index`.
        item: String,
        /// Path of the offending field inside the item, e.g. `oracle_facts[2][0].confidence`.
        field: String,
        message: String,
    },
    /// Over [`MAX_FILE_BYTES`], or not a regular file (`/dev/zero`, a FIFO).
    #[error(transparent)]
    Bounded(#[from] runner_engine::bounded::BoundedReadError),
}

/// The largest Probe file read: a bigger one is not a Probe set, and reading a device
/// such as `/dev/zero` would not end.
pub const MAX_FILE_BYTES: u64 = 64 << 20;

/// Which of the two published files a JSON array holds, judged by its first item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    Probe,
    Pit,
}

/// A loaded file of either kind.
#[derive(Debug, Clone)]
pub enum ProbeFile {
    Probe(Vec<ProbeItem>),
    Pit(Vec<PitItem>),
}

pub fn load_probe(path: &Path) -> Result<Vec<ProbeItem>, LoadError> {
    let name = path.display().to_string();
    parse_items(&read(path)?, &name, "probe_id")
}

pub fn load_pit(path: &Path) -> Result<Vec<PitItem>, LoadError> {
    let name = path.display().to_string();
    parse_items(&read(path)?, &name, "pit_id")
}

/// Load a file of either kind; a file with no items is read as `probe.json`.
pub fn load_any(path: &Path) -> Result<ProbeFile, LoadError> {
    let name = path.display().to_string();
    let bytes = read(path)?;
    parse_any(&bytes, &name)
}

pub fn parse_any(bytes: &[u8], file: &str) -> Result<ProbeFile, LoadError> {
    let bytes = strict::without_bom(bytes);
    let values = parse_array(bytes, file)?;
    let is_pit = values
        .first()
        .and_then(|v| v.as_object())
        .is_some_and(|o| o.contains_key("pit_id") && !o.contains_key("probe_id"));
    if is_pit {
        typed(values, bytes, file, "pit_id").map(ProbeFile::Pit)
    } else {
        typed(values, bytes, file, "probe_id").map(ProbeFile::Probe)
    }
}

pub fn parse_probe(bytes: &[u8], file: &str) -> Result<Vec<ProbeItem>, LoadError> {
    parse_items(bytes, file, "probe_id")
}

pub fn parse_pit(bytes: &[u8], file: &str) -> Result<Vec<PitItem>, LoadError> {
    parse_items(bytes, file, "pit_id")
}

/// The bytes of a Probe file: a regular file, at most [`MAX_FILE_BYTES`].
pub fn read(path: &Path) -> Result<Vec<u8>, LoadError> {
    use runner_engine::bounded::{read_regular, BoundedReadError};
    read_regular(path, MAX_FILE_BYTES, "a Probe file").map_err(|e| match e {
        BoundedReadError::Io { path, source } => LoadError::Io {
            file: path.display().to_string(),
            source,
        },
        other => LoadError::Bounded(other),
    })
}

fn parse_items<T: DeserializeOwned + Serialize>(
    bytes: &[u8],
    file: &str,
    id_field: &str,
) -> Result<Vec<T>, LoadError> {
    let bytes = strict::without_bom(bytes);
    typed(parse_array(bytes, file)?, bytes, file, id_field)
}

fn parse_array(bytes: &[u8], file: &str) -> Result<Vec<serde_json::Value>, LoadError> {
    let value: serde_json::Value =
        serde_json::from_slice(bytes).map_err(|e| LoadError::Syntax {
            file: file.to_string(),
            line: e.line(),
            column: e.column(),
            message: e.to_string(),
        })?;
    match value {
        serde_json::Value::Array(items) => Ok(items),
        _ => Err(LoadError::NotAnArray {
            file: file.to_string(),
        }),
    }
}

/// Each item into its record: fields the record does not define are errors (with the
/// nearest known name), and so is an item id given twice.
fn typed<T: DeserializeOwned + Serialize>(
    values: Vec<serde_json::Value>,
    bytes: &[u8],
    file: &str,
    id_field: &str,
) -> Result<Vec<T>, LoadError> {
    let starts = strict::item_offsets(bytes);
    let line_of_item = |index: usize| {
        starts
            .get(index)
            .map_or(0, |&at| strict::line_at(bytes, at))
    };
    let mut first_line: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    for (index, value) in values.iter().enumerate() {
        if let Some(id) = value.get(id_field).and_then(|v| v.as_str()) {
            let line = line_of_item(index);
            if let Some(&first) = first_line.get(id) {
                return Err(LoadError::Duplicate {
                    file: file.to_string(),
                    line,
                    first,
                    id: id.to_string(),
                    field: id_field.to_string(),
                });
            }
            first_line.insert(id.to_string(), line);
        }
    }
    values
        .into_iter()
        .enumerate()
        .map(|(index, value)| {
            let record: T = typed_one(&value, file, id_field, index)?;
            let read_back = serde_json::to_value(&record).unwrap_or(serde_json::Value::Null);
            if let Some(unknown) = strict::first_unknown::<T>(&value, &read_back) {
                let key = unknown.path.rsplit(['.', ']']).next().unwrap_or_default();
                let from = starts.get(index).copied().unwrap_or(0);
                return Err(LoadError::Unknown {
                    file: file.to_string(),
                    line: strict::line_of_key(bytes, from, key).unwrap_or(line_of_item(index)),
                    item: item_name(&value, id_field, index),
                    message: unknown.message(),
                    field: unknown.path,
                });
            }
            Ok(record)
        })
        .collect()
}

fn item_name(value: &serde_json::Value, id_field: &str, index: usize) -> String {
    value
        .get(id_field)
        .and_then(|v| v.as_str())
        .map_or_else(|| format!("#{index}"), str::to_string)
}

fn typed_one<T: DeserializeOwned>(
    value: &serde_json::Value,
    file: &str,
    id_field: &str,
    index: usize,
) -> Result<T, LoadError> {
    let value = value.clone();
    let item = item_name(&value, id_field, index);
    serde_path_to_error::deserialize(value).map_err(|err| {
        let path = match err.path().to_string() {
            // The item itself has the wrong shape (not an object).
            p if p == "." => "<item>".to_string(),
            p => p,
        };
        let message = err.into_inner().to_string();
        LoadError::Item {
            file: file.to_string(),
            item,
            // A missing field is reported by serde at the parent's path, so the
            // field's own name is taken from the message to point at it.
            field: missing_field(&message)
                .map(|f| join_path(&path, f))
                .unwrap_or(path),
            message,
        }
    })
}

fn missing_field(message: &str) -> Option<&str> {
    let rest = message.strip_prefix("missing field `")?;
    rest.split('`').next()
}

fn join_path(parent: &str, field: &str) -> String {
    if parent == "<item>" || parent.is_empty() {
        field.to_string()
    } else {
        format!("{parent}.{field}")
    }
}
