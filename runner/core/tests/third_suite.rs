//! The seam between the core and a suite, shown: a third suite of a few dozen lines
//! (sums to add up, scored by exact answer, with its own one-page report and baseline)
//! runs through the run loop, the journal, the streaming scorer, resume, the registry's
//! rescoring and the report kit, and no other crate is touched to add it.

use runner_core::baseline::{Answers, BaselineBackend};
use runner_core::facets::Facets;
use runner_core::journal::failed::FAILED_FILE;
use runner_core::journal::{self, SampleRecord};
use runner_core::report::{escape, write_atomic, Page};
use runner_core::run::manifest::{manifest, usize_field};
use runner_core::run::rescore::{rescore, Event, Rescore};
use runner_core::run::{
    execute, execute_with, Job, Quiet, RunError, RunOptions, Scoring, Workload,
};
use runner_core::suite::{PlanRequest, Registry, Suite};
use runner_engine::digest::sha256_hex;
use runner_engine::{Backend, EngineError, Handover, Prompt, Request, RequestId, Sample, Sampling};
use serde_json::{json, Value};
use std::path::Path;

// ---- the suite: everything a third suite writes ----

const NAME: &str = "sums-v1";

struct Sums {
    jobs: Vec<Job>,
}

impl Sums {
    fn new(items: usize) -> Sums {
        let jobs = (0..items)
            .map(|i| {
                let text = format!("{i} + {} =", 2 * i);
                Job {
                    request: Request {
                        id: RequestId::new(sha256_hex(format!("{NAME}|{text}").as_bytes())),
                        prompt: Prompt::Raw(text.clone()),
                        seeds: vec![42, 43],
                        max_new_tokens: 8,
                        sampling: Sampling::Greedy,
                    },
                    // The suite's own facet: which sum (read back by `score`).
                    facets: Facets::new().with("item", i),
                    prompt_sha256: sha256_hex(text.as_bytes()),
                }
            })
            .collect();
        Sums { jobs }
    }

    fn expected(&self, item: usize) -> Option<usize> {
        (item < self.jobs.len()).then_some(3 * item)
    }
}

impl Workload for Sums {
    fn name(&self) -> &str {
        NAME
    }
    fn identity(&self) -> Value {
        json!({"suite": {"name": NAME, "items": self.jobs.len()}})
    }
    fn jobs(&self) -> &[Job] {
        &self.jobs
    }
    fn headline(&self) -> &str {
        "exact"
    }
    fn score(&self, r: &SampleRecord) -> Result<Scoring, String> {
        let item = r.facets.count("item").map_err(|e| e.to_string())?;
        let want = self.expected(item).ok_or("no such sum")?;
        let said: Option<usize> = r.text.trim().parse().ok();
        Ok(Scoring {
            scores: json!({"exact": said == Some(want)}),
            correct: Some(said == Some(want)),
            contract_failure: said.is_none(),
        })
    }
    fn report(
        &self,
        runs: &[(String, Vec<SampleRecord>)],
        dir: &Path,
        title: &str,
    ) -> Result<String, RunError> {
        let mut rows = String::new();
        let mut summary = String::new();
        for (model, records) in runs {
            let exact = records.iter().filter(|r| r.scores["exact"] == true).count();
            let line = format!("{model}: {exact} of {} exact", records.len());
            rows.push_str(&format!("<p>{}</p>", escape(&line)));
            summary.push_str(&line);
        }
        let mut page = Page::new(title);
        page.section("exact", "Exact sums", &rows);
        let html = page.finish(None).map_err(|source| RunError::Report {
            path: dir.join("report.html"),
            source,
        })?;
        write_atomic(dir, "report.html", html.as_bytes()).map_err(|source| RunError::Report {
            path: dir.join("report.html"),
            source,
        })?;
        Ok(summary)
    }
    fn baselines(&self) -> Vec<&'static str> {
        vec!["adder"]
    }
    fn baseline(&self, name: &str) -> Option<Box<dyn Backend>> {
        let questions = self
            .jobs
            .iter()
            .map(|j| (j.request.id.clone(), j.request.prompt.plain_text()));
        (name == "adder")
            .then(|| Box::new(BaselineBackend::new(Adder, questions)) as Box<dyn Backend>)
    }
}

/// Adds up every sum, except that it shrugs at the first.
struct Adder;

impl Answers for Adder {
    type Question = String;
    fn describe(&self) -> String {
        "adder".into()
    }
    fn answer(&self, text: &String) -> Result<String, String> {
        let (a, b) = text
            .trim_end_matches(" =")
            .split_once(" + ")
            .ok_or("not a sum")?;
        let (a, b): (u64, u64) = (a.parse().map_err(|_| "a")?, b.parse().map_err(|_| "b")?);
        Ok(if a == 0 {
            "no idea".into()
        } else {
            (a + b).to_string()
        })
    }
}

struct SumsSuite;

impl Suite for SumsSuite {
    fn name(&self) -> &'static str {
        "sums"
    }
    fn recognises(&self, identity: &Value) -> bool {
        identity.pointer("/suite/name") == Some(&json!(NAME))
    }
    fn rebuild(
        &self,
        identity: &Value,
        _file: Option<&Path>,
    ) -> Result<Box<dyn Workload>, RunError> {
        let items = usize_field(identity, "/suite/items").map_err(RunError::Identity)?;
        Ok(Box::new(Sums::new(items)))
    }
    fn plan(&self, request: &PlanRequest) -> Result<Box<dyn Workload>, RunError> {
        if request.conditions.is_some() || request.tasks.is_some() {
            return Err(RunError::Setup("sums have no conditions or tasks".into()));
        }
        Ok(Box::new(Sums::new(request.limit.unwrap_or(5))))
    }
}

static SUITES: Registry = Registry::new(&[&SumsSuite as &dyn Suite]);

// ---- the test ----

#[test]
fn a_third_suite_runs_journals_resumes_rescores_and_reports_through_the_core_alone() {
    let dir = std::env::temp_dir().join(format!("creg-third-suite-{}", std::process::id()));
    std::fs::remove_dir_all(&dir).ok();
    // Planned as the binary plans every run: the registry finds the suite by the name
    // `--suite` gives, and the suite plans the request.
    let request = PlanRequest {
        limit: Some(5),
        ..PlanRequest::default()
    };
    let sums = SUITES.plan("sums", &request).unwrap();
    let sums = sums.as_ref();
    let refused = SUITES.plan("sum", &request).err().unwrap().to_string();
    assert!(
        refused.contains("\"sum\"") && refused.contains("known: sums"),
        "{refused}"
    );
    let mut adder = sums.baseline("adder").expect("the suite's baseline");
    let m = manifest(sums, &json!({"name": "adder"}), &json!({}), "test");

    let first = execute(adder.as_mut(), sums, &m, &dir, "adder", &mut Quiet).unwrap();
    // 5 sums x 2 seeds; the first sum's answers are no number: contract failures.
    assert_eq!(first.running.total, 10);
    assert_eq!(first.running.generated, 10);
    assert_eq!(first.running.correct, 8);
    assert_eq!(first.running.contract_failures, 2);
    let journaled = journal::read_records(&dir.join(journal::JOURNAL_FILE), false).unwrap();
    assert_eq!(journaled.records.len(), 10);
    // Its lines carry the suite's own facet and no other suite's.
    let lines = std::fs::read_to_string(dir.join(journal::JOURNAL_FILE)).unwrap();
    for line in lines.lines() {
        let line: Value = serde_json::from_str(line).unwrap();
        assert!(
            line["item"].is_u64() && line.get("scenario").is_none(),
            "{line}"
        );
    }
    assert!(journaled
        .records
        .iter()
        .all(|r| r.scores.get("exact").is_some()));
    let html = std::fs::read_to_string(dir.join("report.html")).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"), "{html}");
    assert!(
        html.contains("sums-v1: adder") && html.contains("adder: 8 of 10 exact"),
        "{html}"
    );

    // Run again: everything is in the journal, nothing is generated twice.
    let again = execute(adder.as_mut(), sums, &m, &dir, "adder", &mut Quiet).unwrap();
    assert_eq!((again.recovered, again.running.generated), (10, 0));
    assert_eq!(again.running.correct, 8);

    // `runner score` finds the suite through the registry and rescores the journal.
    std::fs::remove_file(dir.join("report.html")).unwrap();
    let dirs = [dir.clone()];
    let mut rescored = Vec::new();
    let job = Rescore {
        dirs: &dirs,
        suite_file: None,
        keep_first: false,
        out: None,
        suites: &SUITES,
    };
    rescore(&job, &mut |e| {
        if let Event::Rescored { samples, .. } = e {
            rescored.push(samples)
        }
    })
    .unwrap();
    assert_eq!(rescored, [10]);
    assert!(dir.join("report.html").is_file());

    // A run of a suite the registry does not hold is refused with what it holds.
    let other = json!({"suite": {"name": "creg-v1.0"}});
    let err = SUITES
        .rebuild(&other, None)
        .err()
        .expect("refused")
        .to_string();
    assert!(
        err.contains("\"creg-v1.0\"") && err.contains("sums"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).ok();
}

/// The adder, except that the sample (first sum, seed 43) can never be had while
/// `refuse` holds; it says when it is idle, as a served backend does.
struct Refuser {
    refuse: bool,
    adder: Box<dyn Backend>,
}

impl Refuser {
    fn new(sums: &Sums, refuse: bool) -> Refuser {
        let adder = sums.baseline("adder").expect("the adder");
        Refuser { refuse, adder }
    }
}

impl Backend for Refuser {
    fn describe(&self) -> String {
        "refuser".into()
    }
    fn generate_each(
        &mut self,
        requests: &[Request],
        on_sample: &mut dyn FnMut(Sample),
    ) -> Result<(), EngineError> {
        self.adder.generate_each(requests, on_sample)
    }
    fn generate_handing_over(
        &mut self,
        requests: &[Request],
        on: &mut dyn FnMut(Handover),
    ) -> Result<(), EngineError> {
        let refused = &requests[0].id.clone();
        let refuse = self.refuse;
        self.adder.generate_each(requests, &mut |s| {
            if refuse && s.request_id == *refused && s.seed == 43 {
                on(Handover::Failed {
                    request_id: s.request_id,
                    seed: s.seed,
                    reason: "HTTP 400: the prompt is too long".into(),
                });
            } else {
                on(Handover::Sample(s));
            }
            on(Handover::Idle);
        })
    }
}

#[test]
fn a_sample_that_cannot_be_had_is_kept_failed_skipped_on_resume_and_retried_when_asked() {
    let dir = std::env::temp_dir().join(format!("creg-third-failed-{}", std::process::id()));
    std::fs::remove_dir_all(&dir).ok();
    let sums = Sums::new(5);
    let m = manifest(&sums, &json!({"name": "refuser"}), &json!({}), "test");
    let mut refuser = Refuser::new(&sums, true);
    let first = execute(&mut refuser, &sums, &m, &dir, "refuser", &mut Quiet).unwrap();
    assert_eq!((first.running.generated, first.failed), (9, 1));
    assert!(
        first.failed_note.contains("1 sample failed") && first.failed_note.contains("too long"),
        "{}",
        first.failed_note
    );
    let failed = std::fs::read_to_string(dir.join(FAILED_FILE)).unwrap();
    assert_eq!(failed.lines().count(), 1, "{failed}");
    let journaled = || {
        journal::read_records(&dir.join(journal::JOURNAL_FILE), false)
            .unwrap()
            .records
            .len()
    };
    assert_eq!(journaled(), 9);

    // A resume skips it, even from a backend that would answer now.
    let mut answering = Refuser::new(&sums, false);
    let again = execute(&mut answering, &sums, &m, &dir, "refuser", &mut Quiet).unwrap();
    assert_eq!((again.running.generated, again.failed), (0, 1));

    // Asked again, it is answered and joins the journal; nothing else is asked twice.
    let retry = RunOptions { retry_failed: true };
    let last = execute_with(
        &mut answering,
        &sums,
        &m,
        &dir,
        "refuser",
        &mut Quiet,
        &retry,
    );
    let last = last.unwrap();
    assert_eq!((last.running.generated, last.failed), (1, 0));
    assert!(last.failed_note.is_empty(), "{}", last.failed_note);
    assert_eq!(journaled(), 10);
    std::fs::remove_dir_all(&dir).ok();
}
