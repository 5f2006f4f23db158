//! Where a report's figures come from: the runner that wrote it, when, and each run's
//! manifest (suite and spec hashes, model revisions, sampling, seeds, device, dates).

use crate::journal::batches::{self, Invocation};
use crate::journal::failed::{self, Failure};
use runner_engine::batch::UTILIZATION_MEANING;
use serde::Serialize;
use serde_json::Value;
use std::path::Path;

/// The file a combined report's folder holds: the manifests of the runs it combines.
pub const RUNS_FILE: &str = "runs.json";

/// One run behind a report: its label, its manifest's two parts, and how full the
/// backend kept its decode batch in each invocation of the run.
#[derive(Clone, Debug, Serialize)]
pub struct RunSource {
    pub label: String,
    pub identity: Value,
    pub context: Value,
    /// Empty for backends that do not batch and for folders older than the record.
    pub invocations: Vec<Invocation>,
    /// Why the record could not be read, shown instead of the figures.
    pub invocations_error: Option<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct Provenance {
    pub runner_version: &'static str,
    /// When the report was written (UTC, RFC 3339).
    pub written: String,
    pub suite_sha256: Option<String>,
    pub spec_sha256: Option<String>,
    pub runs: Vec<RunSource>,
    /// Samples of the run that could not be had (`failed.jsonl`), not in the figures.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub failed: Vec<Failure>,
    /// Why `failed.jsonl` could not be read, shown in place of its samples.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed_error: Option<String>,
}

impl Provenance {
    pub fn new(suite_sha256: Option<String>, spec_sha256: Option<String>) -> Provenance {
        Provenance {
            runner_version: env!("CARGO_PKG_VERSION"),
            written: chrono::DateTime::<chrono::Utc>::from(std::time::SystemTime::now())
                .to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
            suite_sha256,
            spec_sha256,
            runs: Vec::new(),
            failed: Vec::new(),
            failed_error: None,
        }
    }

    /// Adds the runs whose manifests `dir` holds: its own `manifest.json` (a run
    /// folder) or `runs.json` (a combined report). Missing or unreadable files add
    /// nothing: provenance is shown as far as it is known.
    pub fn with_runs_in(mut self, dir: &Path, label: &str) -> Provenance {
        let read = |name: &str| -> Option<Value> {
            serde_json::from_str(&std::fs::read_to_string(dir.join(name)).ok()?).ok()
        };
        if let Some(m) = read("manifest.json") {
            let (invocations, invocations_error) = read_invocations(dir);
            self.runs.push(RunSource {
                label: label.to_string(),
                identity: m.get("identity").cloned().unwrap_or(Value::Null),
                context: m.get("context").cloned().unwrap_or(Value::Null),
                invocations,
                invocations_error,
            });
            match failed::standing(dir) {
                Ok(f) => self.failed = f,
                Err(e) => self.failed_error = Some(e.to_string()),
            }
        } else if let Some(Value::Array(runs)) = read(RUNS_FILE) {
            for r in runs {
                if let Ok(source) = serde_json::from_value::<RunSourceIn>(r) {
                    self.runs.push(RunSource {
                        label: source.label,
                        identity: source.identity,
                        context: source.context,
                        invocations: source.invocations,
                        invocations_error: source.invocations_error,
                    });
                }
            }
        }
        self
    }

    /// The failed samples grouped by reason, most frequent first (then by reason): each
    /// reason with its samples as (request, seed).
    pub fn failed_by_reason(&self) -> Vec<(&str, Vec<(&str, u64)>)> {
        let mut by: std::collections::BTreeMap<&str, Vec<(&str, u64)>> = Default::default();
        for f in &self.failed {
            by.entry(&f.reason)
                .or_default()
                .push((&f.request_id, f.seed));
        }
        let mut out: Vec<_> = by.into_iter().collect();
        out.sort_by(|a, b| b.1.len().cmp(&a.1.len()).then(a.0.cmp(b.0)));
        out
    }

    /// (field, value) lines, run by run, for the markdown and HTML.
    pub fn lines(&self) -> Vec<(String, String)> {
        let mut out = vec![
            (
                "runner version".to_string(),
                self.runner_version.to_string(),
            ),
            ("report written".to_string(), self.written.clone()),
        ];
        if let Some(s) = &self.suite_sha256 {
            out.push(("suite sha256".into(), s.clone()));
        }
        if let Some(s) = &self.spec_sha256 {
            out.push(("normative spec sha256".into(), s.clone()));
        }
        for r in &self.runs {
            let text = |v: Option<&Value>| match v {
                None | Some(Value::Null) => None,
                Some(Value::String(s)) => Some(s.clone()),
                Some(v) => Some(rounded(v).to_string()),
            };
            let id = |p: &str| text(r.identity.pointer(p));
            let cx = |p: &str| text(r.context.pointer(p));
            let mut parts = Vec::new();
            for (name, v) in [
                ("suite", id("/suite/name")),
                ("suite sha256", id("/suite/sha256")),
                ("spec sha256", id("/suite/spec_sha256")),
                ("model", id("/model/name")),
                ("revision", id("/model/revision")),
                ("dtype", id("/model/dtype")),
                ("weights", id("/model/weights")),
                ("prompts", id("/model/prompt_format")),
                ("runner", id("/runner_version")),
                ("sampling", id("/decoding/sampling")),
                ("max new tokens", id("/decoding/max_new_tokens")),
                ("seeds", id("/plan/seeds")),
                ("conditions", id("/plan/conditions")),
                ("limit per regime", id("/plan/limit_per_regime")),
                ("shard", id("/shard")),
                ("device", cx("/device")),
                ("started", cx("/started")),
            ] {
                if let Some(v) = v {
                    parts.push(format!("{name} {v}"));
                }
            }
            out.push((format!("run {}", r.label), parts.join("; ")));
            if let Some(u) = utilization(&r.invocations, r.invocations_error.as_deref()) {
                out.push((
                    format!("run {} batch utilization ({UTILIZATION_MEANING})", r.label),
                    u,
                ));
            }
            if let Some(note) = served_note(&r.identity) {
                out.push((format!("run {} server", r.label), note));
            }
        }
        out
    }
}

#[derive(serde::Deserialize)]
struct RunSourceIn {
    label: String,
    #[serde(default)]
    identity: Value,
    #[serde(default)]
    context: Value,
    #[serde(default)]
    invocations: Vec<Invocation>,
    #[serde(default)]
    invocations_error: Option<String>,
}

/// A run folder's batch utilization as the reports word it; None where the run
/// recorded no batch figures (served models, baselines, older runs).
pub fn batch_utilization(dir: &Path) -> Option<String> {
    let (invocations, error) = read_invocations(dir);
    utilization(&invocations, error.as_deref())
}

/// A run folder's batch figures, or why they cannot be read (shown in their place).
fn read_invocations(dir: &Path) -> (Vec<Invocation>, Option<String>) {
    match batches::read(dir) {
        Ok(i) => (i, None),
        Err(e) => (Vec::new(), Some(e.to_string())),
    }
}

/// The run's batch utilization: pooled over its invocations (a ratio of sums, not a
/// mean of ratios), then each invocation's when there were several.
fn utilization(invocations: &[Invocation], error: Option<&str>) -> Option<String> {
    if let Some(e) = error {
        return Some(format!("not known: {e}"));
    }
    let pooled = batches::pooled(invocations).describe()?;
    if invocations.len() < 2 {
        return Some(pooled);
    }
    let each: Vec<String> = invocations
        .iter()
        .filter_map(|i| {
            let d = i.stats.describe()?;
            let shard = i.from.as_ref().map_or(String::new(), |o| {
                format!("shard {} invocation {}, ", o.shard, o.invocation)
            });
            Some(format!(
                "invocation {} ({shard}started {}): {d}",
                i.invocation, i.started
            ))
        })
        .collect();
    Some(format!(
        "{pooled}, pooled over {} invocations; {}",
        invocations.len(),
        each.join("; ")
    ))
}

/// `v` with every fraction rounded to six decimals: sampling parameters are stored as
/// f32, whose f64 spelling (0.20000000298023224) says nothing a reader needs.
fn rounded(v: &Value) -> Value {
    match v {
        Value::Number(n) if n.is_f64() => n
            .as_f64()
            .and_then(|f| serde_json::Number::from_f64((f * 1e6).round() / 1e6))
            .map_or_else(|| v.clone(), Value::Number),
        Value::Array(a) => Value::Array(a.iter().map(rounded).collect()),
        Value::Object(o) => Value::Object(o.iter().map(|(k, v)| (k.clone(), rounded(v))).collect()),
        _ => v.clone(),
    }
}

/// The report's line on a served run, from the facts the served engine put in the
/// manifest: how prompts reached the server and whether its samples may depend on the
/// server's batching.
fn served_note(run_identity: &Value) -> Option<String> {
    let m = run_identity.get("model")?;
    if m.get("kind").and_then(Value::as_str) != Some("served") {
        return None;
    }
    let name = m.get("served_model").and_then(Value::as_str).unwrap_or("?");
    let mode = m.get("prompt_mode").and_then(Value::as_str).unwrap_or("?");
    let deterministic = m.get("server_deterministic").and_then(Value::as_bool) == Some(true);
    Some(format!(
        "served model {name}, {mode} mode; {}",
        if deterministic {
            "the server was declared batch-invariant (--server-deterministic)"
        } else {
            "the server was not declared batch-invariant: samples may depend on the server's \
             batching, so resumed or repeated samples may differ"
        }
    ))
}

#[cfg(test)]
mod tests {
    use super::{rounded, served_note};
    use serde_json::json;

    #[test]
    fn the_report_says_when_samples_may_depend_on_batching() {
        let served = |d: bool| {
            json!({"model": {"kind": "served", "served_model": "m", "prompt_mode": "chat",
                             "server_deterministic": d}})
        };
        assert!(served_note(&served(false))
            .unwrap()
            .contains("may depend on the server's batching"));
        assert!(!served_note(&served(true)).unwrap().contains("may depend"));
        assert_eq!(served_note(&json!({"model": {"kind": "candle"}})), None);
    }

    #[test]
    fn a_combined_report_shows_each_runs_batch_utilization_from_runs_json() {
        let dir = std::env::temp_dir().join(format!("creg-prov-runs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let figures = |n: usize, steps: usize, row_steps: usize, tokens: usize| {
            json!({"invocation": n, "started": format!("T{n}"), "steps": steps,
                   "rows_decoded": tokens, "row_steps": row_steps, "generated_tokens": tokens})
        };
        let runs = json!([
            {"label": "a", "identity": {}, "invocations": [figures(1, 10, 40, 30), figures(2, 5, 20, 20)]},
            {"label": "b", "identity": {}, "invocations_error": "batches.jsonl:2: damaged"},
            {"label": "c", "identity": {}},
            {"label": "m", "identity": {}, "invocations": [
                figures(1, 10, 40, 30),
                {"invocation": 2, "started": "T9", "from": {"shard": "1/8", "invocation": 3},
                 "steps": 5, "rows_decoded": 20, "row_steps": 20, "generated_tokens": 20},
            ]},
        ]);
        std::fs::write(dir.join(super::RUNS_FILE), runs.to_string()).unwrap();
        let lines = super::Provenance::new(None, None)
            .with_runs_in(&dir, "x")
            .lines();
        let field = |label: &str| {
            format!("run {label} batch utilization (rows decoded per row-step offered)")
        };
        let value = |label: &str| lines.iter().find(|(f, _)| *f == field(label)).map(|l| &l.1);
        assert_eq!(
            value("a").unwrap(),
            "0.833 (50 rows decoded / 60 row-steps, 15 decode steps), pooled over 2 invocations; \
             invocation 1 (started T1): 0.750 (30 rows decoded / 40 row-steps, 10 decode steps); \
             invocation 2 (started T2): 1.000 (20 rows decoded / 20 row-steps, 5 decode steps)"
        );
        assert_eq!(value("b").unwrap(), "not known: batches.jsonl:2: damaged");
        assert_eq!(value("c"), None, "a run without figures has no line");
        assert!(
            value("m").unwrap().ends_with(
                "invocation 2 (shard 1/8 invocation 3, started T9): \
                 1.000 (20 rows decoded / 20 row-steps, 5 decode steps)"
            ),
            "a merged run names each invocation's shard: {:?}",
            value("m")
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn provenance_shows_sampling_parameters_as_written() {
        let v = json!({"temperature": 0.2f32 as f64, "top_p": 0.9f32 as f64, "seed": 42});
        assert_eq!(
            rounded(&v).to_string(),
            r#"{"temperature":0.2,"top_p":0.9,"seed":42}"#
        );
    }
}
