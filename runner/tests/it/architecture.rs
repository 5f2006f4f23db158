//! The crate's shape, checked: data flows one way (suite -> render -> plan -> engine ->
//! journal -> score -> report), so a stage may import only the stages before it, and no
//! source file grows past 600 lines. A failure names the file and line to fix.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Helpers every stage may use; they import no stage themselves.
const SHARED: &[&str] = &[
    "id",
    "digest",
    "strict",
    "fsutil",
    "finish",
    "alloc_count",
    "batch",
];

/// What each stage may import besides itself and `SHARED`. The order is the data flow;
/// the exceptions are narrower than "everything upstream": the engine proper is a
/// generic decoder and knows no suite, only its baselines (which answer without a
/// network) read the suite's records and the rendered questions as data.
const ALLOWED: &[(&str, &[&str])] = &[
    ("suite", &[]),
    ("render", &["suite"]),
    ("plan", &["suite", "render"]),
    ("engine", &[]),
    ("engine/baseline", &["engine", "suite", "render"]),
    ("journal", &["engine", "plan"]),
    ("score", &["suite", "render", "plan", "journal"]),
    // The benchmarks drive the engine, the suite, the renderer and the scorer together
    // (`runner bench`, `score --bench`, ...), so like `run` they sit at the end of the flow.
    (
        "bench",
        &[
            "suite", "render", "plan", "engine", "journal", "score", "run",
        ],
    ),
    (
        "run",
        &["suite", "render", "plan", "engine", "journal", "score"],
    ),
    (
        "cli",
        &[
            "suite", "render", "plan", "engine", "journal", "score", "run", "bench",
        ],
    ),
    ("id", &[]),
    ("digest", &[]),
    ("strict", &[]),
    ("fsutil", &[]),
    ("finish", &[]),
    ("alloc_count", &[]),
    ("batch", &[]),
    ("lib", &["*"]),
    ("main", &["*"]),
];

/// Files still over the limit, to be split by concern; the list may only shrink.
const OVER_LIMIT_FOR_NOW: &[&str] = &[];

const MAX_LINES: usize = 600;

fn src() -> PathBuf {
    crate::common::crate_dir().join("src")
}

/// A file as the failure messages name it: relative to the crate, `src/...`.
fn shown(file: &Path) -> String {
    let crate_dir = crate::common::crate_dir();
    file.strip_prefix(crate_dir)
        .unwrap_or(file)
        .display()
        .to_string()
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
}

/// The path below `src/` with `/` separators and no `.rs`, e.g. `engine/baseline/creg`.
fn module_path(file: &Path) -> String {
    let rel = file.strip_prefix(src()).expect("file under src");
    let rel = rel.to_string_lossy().replace('\\', "/");
    rel.trim_end_matches(".rs").to_string()
}

/// The most specific row of `ALLOWED` whose stage contains this module.
fn stage_of(module: &str) -> Option<(&'static str, &'static [&'static str])> {
    ALLOWED
        .iter()
        .filter(|(stage, _)| module == *stage || module.starts_with(&format!("{stage}/")))
        .max_by_key(|(stage, _)| stage.len())
        .copied()
}

/// The stage a `crate::` path names: its first segment, or the first two where a
/// narrower row exists (`engine::baseline`).
fn target_stage(path: &str) -> String {
    let mut segments = path.split("::");
    let first = segments.next().unwrap_or_default();
    if let Some(second) = segments.next() {
        let two = format!("{first}/{second}");
        if ALLOWED.iter().any(|(stage, _)| *stage == two) {
            return two;
        }
    }
    first.to_string()
}

/// Every `crate::` path in the code (comments excluded), with its 1-based line; a
/// grouped `use crate::{a::X, b}` yields one path per group member.
fn crate_paths(text: &str) -> Vec<(usize, String)> {
    let code: String = text
        .lines()
        .map(|line| match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n");
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
            .collect::<String>()
            .trim_end_matches(':')
            .to_string()
    };
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = code[from..].find("crate::") {
        let start = from + at;
        let line = code[..start].matches('\n').count() + 1;
        let rest = &code[start + "crate::".len()..];
        let boundary = code[..start].chars().next_back();
        from = start + "crate::".len();
        if boundary.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue; // `$crate::` or a longer identifier
        }
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1;
            let mut member = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    _ => {}
                }
                if depth == 0 || (depth == 1 && c == ',') {
                    let name = ident(member.trim());
                    if !name.is_empty() {
                        out.push((line, name));
                    }
                    member.clear();
                    if depth == 0 {
                        break;
                    }
                } else if depth == 1 {
                    member.push(c);
                }
            }
        } else {
            out.push((line, ident(rest)));
        }
    }
    out
}

#[test]
fn no_stage_imports_a_stage_downstream_of_it() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    assert!(
        files.len() > 50,
        "found only {} source files under {}",
        files.len(),
        src().display()
    );
    let mut offences = Vec::new();
    for file in &files {
        let module = module_path(file);
        let Some((stage, allowed)) = stage_of(&module) else {
            offences.push(format!(
                "{}: module `{module}` belongs to no stage of the table",
                shown(file)
            ));
            continue;
        };
        if allowed.contains(&"*") {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap();
        for (line, path) in crate_paths(&text) {
            let target = target_stage(&path);
            let target_top = target.split('/').next().unwrap_or_default();
            let ok = target == stage
                || SHARED.contains(&target_top)
                || allowed.contains(&target.as_str())
                || allowed.contains(&target_top);
            if !ok {
                offences.push(format!(
                    "{}:{line}: `{stage}` imports `crate::{path}` (allowed: itself, {:?}, {:?})",
                    shown(file),
                    allowed,
                    SHARED
                ));
            }
        }
    }
    assert!(
        offences.is_empty(),
        "imports against the data flow:\n{}",
        offences.join("\n")
    );
}

/// Modules that serve every suite alike and so must name none: the run loop (a suite
/// reaches it only as a `Workload`), the journal and the engine proper.
const SUITE_NEUTRAL: &[&str] = &[
    "run/mod",
    "run/folder",
    "run/limits",
    "run/model",
    "journal",
    "engine/mod",
    "engine/candle",
];

#[test]
fn the_run_loop_journal_and_engine_name_no_suite() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let mut offences = Vec::new();
    for file in &files {
        let module = module_path(file);
        let neutral = SUITE_NEUTRAL
            .iter()
            .any(|m| module == *m || module.starts_with(&format!("{m}/")));
        if !neutral {
            continue;
        }
        let text = std::fs::read_to_string(file).unwrap();
        for (line, path) in crate_paths(&text) {
            let named = path
                .split("::")
                .any(|segment| segment == "creg" || segment == "probe");
            if path.starts_with("suite") || named {
                offences.push(format!(
                    "{}:{line}: names a suite: `crate::{path}`",
                    shown(file)
                ));
            }
        }
    }
    assert!(
        offences.is_empty(),
        "suite-specific imports in suite-neutral modules:\n{}",
        offences.join("\n")
    );
}

#[test]
fn no_source_file_is_over_the_line_limit() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let mut long = Vec::new();
    let mut allowed_seen = BTreeSet::new();
    for file in &files {
        let module = module_path(file);
        let lines = std::fs::read_to_string(file).unwrap().lines().count();
        if lines <= MAX_LINES {
            continue;
        }
        if OVER_LIMIT_FOR_NOW.contains(&module.as_str()) {
            allowed_seen.insert(module);
        } else {
            long.push(format!(
                "{}:{}: {lines} lines (limit {MAX_LINES})",
                shown(file),
                MAX_LINES + 1
            ));
        }
    }
    assert!(
        long.is_empty(),
        "split these by concern:\n{}",
        long.join("\n")
    );
    // An allow-list entry that has been fixed must go, so the list only shrinks.
    let stale: Vec<_> = OVER_LIMIT_FOR_NOW
        .iter()
        .filter(|m| !allowed_seen.contains(**m))
        .collect();
    assert!(
        stale.is_empty(),
        "no longer over the limit, drop from OVER_LIMIT_FOR_NOW: {stale:?}"
    );
}

#[test]
fn the_import_scanner_sees_grouped_and_inline_paths() {
    let text = "use crate::suite::creg::record::Scenario;\n// crate::score::x in a comment\nuse crate::{engine::Sample, plan::{Plan, Shard}, id};\nlet x = crate::score::metrics::f();\n";
    let paths = crate_paths(text);
    assert_eq!(
        paths,
        vec![
            (1, "suite::creg::record::Scenario".to_string()),
            (3, "engine::Sample".to_string()),
            (3, "plan".to_string()),
            (3, "id".to_string()),
            (4, "score::metrics::f".to_string()),
        ]
    );
    assert_eq!(
        target_stage("engine::baseline::creg::System"),
        "engine/baseline"
    );
    assert_eq!(target_stage("engine::Sample"), "engine");
    assert_eq!(
        stage_of("engine/baseline/probe").unwrap().0,
        "engine/baseline"
    );
    assert_eq!(stage_of("engine/candle/llama").unwrap().0, "engine");
    assert_eq!(stage_of("journal/lock").unwrap().0, "journal");
}
