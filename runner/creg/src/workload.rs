//! The CREG suite as a run's workload: the plan's prompts as chat requests, each
//! journaled sample scored against the normative reference, reports by the embedded
//! scorer.

pub mod identity;

use crate::baseline::{self, System};
use crate::place::Place;
use crate::plan::{self, PlanSpec};
use crate::record::{Scenario, ScenarioId};
use crate::render::question::Question;
use crate::render::Renderer;
use crate::report::{self, Browser};
use crate::score::aggregate::{self, Aggregate, Scored};
use crate::score::sample::{score_text, SampleScore};
use crate::spec::NormativeSpec;
use identity::CregIdentity;
use runner_core::journal::SampleRecord;
use runner_core::run::manifest::Decoding;
use runner_core::run::{Job, RunError, Scoring, Workload};
use runner_core::suite::PlanRequest;
use runner_engine::digest::sha256_hex;
use runner_engine::{Backend, Message, Prompt, Request, Role, Sampling};
use serde_json::Value;
use std::collections::HashMap;
use std::path::Path;

/// The suite's name in run folders and report titles.
pub const SUITE_NAME: &str = "creg-v1.0";

pub struct CregWorkload {
    suite: Vec<Scenario>,
    by_id: HashMap<ScenarioId, usize>,
    identity: CregIdentity,
    jobs: Vec<Job>,
}

impl CregWorkload {
    /// `suite` is the frozen suite or a user's original file; `suite_sha256` the hash
    /// of its bytes, which request ids are keyed on.
    pub fn new(
        suite: Vec<Scenario>,
        suite_sha256: String,
        spec: PlanSpec,
        max_new_tokens: usize,
        sampling: Sampling,
    ) -> Result<CregWorkload, RunError> {
        let renderer = Renderer::new(suite_sha256.clone())
            .map_err(|e| RunError::Setup(format!("prompt templates: {e}")))?;
        let jobs = plan::plan(&renderer, &suite, &spec)
            .into_iter()
            .map(|p| Job {
                prompt_sha256: sha256_hex(p.prompt.text.as_bytes()),
                facets: Place {
                    scenario: p.prompt.scenario.as_str(),
                    condition: p.prompt.condition.name(),
                    task: p.prompt.task.name(),
                    step: p.prompt.step,
                }
                .facets(),
                request: Request {
                    id: p.prompt.request_id,
                    // The task template carries every instruction; the system turn is
                    // left to the model's own template default.
                    prompt: Prompt::Chat(vec![Message {
                        role: Role::User,
                        content: p.prompt.text,
                    }]),
                    seeds: p.seeds,
                    max_new_tokens,
                    sampling,
                },
            })
            .collect();
        let by_id = suite
            .iter()
            .enumerate()
            .map(|(i, s)| (s.id.clone(), i))
            .collect();
        Ok(CregWorkload {
            suite,
            by_id,
            identity: CregIdentity {
                suite_sha256,
                spec,
                decoding: Decoding {
                    sampling,
                    max_new_tokens,
                },
            },
            jobs,
        })
    }

    /// The workload a journaled run was planned with, rebuilt from its manifest
    /// identity over the frozen suite or `suite_file`, whose hash must be the run's.
    /// The rebuilt plan is the whole run's, whichever shard the journal holds.
    pub fn from_identity(
        identity: &Value,
        suite_file: Option<&Path>,
    ) -> Result<CregWorkload, RunError> {
        let id = CregIdentity::from_json(identity)?;
        let (suite, sha) = load_suite(suite_file)?;
        if id.suite_sha256 != sha {
            return Err(RunError::Setup(format!(
                "the run used suite sha256 {}, not {} ({}); pass --suite-file with the run's suite",
                id.suite_sha256,
                sha,
                suite_file.map_or("the frozen suite".to_string(), |p| p.display().to_string())
            )));
        }
        let spec = PlanSpec {
            shard: None,
            ..id.spec
        };
        CregWorkload::new(
            suite,
            sha,
            spec,
            id.decoding.max_new_tokens,
            id.decoding.sampling,
        )
    }

    pub fn suite(&self) -> &[Scenario] {
        &self.suite
    }

    fn locate<'r>(&self, r: &'r SampleRecord) -> Result<(&Scenario, Place<'r>, Question), String> {
        let place = Place::of(&r.facets)?;
        let s = self
            .by_id
            .get(&ScenarioId::new(place.scenario))
            .map(|&i| &self.suite[i])
            .ok_or_else(|| format!("scenario {:?} is not in the suite", place.scenario))?;
        Ok((s, place, place.question()?))
    }

    fn score_sample<'r>(
        &self,
        r: &'r SampleRecord,
    ) -> Result<(&Scenario, Place<'r>, Question, SampleScore), String> {
        let (s, place, q) = self.locate(r)?;
        let score = score_text(s, q, &r.text, r.finish_reason)
            .ok_or_else(|| format!("step {} is not a prefix of {}", place.step, place.scenario))?;
        Ok((s, place, q, score))
    }

    /// Every journaled sample of `runs` (label, records), scored and aggregated.
    pub fn aggregate(&self, runs: &[(String, Vec<SampleRecord>)]) -> Result<Aggregate, String> {
        Ok(aggregate::aggregate(&self.scored(runs, None)?, &self.suite))
    }

    /// Every journaled sample of `runs` for the HTML's sample browser, with the
    /// prompts of this plan.
    pub fn browser(&self, runs: &[(String, Vec<SampleRecord>)]) -> Result<Browser, String> {
        Ok(self.aggregate_and_browser(runs)?.1)
    }

    /// [`CregWorkload::aggregate`] and [`CregWorkload::browser`], each sample scored once.
    pub fn aggregate_and_browser(
        &self,
        runs: &[(String, Vec<SampleRecord>)],
    ) -> Result<(Aggregate, Browser), String> {
        let mut b = Browser {
            group_name: "regime".into(),
            ..Browser::default()
        };
        let scored = self.scored(runs, Some(&mut b))?;
        b.add_prompts(
            self.jobs
                .iter()
                .map(|j| (j.request.id.to_string(), j.request.prompt.plain_text())),
        );
        Ok((aggregate::aggregate(&scored, &self.suite), b))
    }

    /// Every sample of `runs` scored, and added to `browser` where one is given.
    fn scored(
        &self,
        runs: &[(String, Vec<SampleRecord>)],
        mut browser: Option<&mut Browser>,
    ) -> Result<Vec<Scored>, String> {
        let mut scored = Vec::with_capacity(runs.iter().map(|(_, r)| r.len()).sum());
        for (model, records) in runs {
            for r in records {
                let (s, place, q, score) = self
                    .score_sample(r)
                    .map_err(|e| format!("request {} seed {}: {e}", r.request_id, r.seed))?;
                if let Some(b) = browser.as_deref_mut() {
                    crate::report::browser::push_sample(b, model, r, place, s, q, &score);
                }
                scored.push(Scored::new(model, place.condition, r.seed, s, q, score));
            }
        }
        Ok(scored)
    }
}

/// The CREG suite in the runner's registry.
pub struct CregSuite;

/// The one value of [`CregSuite`], for the registry.
pub static SUITE: CregSuite = CregSuite;

impl runner_core::suite::Suite for CregSuite {
    fn name(&self) -> &'static str {
        "creg"
    }

    fn recognises(&self, identity: &Value) -> bool {
        identity.pointer("/suite/name").and_then(Value::as_str) == Some(SUITE_NAME)
    }

    fn rebuild(
        &self,
        identity: &Value,
        suite_file: Option<&Path>,
    ) -> Result<Box<dyn Workload>, RunError> {
        Ok(Box::new(CregWorkload::from_identity(identity, suite_file)?))
    }

    /// The frozen suite (or `--suite-file`) planned over the conditions and tasks
    /// asked, the principal four and all tasks by default, at the protocol's sampling.
    fn plan(&self, request: &PlanRequest) -> Result<Box<dyn Workload>, RunError> {
        let given = |list: &Option<Vec<String>>, default: &str| {
            list.clone().unwrap_or_else(|| vec![default.to_string()])
        };
        let bad = |e: plan::PlanError| RunError::Input(Box::new(e));
        let spec = PlanSpec {
            conditions: plan::parse_conditions(&given(&request.conditions, "principal"))
                .map_err(bad)?,
            tasks: plan::parse_tasks(&given(&request.tasks, "all")).map_err(bad)?,
            seeds: request.seeds.clone(),
            limit_per_regime: request.limit,
            shard: request.shard,
        };
        let (suite, sha) = load_suite(request.suite_file.as_deref())?;
        Ok(Box::new(CregWorkload::new(
            suite,
            sha,
            spec,
            request.max_new_tokens,
            runner_core::protocol::SAMPLING,
        )?))
    }
}

impl Workload for CregWorkload {
    fn name(&self) -> &str {
        SUITE_NAME
    }

    fn identity(&self) -> Value {
        self.identity.to_json()
    }

    fn jobs(&self) -> &[Job] {
        &self.jobs
    }

    fn headline(&self) -> &str {
        "top-state acc"
    }

    fn score(&self, r: &SampleRecord) -> Result<Scoring, String> {
        let (_, _, q, score) = self.score_sample(r)?;
        let metric = |name: &str| {
            score
                .metrics()
                .into_iter()
                .find(|(n, _)| *n == name)
                .and_then(|(_, v)| v)
        };
        Ok(Scoring {
            correct: matches!(q, Question::Belief { .. })
                .then(|| metric("top_state_accuracy") == Some(1.0)),
            contract_failure: metric("contract_failure") == Some(1.0),
            scores: serde_json::to_value(&score).unwrap_or(Value::Null),
        })
    }

    fn report(
        &self,
        runs: &[(String, Vec<SampleRecord>)],
        dir: &Path,
        title: &str,
    ) -> Result<String, RunError> {
        let (agg, browser) =
            self.aggregate_and_browser(runs)
                .map_err(|message| RunError::Score {
                    path: dir.to_path_buf(),
                    message,
                })?;
        let label = runs.first().map_or("", |(l, _)| l.as_str());
        let provenance = report::Provenance::new(
            Some(self.identity.suite_sha256.clone()),
            Some(NormativeSpec::frozen_sha256().to_string()),
        )
        .with_runs_in(dir, label);
        let inputs = report::ReportInputs {
            title,
            provenance: &provenance,
            browser: Some(&browser),
        };
        report::write_reports(dir, &agg, &inputs).map_err(|source| RunError::Report {
            path: dir.to_path_buf(),
            source,
        })?;
        Ok(report::summary(&agg, title, &provenance))
    }

    fn baselines(&self) -> Vec<&'static str> {
        System::ALL.iter().map(|s| s.name()).collect()
    }

    fn baseline(&self, name: &str) -> Option<Box<dyn Backend>> {
        let system: System = name.parse().ok()?;
        let questions = self.jobs.iter().filter_map(|j| {
            let place = Place::of(&j.facets).ok()?;
            Some((
                j.request.id.clone(),
                ScenarioId::new(place.scenario),
                place.question().ok()?,
            ))
        });
        Some(Box::new(baseline::backend(system, &self.suite, questions)))
    }
}

/// The frozen suite, or the suite file a user names, with the SHA-256 of its bytes.
pub fn load_suite(file: Option<&Path>) -> Result<(Vec<Scenario>, String), RunError> {
    let loaded = match file {
        None => crate::frozen::frozen_suite_hashed(),
        Some(p) => crate::load::load_file_hashed(p),
    };
    loaded.map_err(|e| RunError::Input(Box::new(e)))
}

/// The vocabulary of a fixture tokenizer trained on the suite's prompts: enough merges
/// for their words and numbers.
pub const SMOKE_VOCAB: usize = 4096;

/// Training text for a fixture tokenizer: the final-step prompts of every tenth
/// scenario in every condition, so that a small test model sees CREG prompts at the
/// length a real tokenizer gives them.
pub fn tokenizer_corpus() -> Result<Vec<String>, RunError> {
    let suite = crate::frozen::frozen_suite()
        .map_err(|e| RunError::Setup(format!("the frozen suite: {e}")))?;
    let renderer =
        Renderer::frozen().map_err(|e| RunError::Setup(format!("prompt templates: {e}")))?;
    let mut out = Vec::new();
    for s in suite.iter().step_by(10) {
        for c in crate::render::Condition::ALL {
            renderer.prompts(s, c, crate::render::Task::Explanation, &mut |p| {
                out.push(p.text)
            });
        }
    }
    Ok(out)
}
