//! The Probe diagnostic as a run's workload: every scored question of a Probe set (the
//! project's generated `probe.json` and `probe_pit.json`, or one file a user names) as
//! a chat request built by the Probe prompt code; each journaled sample scored by the
//! Probe scorer (normalised match with aliases, abstention credit, stale answers);
//! reports by the Probe report code.
//!
//! * Requests: a core item is asked its question before the final turn (`pre`) and
//!   after it (`post`); a PIT item is asked once per query. Request ids are the
//!   SHA-256 of `probe-request-v1`, the file's hash, the condition, the item id and the
//!   phase or query label.
//! * Facets, journaled with each sample ([`Place`](crate::place::Place)): `scenario` = item id; `condition` =
//!   `conversation` (core items) or `point-in-time` (PIT queries); `task` =
//!   `pre`/`post`/`followup` or the query label; `step` = the sessions shown (core) or
//!   the query's index in the item (PIT).
//! * `--limit N` keeps the first N items of every domain, in file order (core and PIT
//!   alike); `--shard I/N` slices by request id as for CREG.
//! * A sample is `correct` when its outcome is correct (the gold named and no other
//!   candidate, or an abstention where the gold is `unknown`). The Probe contract is
//!   free text read for its claims (`docs/probe-answers.md`); an unusable reply (outcome
//!   `no_answer`: a restated prompt, pasted or invented turns, nothing asserted; or
//!   `empty`: no words) is the contract failure, counted wrong, never dropped.
//! * After the post question each core item gets a follow-up request (`task`
//!   `followup`): the whole conversation, the chain's statements as keys, and a JSON
//!   contract `{"invalidated": [...], "axis": "update"|"correction"}` read like CREG's
//!   (`followup.rs`). It feeds invalidation recall/precision and axis accuracy; a
//!   contract failure is counted and scores as no invalidation and a wrong axis.

pub mod identity;

use crate::baseline::System;
use crate::place::Place;
use crate::plan::{first_per_domain, ProbePlan};
use crate::record::{PitItem, ProbeItem};
use crate::render::{followup_prompt, pit_prompts, probe_prompts, request_id, Phase, Question};
use crate::score::RunReport;
use crate::set::{Part, ProbeSet};
use identity::ProbeIdentity;
use runner_core::journal::SampleRecord;
use runner_core::run::manifest::Decoding;
use runner_core::run::{Job, RunError, Scoring, Workload};
use runner_core::suite::PlanRequest;
use runner_engine::digest::sha256_hex;
use runner_engine::{Backend, Message, Prompt, Request, Role, Sampling};
use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;

/// `/suite/family` of a Probe run's manifest identity.
pub const FAMILY: &str = "probe";
/// Journal `condition` of core-item questions.
pub const CONVERSATION: &str = "conversation";
/// Journal `condition` of point-in-time queries.
pub const POINT_IN_TIME: &str = "point-in-time";

pub struct ProbeWorkload {
    set: ProbeSet,
    plan: ProbePlan,
    decoding: Decoding,
    jobs: Vec<Job>,
    /// The question of each job, parallel to `jobs`.
    questions: Vec<Question>,
    core_by_id: HashMap<String, usize>,
    pit_by_id: HashMap<String, usize>,
}

/// Item ids by position; a repeated id is an error naming the file and field.
fn index<T>(
    part: Option<&Part<T>>,
    id: impl Fn(&T) -> &str,
    field: &str,
) -> Result<HashMap<String, usize>, RunError> {
    let mut out = HashMap::new();
    let Some(part) = part else { return Ok(out) };
    for (i, item) in part.items.iter().enumerate() {
        if out.insert(id(item).to_string(), i).is_some() {
            return Err(RunError::Setup(format!(
                "{}: item {}, field `{field}`: the id appears more than once",
                part.file,
                id(item)
            )));
        }
    }
    Ok(out)
}

/// A PIT item's query labels key its journal lines, so each must be unique in the item.
fn check_query_labels(set: &ProbeSet) -> Result<(), RunError> {
    let Some(part) = &set.pit else { return Ok(()) };
    for item in &part.items {
        for (j, q) in item.queries.iter().enumerate() {
            if item.queries[..j].iter().any(|p| p.label == q.label) {
                return Err(RunError::Setup(format!(
                    "{}: item {}, field `queries[{j}].label`: label {:?} appears more than once in the item",
                    part.file, item.pit_id, q.label.as_str()
                )));
            }
        }
    }
    Ok(())
}

/// The jobs of a run in the order they are asked, each with the question it asks;
/// requests outside the plan's shard are left out.
struct JobList<'a> {
    plan: &'a ProbePlan,
    max_new_tokens: usize,
    sampling: Sampling,
    jobs: Vec<Job>,
    questions: Vec<Question>,
}

impl JobList<'_> {
    /// Pre, post and follow-up requests of each core item the plan keeps.
    fn add_core(&mut self, part: &Part<ProbeItem>) {
        for i in first_per_domain(&part.items, |x| x.domain, self.plan.limit_per_domain) {
            let item = &part.items[i];
            let n = item.sessions.len();
            let [pre, post] = probe_prompts(item);
            for (phase, prompt, shown) in [
                (Phase::Pre, pre, n.saturating_sub(1)),
                (Phase::Post, post, n),
                (Phase::Followup, followup_prompt(item), n),
            ] {
                let id = item.probe_id.as_str();
                let question = Question::Core { item: i, phase };
                let job = (CONVERSATION, id, phase.as_str(), shown);
                self.push(&part.sha256, job, prompt.text, question);
            }
        }
    }

    /// One request per query of each PIT item the plan keeps.
    fn add_pit(&mut self, part: &Part<PitItem>) {
        for i in first_per_domain(&part.items, |x| x.domain, self.plan.limit_per_domain) {
            let item = &part.items[i];
            for (j, (q, prompt)) in item.queries.iter().zip(pit_prompts(item)).enumerate() {
                let question = Question::Pit { item: i, query: j };
                let job = (POINT_IN_TIME, item.pit_id.as_str(), q.label.as_str(), j);
                self.push(&part.sha256, job, prompt.text, question);
            }
        }
    }

    /// The job `(condition, item, task, step)` of the file hashed `sha`, unless its
    /// request falls outside the shard.
    fn push(
        &mut self,
        sha: &str,
        (condition, item, task, step): (&str, &str, &str, usize),
        text: String,
        question: Question,
    ) {
        let id = request_id(sha, condition, item, task);
        if self.plan.shard.is_some_and(|s| !s.contains(id.as_str())) {
            return;
        }
        self.jobs.push(Job {
            prompt_sha256: sha256_hex(text.as_bytes()),
            facets: Place {
                item,
                condition,
                label: task,
                index: step,
            }
            .facets(),
            request: Request {
                id,
                // The prompt carries every instruction; the system turn is left to the
                // model's own template default, as for CREG.
                prompt: Prompt::Chat(vec![Message {
                    role: Role::User,
                    content: text,
                }]),
                seeds: self.plan.seeds.clone(),
                max_new_tokens: self.max_new_tokens,
                sampling: self.sampling,
            },
        });
        self.questions.push(question);
    }
}

impl ProbeWorkload {
    pub fn new(
        set: ProbeSet,
        plan: ProbePlan,
        max_new_tokens: usize,
        sampling: Sampling,
    ) -> Result<ProbeWorkload, RunError> {
        if set.core_items().is_empty() && set.pit_items().is_empty() {
            return Err(RunError::Setup(format!(
                "{}: the Probe file holds no items",
                set.files()
            )));
        }
        let core_by_id = index(set.core.as_ref(), |i| i.probe_id.as_str(), "probe_id")?;
        let pit_by_id = index(set.pit.as_ref(), |i| i.pit_id.as_str(), "pit_id")?;
        check_query_labels(&set)?;
        let mut list = JobList {
            plan: &plan,
            max_new_tokens,
            sampling,
            jobs: Vec::new(),
            questions: Vec::new(),
        };
        if let Some(part) = &set.core {
            list.add_core(part);
        }
        if let Some(part) = &set.pit {
            list.add_pit(part);
        }
        let JobList {
            jobs, questions, ..
        } = list;
        Ok(ProbeWorkload {
            set,
            plan,
            decoding: Decoding {
                sampling,
                max_new_tokens,
            },
            jobs,
            questions,
            core_by_id,
            pit_by_id,
        })
    }

    pub fn set(&self) -> &ProbeSet {
        &self.set
    }

    /// The question a journaled sample answers.
    fn locate(&self, r: &SampleRecord) -> Result<Question, String> {
        let place = Place::of(&r.facets)?;
        let find = |by_id: &HashMap<String, usize>| {
            by_id.get(place.item).copied().ok_or_else(|| {
                format!(
                    "item {:?} ({}) is not in {}",
                    place.item,
                    place.condition,
                    self.set.files()
                )
            })
        };
        match place.condition {
            CONVERSATION => {
                let item = find(&self.core_by_id)?;
                let phase = match place.label {
                    "pre" => Phase::Pre,
                    "post" => Phase::Post,
                    "followup" => Phase::Followup,
                    t => {
                        return Err(format!(
                            "task {t:?} of a core item is not pre, post or followup"
                        ))
                    }
                };
                Ok(Question::Core { item, phase })
            }
            POINT_IN_TIME => {
                let item = find(&self.pit_by_id)?;
                let pit = &self.set.pit_items()[item];
                match pit.queries.get(place.index) {
                    Some(q) if q.label.as_str() == place.label => Ok(Question::Pit {
                        item,
                        query: place.index,
                    }),
                    _ => Err(format!(
                        "item {} has no query {:?} at position {}",
                        place.item, place.label, place.index
                    )),
                }
            }
            other => Err(format!(
                "condition {other:?} is not a Probe condition ({CONVERSATION}, {POINT_IN_TIME})"
            )),
        }
    }
}

/// The Probe diagnostic in the runner's registry: any set (`probe`, `probe-v0`, a
/// user's file) whose identity is of the Probe family.
pub struct ProbeSuite;

/// The one value of [`ProbeSuite`], for the registry.
pub static SUITE: ProbeSuite = ProbeSuite;

impl runner_core::suite::Suite for ProbeSuite {
    fn name(&self) -> &'static str {
        "probe"
    }

    fn recognises(&self, identity: &Value) -> bool {
        identity.pointer("/suite/family").and_then(Value::as_str) == Some(FAMILY)
    }

    fn rebuild(
        &self,
        identity: &Value,
        suite_file: Option<&std::path::Path>,
    ) -> Result<Box<dyn Workload>, RunError> {
        Ok(Box::new(ProbeWorkload::from_identity(
            identity, suite_file,
        )?))
    }

    /// The generated pair (or `--suite-file`), every question of every item, at the
    /// protocol's sampling. Conditions and tasks are CREG's: a Probe run refuses them.
    fn plan(&self, request: &PlanRequest) -> Result<Box<dyn Workload>, RunError> {
        if request.conditions.is_some() || request.tasks.is_some() {
            return Err(RunError::Setup(
                "--condition and --tasks apply to the CREG suite; a Probe run asks every question of its items".into(),
            ));
        }
        let set = match &request.suite_file {
            Some(p) => ProbeSet::from_file(p).map_err(|e| RunError::Input(Box::new(e)))?,
            None => ProbeSet::generated(),
        };
        let plan = ProbePlan {
            seeds: request.seeds.clone(),
            limit_per_domain: request.limit,
            shard: request.shard,
        };
        Ok(Box::new(ProbeWorkload::new(
            set,
            plan,
            request.max_new_tokens,
            runner_core::protocol::SAMPLING,
        )?))
    }
}

impl Workload for ProbeWorkload {
    fn name(&self) -> &str {
        &self.set.name
    }

    fn identity(&self) -> Value {
        ProbeIdentity::of(&self.set, &self.plan, self.decoding).to_json()
    }

    fn jobs(&self) -> &[Job] {
        &self.jobs
    }

    fn headline(&self) -> &str {
        "Probe acc"
    }

    fn score(&self, r: &SampleRecord) -> Result<Scoring, String> {
        let q = self.locate(r)?;
        Ok(self.judge(q, r))
    }

    fn report(
        &self,
        runs: &[(String, Vec<SampleRecord>)],
        dir: &Path,
        title: &str,
    ) -> Result<String, RunError> {
        let report = self
            .run_report(runs, title)
            .map_err(|message| RunError::Score {
                path: dir.to_path_buf(),
                message,
            })?
            .with_batch_utilization(runner_core::report::provenance::batch_utilization(dir));
        write_reports(dir, &report).map_err(|source| RunError::Report {
            path: dir.to_path_buf(),
            source,
        })?;
        crate::report::html::write_run(
            dir,
            title,
            &report,
            runs,
            self.jobs
                .iter()
                .map(|j| (j.request.id.to_string(), j.request.prompt.plain_text())),
            &self.facts(),
        )
        .map_err(|source| RunError::Report {
            path: dir.to_path_buf(),
            source,
        })?;
        Ok(report.summary())
    }

    fn baselines(&self) -> Vec<&'static str> {
        System::ALL.iter().map(|s| s.name()).collect()
    }

    fn baseline(&self, name: &str) -> Option<Box<dyn Backend>> {
        let system: System = name.parse().ok()?;
        let questions = self
            .jobs
            .iter()
            .zip(&self.questions)
            .map(|(j, q)| (j.request.id.clone(), *q));
        Some(Box::new(crate::baseline::backend(
            system,
            self.set.core_items().to_vec(),
            self.set.pit_items().to_vec(),
            questions,
        )))
    }
}

/// `scores.json`, `summary.md` and `scores.csv` into `dir`, each written beside and
/// renamed, so that a crash never leaves half a report.
fn write_reports(dir: &Path, report: &RunReport) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let mut json = serde_json::to_string_pretty(report).map_err(std::io::Error::other)?;
    json.push('\n');
    for (name, body) in [
        ("scores.json", json),
        ("summary.md", report.summary()),
        ("scores.csv", report.csv()),
    ] {
        runner_core::fsutil::write_atomic(&dir.join(name), body.as_bytes())?;
    }
    Ok(())
}

mod facets;
mod followup;
mod scoring;
#[cfg(test)]
mod tests;
