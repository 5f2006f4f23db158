use crate::journal::*;
use runner_engine::finish::FinishReason;
use serde_json::json;

fn temp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("creg-journal-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

fn manifest(revision: &str) -> Manifest {
    Manifest {
        identity: json!({"model": {"name": "fixture", "revision": revision}, "sampling": {"temperature": 0.2}}),
        context: json!({"device": "cpu"}),
    }
}

fn record(i: usize) -> SampleRecord {
    SampleRecord {
        request_id: format!("req-{i:04}"),
        seed: 42,
        facets: crate::facets::Facets::new()
            .with("scenario", "s")
            .with("condition", "full_graph")
            .with("task", "belief")
            .with("step", 1),
        prompt_sha256: "00".into(),
        text: format!("{{\"answer\": {i}}}"),
        tokens: 5,
        finish_reason: FinishReason::Stop,
        prefill_ms: 1.0,
        decode_ms: 2.0,
        scores: json!({"top_state_correct": true}),
    }
}

#[test]
fn records_survive_a_reopen_and_are_not_duplicated() {
    let dir = temp("reopen");
    let (mut j, rec) = Journal::open(&dir, &manifest("a")).unwrap();
    assert!(rec.records.is_empty());
    j.append(&[record(1), record(2)]).unwrap();
    drop(j);
    let (mut j, rec) = Journal::open(&dir, &manifest("a")).unwrap();
    assert_eq!(rec.records, vec![record(1), record(2)]);
    j.append(&[record(2), record(3)]).unwrap();
    let again = read_records(&dir.join(JOURNAL_FILE), false).unwrap();
    assert_eq!(again.records.len(), 3);
    assert_eq!(again.duplicates, 1);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_torn_last_line_is_cut_off_and_nothing_before_it_is_lost() {
    let dir = temp("torn");
    let (mut j, _) = Journal::open(&dir, &manifest("a")).unwrap();
    j.append(&[record(1), record(2)]).unwrap();
    drop(j);
    let path = dir.join(JOURNAL_FILE);
    let before = std::fs::read(&path).unwrap();
    let mut torn = before.clone();
    torn.extend_from_slice(b"{\"request_id\": \"req-0003\", \"se");
    std::fs::write(&path, &torn).unwrap();
    let (_, rec) = Journal::open(&dir, &manifest("a")).unwrap();
    assert_eq!(rec.records.len(), 2);
    assert_eq!(rec.torn_bytes, torn.len() - before.len());
    assert_eq!(
        std::fs::read(&path).unwrap(),
        before,
        "the file is back to its good prefix"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_empty_journal_resumes_from_nothing() {
    let dir = temp("empty");
    let (j, _) = Journal::open(&dir, &manifest("a")).unwrap();
    drop(j);
    std::fs::write(dir.join(JOURNAL_FILE), b"").unwrap();
    let (_, rec) = Journal::open(&dir, &manifest("a")).unwrap();
    assert!(rec.records.is_empty() && rec.torn_bytes == 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn another_runs_manifest_is_refused_naming_what_differs() {
    let dir = temp("mismatch");
    let (mut j, _) = Journal::open(&dir, &manifest("a")).unwrap();
    j.append(&[record(1)]).unwrap();
    drop(j);
    let err = Journal::open(&dir, &manifest("b")).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("model.revision: this run \"b\" vs the folder's \"a\""),
        "{msg}"
    );
    assert!(msg.contains("--fresh"), "{msg}");
    assert_eq!(
        read_records(&dir.join(JOURNAL_FILE), false)
            .unwrap()
            .records
            .len(),
        1
    );
    // The context (device, times) may differ freely.
    let mut moved = manifest("a");
    moved.context = json!({"device": "cuda:0"});
    assert!(Journal::open(&dir, &moved).is_ok());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_damaged_middle_line_is_reported_not_silently_dropped() {
    let dir = temp("corrupt");
    let (mut j, _) = Journal::open(&dir, &manifest("a")).unwrap();
    j.append(&[record(1), record(2), record(3)]).unwrap();
    drop(j);
    let path = dir.join(JOURNAL_FILE);
    let text = std::fs::read_to_string(&path).unwrap();
    let damaged = text.replacen("req-0002", "req-0002\u{0}\"", 1);
    std::fs::write(&path, &damaged).unwrap();
    let err = Journal::open(&dir, &manifest("a")).unwrap_err();
    assert!(
        matches!(err, JournalError::Corrupt { line: 2, .. }),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        damaged,
        "nothing was rewritten"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_folder_that_cannot_be_written_gives_a_clear_error() {
    // /proc refuses new entries even to root.
    let err = Journal::open(Path::new("/proc/creg-runner-test/run"), &manifest("a")).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.starts_with("/proc/creg-runner-test/run: cannot create the run folder"),
        "{msg}"
    );
}

#[test]
fn a_full_disk_keeps_every_earlier_line() {
    let dir = temp("full");
    let (mut j, _) = Journal::open(&dir, &manifest("a")).unwrap();
    j.append(&[record(1)]).unwrap();
    drop(j);
    // Swap the journal's file for the full device behind the journal's back.
    let path = dir.join(JOURNAL_FILE);
    let good = std::fs::read(&path).unwrap();
    let mut j = Journal {
        dir: dir.clone(),
        file: OpenOptions::new().append(true).open("/dev/full").unwrap(),
        len: good.len() as u64,
        identity_sha256: identity_sha256(&manifest("a").identity),
        _lock: None,
    };
    let err = j.append(&[record(2)]).unwrap_err();
    assert!(err.to_string().contains("the disk is full"), "{err}");
    assert_eq!(std::fs::read(&path).unwrap(), good);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn shards_merge_into_their_union_and_mismatched_shards_are_refused() {
    let (a, b, out) = (temp("shard-a"), temp("shard-b"), temp("merged"));
    let shard = |i: usize| {
        let mut m = manifest("a");
        m.identity["shard"] = json!(format!("{i}/2"));
        m
    };
    let (mut ja, _) = Journal::open(&a, &shard(0)).unwrap();
    ja.append(&[record(1), record(3)]).unwrap();
    let (mut jb, _) = Journal::open(&b, &shard(1)).unwrap();
    jb.append(&[record(2), record(4), record(3)]).unwrap();
    // A shard still being written is refused; finished ones merge.
    assert!(matches!(
        merge(&[a.clone(), b.clone()], &out),
        Err(JournalError::Lock(_))
    ));
    drop((ja, jb));
    assert_eq!(merge(&[a.clone(), b.clone()], &out).unwrap(), 4);
    let merged = read_records(&out.join(JOURNAL_FILE), false).unwrap();
    assert_eq!(merged.records.len(), 4);

    let other = temp("shard-other");
    Journal::open(&other, &manifest("b")).unwrap();
    let err = merge(&[a.clone(), other.clone()], &temp("merged-bad")).unwrap_err();
    assert!(err.to_string().contains("model.revision"), "{err}");
    for d in [a, b, out, other] {
        std::fs::remove_dir_all(d).unwrap();
    }
}

#[test]
fn merge_carries_each_shards_batch_figures_once_tagged_with_its_shard() {
    use runner_engine::batch::BatchStats;
    let (a, b, out) = (temp("figs-a"), temp("figs-b"), temp("figs-merged"));
    let figures = |steps: usize, row_steps: usize, rows: usize| BatchStats {
        steps,
        rows_decoded: rows,
        row_steps,
        generated_tokens: rows,
        ..BatchStats::default()
    };
    // One invocation of shard `i` of 2 in `dir`: one sample and its batch figures.
    let invocation = |dir: &Path, i: usize, sample: usize, stats: BatchStats| {
        let mut m = manifest("a");
        m.identity["shard"] = json!(format!("{i}/2"));
        let (mut j, _) = Journal::open(dir, &m).unwrap();
        j.append(&[record(sample)]).unwrap();
        batches::BatchLog::open(&j).unwrap().append(&stats).unwrap();
    };
    // Shard 0 was resumed once (two invocations); shard 1 ran in one.
    invocation(&a, 0, 1, figures(10, 40, 30));
    invocation(&a, 0, 2, figures(5, 20, 20));
    invocation(&b, 1, 3, figures(4, 16, 8));
    let started = batches::read(&a).unwrap()[1].started.clone();

    assert_eq!(merge(&[a.clone(), b.clone()], &out).unwrap(), 3);
    let merged = batches::read(&out).unwrap();
    let origins: Vec<(usize, &str, usize)> = merged
        .iter()
        .map(|i| {
            let o = i
                .from
                .as_ref()
                .expect("a carried invocation names its origin");
            (i.invocation, o.shard.as_str(), o.invocation)
        })
        .collect();
    assert_eq!(origins, [(1, "0/2", 1), (2, "0/2", 2), (3, "1/2", 1)]);
    assert_eq!(merged[1].started, started);
    assert_eq!(batches::pooled(&merged), figures(19, 76, 58));

    // Merging again adds nothing; a shard resumed since adds only its new invocation.
    merge(&[a.clone(), b.clone()], &out).unwrap();
    assert_eq!(batches::read(&out).unwrap().len(), 3);
    invocation(&b, 1, 4, figures(2, 4, 4));
    assert_eq!(merge(&[a.clone(), b.clone()], &out).unwrap(), 4);
    let merged = batches::read(&out).unwrap();
    assert_eq!(merged.len(), 4);
    let last = merged[3].from.as_ref().unwrap();
    assert_eq!(
        (merged[3].invocation, last.shard.as_str(), last.invocation),
        (4, "1/2", 2)
    );
    assert_eq!(batches::pooled(&merged), figures(21, 80, 62));

    // A damaged figures file stops the merge before anything is written, although
    // shard 0 has a new sample and new figures.
    invocation(&a, 0, 5, figures(1, 1, 1));
    let text = std::fs::read_to_string(b.join(batches::BATCHES_FILE)).unwrap();
    std::fs::write(b.join(batches::BATCHES_FILE), format!("{{oops\n{text}")).unwrap();
    let journal_before = std::fs::read(out.join(JOURNAL_FILE)).unwrap();
    let err = merge(&[a.clone(), b.clone()], &out)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(batches::BATCHES_FILE) && err.contains(":1:"),
        "{err}"
    );
    assert_eq!(
        std::fs::read(out.join(JOURNAL_FILE)).unwrap(),
        journal_before
    );
    assert_eq!(batches::read(&out).unwrap().len(), 4);
    for d in [a, b, out] {
        std::fs::remove_dir_all(d).unwrap();
    }
}

#[test]
fn a_journal_stays_bound_to_its_identity_when_its_manifest_goes() {
    let dir = temp("bound");
    let (mut j, _) = Journal::open(&dir, &manifest("a")).unwrap();
    j.append(&[record(1), record(2)]).unwrap();
    drop(j);
    std::fs::remove_file(dir.join(MANIFEST_FILE)).unwrap();
    // Another run cannot take the journal over...
    let err = Journal::open(&dir, &manifest("b")).unwrap_err();
    assert!(
        matches!(
            err,
            JournalError::ForeignSamples {
                foreign: 2,
                total: 2,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("--fresh"), "{err}");
    assert!(!dir.join(MANIFEST_FILE).exists(), "nothing was written");
    // ...while the run it belongs to resumes and gets its manifest back.
    let (_, rec) = Journal::open(&dir, &manifest("a")).unwrap();
    assert_eq!(rec.records.len(), 2);
    assert_eq!(read_manifest(&dir).unwrap().unwrap(), manifest("a"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn unbound_lines_need_their_manifest_and_rebind_sorts_foreign_lines_out() {
    let dir = temp("rebind");
    let (mut j, _) = Journal::open(&dir, &manifest("a")).unwrap();
    j.append(&[record(1)]).unwrap();
    drop(j);
    let path = dir.join(JOURNAL_FILE);
    // A line of an older runner (no identity) and one of another run.
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str(&serde_json::to_string(&record(2)).unwrap());
    text.push('\n');
    let foreign = LineOut {
        record: &record(3),
        identity_sha256: "ffff",
    };
    text.push_str(&serde_json::to_string(&foreign).unwrap());
    text.push('\n');
    std::fs::write(&path, &text).unwrap();
    assert!(matches!(
        Journal::open(&dir, &manifest("a")),
        Err(JournalError::ForeignSamples { foreign: 1, .. })
    ));
    assert!(matches!(
        read_run(&dir),
        Err(JournalError::ForeignSamples { .. })
    ));
    let done = rebind(&dir).unwrap();
    assert_eq!(
        done,
        Rebound {
            kept: 2,
            stamped: 1,
            set_aside: 1
        }
    );
    let aside = read_records(&dir.join(FOREIGN_FILE), false).unwrap();
    assert_eq!(aside.records, vec![record(3)]);
    let (_, rec) = Journal::open(&dir, &manifest("a")).unwrap();
    assert_eq!(rec.records, vec![record(1), record(2)]);
    assert_eq!(
        rec.identities.len(),
        1,
        "every line now carries one identity"
    );

    // Without its manifest, a journal of unbound lines is refused, not adopted.
    let legacy = temp("legacy");
    std::fs::create_dir_all(&legacy).unwrap();
    let line = serde_json::to_string(&record(1)).unwrap();
    std::fs::write(legacy.join(JOURNAL_FILE), format!("{line}\n")).unwrap();
    assert!(matches!(
        Journal::open(&legacy, &manifest("a")),
        Err(JournalError::Unbound { samples: 1, .. })
    ));
    for d in [dir, legacy] {
        std::fs::remove_dir_all(d).unwrap();
    }
}

#[test]
fn a_manifest_with_a_misspelled_field_is_refused_with_the_nearest_name() {
    let dir = temp("strict-manifest");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join(MANIFEST_FILE),
        "{\n  \"identity\": {},\n  \"contxt\": {}\n}",
    )
    .unwrap();
    let err = read_manifest(&dir).unwrap_err().to_string();
    assert!(
        err.contains("line 3: field `contxt`: unknown field, did you mean `context`?"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_identity_hash_ignores_key_order_and_null_fields() {
    let a = json!({"suite": {"x": 1, "y": [1, 2]}, "shard": null, "model": "m"});
    let b = json!({"model": "m", "suite": {"y": [1, 2], "x": 1}});
    assert_eq!(identity_sha256(&a), identity_sha256(&b));
    let c = json!({"model": "m", "suite": {"y": [2, 1], "x": 1}});
    assert_ne!(identity_sha256(&a), identity_sha256(&c));
}
