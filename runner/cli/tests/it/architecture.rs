//! What Cargo cannot hold of the workspace's shape, checked: which crate may depend on
//! which (Cargo builds any graph it is given; this names the one we chose), no import
//! circle between the modules of a crate, and no source file past 600 lines. A failure
//! names the crate, file or modules to fix.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Each workspace crate (its folder under `runner/`) and the workspace crates it may
/// depend on. The engine knows no suite and no scorer; the core knows no suite; a
/// suite knows no other suite; only the binary sees them all.
const CRATES: &[(&str, &str, &[&str])] = &[
    ("engine", "runner-engine", &[]),
    ("core", "runner-core", &["runner-engine"]),
    ("creg", "creg", &["runner-engine", "runner-core"]),
    ("probe", "probe", &["runner-engine", "runner-core"]),
    (
        "cli",
        "runner",
        &["runner-engine", "runner-core", "creg", "probe"],
    ),
];

const MAX_LINES: usize = 600;

fn crates_dir() -> PathBuf {
    crate::common::repo_root().join("runner")
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

/// The workspace crates a crate's manifest depends on (normal and build dependencies;
/// dev-dependencies only reach tests).
fn workspace_dependencies(folder: &str) -> BTreeSet<String> {
    let path = crates_dir().join(folder).join("Cargo.toml");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let manifest: toml::Table =
        toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let ours: BTreeSet<&str> = CRATES.iter().map(|(_, name, _)| *name).collect();
    let mut tables: Vec<&toml::Value> = ["dependencies", "build-dependencies"]
        .iter()
        .filter_map(|k| manifest.get(*k))
        .collect();
    // Target-specific dependencies count too.
    if let Some(targets) = manifest.get("target").and_then(toml::Value::as_table) {
        for t in targets.values() {
            tables.extend(t.get("dependencies"));
        }
    }
    tables
        .iter()
        .filter_map(|t| t.as_table())
        .flat_map(|t| t.keys())
        .filter(|k| ours.contains(k.as_str()))
        .cloned()
        .collect()
}

#[test]
fn each_crate_depends_only_on_the_crates_before_it_in_the_flow() {
    let mut wrong = Vec::new();
    for (folder, name, allowed) in CRATES {
        let allowed: BTreeSet<String> = allowed.iter().map(|s| s.to_string()).collect();
        let actual = workspace_dependencies(folder);
        if actual != allowed {
            wrong.push(format!(
                "{name} (runner/{folder}/Cargo.toml) depends on {actual:?}, the design says {allowed:?}"
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn every_crate_under_runner_is_a_member_with_a_row_here() {
    let mut folders: Vec<String> = std::fs::read_dir(crates_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("Cargo.toml").is_file())
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    folders.sort();
    let mut known: Vec<String> = CRATES.iter().map(|(f, _, _)| f.to_string()).collect();
    known.sort();
    assert_eq!(folders, known, "a new crate needs its row in CRATES");
}

/// A module as a path of names below its crate's `src/` (`candle/choice/step`); the
/// crate root is the empty path.
type Module = Vec<String>;

fn module_of(src: &Path, file: &Path) -> Module {
    let rel = file.strip_prefix(src).expect("file under src");
    let mut names: Module = rel
        .to_string_lossy()
        .trim_end_matches(".rs")
        .split(['/', '\\'])
        .map(String::from)
        .collect();
    if matches!(
        names.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        names.pop();
    }
    names
}

/// The code of a file without comments and without its unit-test module (tests may
/// reach anywhere in their crate).
fn code_of(text: &str) -> String {
    let end = text.find("#[cfg(test)]\nmod ").unwrap_or(text.len());
    text[..end]
        .lines()
        .map(|line| line.find("//").map_or(line, |at| &line[..at]))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Every `crate::` or `super::` path in `code`, as full paths from the crate root; a
/// grouped `use crate::{a::X, b}` yields one path per member.
fn paths_in(code: &str, module: &Module) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let bytes = code.as_bytes();
    for start in ["crate::", "super::"] {
        let mut from = 0;
        while let Some(at) = code[from..].find(start).map(|i| i + from) {
            from = at + start.len();
            let before = at.checked_sub(1).map(|i| bytes[i] as char);
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let mut base: Vec<String> = if start == "super::" {
                module[..module.len().saturating_sub(1)].to_vec()
            } else {
                Vec::new()
            };
            let rest = &code[from..];
            let len = rest
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .unwrap_or(rest.len());
            let head = rest[..len].trim_end_matches(':');
            base.extend(head.split("::").filter(|s| !s.is_empty()).map(String::from));
            if rest[len..].starts_with('{') && rest[..len].ends_with("::") {
                let group = &rest[len + 1..rest[len..].find('}').map_or(rest.len(), |e| len + e)];
                for item in group.split(',') {
                    let item = item.split(" as ").next().unwrap_or("").trim();
                    if item.is_empty() || item == "self" {
                        continue;
                    }
                    let mut p = base.clone();
                    p.extend(item.split("::").map(String::from));
                    out.push(p);
                }
            } else {
                out.push(base);
            }
        }
    }
    out
}

/// The innermost module of `modules` a path lies in.
fn module_named(path: &[String], modules: &BTreeSet<Module>) -> Option<Module> {
    (1..=path.len())
        .rev()
        .map(|n| path[..n].to_vec())
        .find(|m| modules.contains(m))
}

fn is_ancestor(a: &Module, b: &Module) -> bool {
    a.len() < b.len() && b.starts_with(a)
}

/// Which modules use which, where a use counts between the two siblings that hold its
/// ends: `candle/models/llama` using `candle/layers` is `candle/models` using
/// `candle/layers`, so a circle between two folders shows whichever files close it. A
/// module using its own ancestor (a child using what its parent declares) or descendant
/// (a parent re-exporting a child) is no edge.
fn import_graph(src: &Path) -> BTreeMap<Module, BTreeSet<Module>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let modules: BTreeSet<Module> = files.iter().map(|f| module_of(src, f)).collect();
    let mut graph: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for file in &files {
        let module = module_of(src, file);
        let code = code_of(&std::fs::read_to_string(file).unwrap());
        for used in paths_in(&code, &module)
            .iter()
            .filter_map(|p| module_named(p, &modules))
        {
            if used == module || is_ancestor(&used, &module) || is_ancestor(&module, &used) {
                continue;
            }
            let common = module.iter().zip(&used).take_while(|(a, b)| a == b).count();
            graph
                .entry(module[..=common].to_vec())
                .or_default()
                .insert(used[..=common].to_vec());
        }
    }
    graph
}

/// A circle through `start`, if one exists, as the modules along it.
fn circle_through(
    graph: &BTreeMap<Module, BTreeSet<Module>>,
    start: &Module,
) -> Option<Vec<Module>> {
    let mut stack = vec![(start.clone(), vec![start.clone()])];
    let mut seen = BTreeSet::new();
    while let Some((at, path)) = stack.pop() {
        for next in graph.get(&at).into_iter().flatten() {
            if next == start {
                return Some(path);
            }
            if seen.insert(next.clone()) {
                let mut p = path.clone();
                p.push(next.clone());
                stack.push((next.clone(), p));
            }
        }
    }
    None
}

#[test]
fn no_crate_has_an_import_circle_between_its_modules() {
    let mut circles = BTreeSet::new();
    for (folder, _, _) in CRATES {
        let graph = import_graph(&crates_dir().join(folder).join("src"));
        for module in graph.keys() {
            if let Some(mut circle) = circle_through(&graph, module) {
                // One report per circle, whichever module it was found from.
                let first = circle.iter().min().cloned().unwrap();
                let at = circle.iter().position(|m| *m == first).unwrap();
                circle.rotate_left(at);
                let names: Vec<String> = circle.iter().map(|m| m.join("/")).collect();
                circles.insert(format!("{folder}: {}", names.join(" -> ")));
            }
        }
    }
    assert!(
        circles.is_empty(),
        "import circles:\n{}",
        circles.into_iter().collect::<Vec<_>>().join("\n")
    );
}

/// Core runs any `Backend`: how a model is found and loaded (candle, the panel, the
/// device) is the engine's, reached through the command line's `ModelSource`.
#[test]
fn core_names_nothing_of_the_candle_engine() {
    let src = crates_dir().join("core/src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let named: Vec<String> = files
        .iter()
        .filter(|f| {
            let text = std::fs::read_to_string(f).unwrap();
            let code = code_of(&text);
            code.contains("runner_engine::candle") || code.contains("candle_core")
        })
        .map(|f| f.strip_prefix(&src).unwrap().display().to_string())
        .collect();
    assert!(
        named.is_empty(),
        "core names the candle engine in {named:?}"
    );
}

/// The device is decided once, at load: the layers and the model files hold a kernel
/// set (`layers/kernels/`) and never ask where a tensor is; the loader chooses the set
/// (`load::kernels_for`). Only the sets' tests may name a device.
#[test]
fn layers_and_models_hold_no_device_branch() {
    let candle = crates_dir().join("engine/src/candle");
    let mut files = Vec::new();
    rust_files(&candle.join("layers"), &mut files);
    rust_files(&candle.join("models"), &mut files);
    let checks = [
        "is_cpu()",
        "is_cuda()",
        "is_metal()",
        "Device::Cpu",
        "Device::Cuda",
    ];
    let branching: Vec<String> = files
        .iter()
        .filter(|f| f.file_name().is_some_and(|n| n != "tests.rs"))
        .filter_map(|f| {
            let code = code_of(&std::fs::read_to_string(f).unwrap());
            let found: Vec<&str> = checks
                .iter()
                .copied()
                .filter(|c| code.contains(c))
                .collect();
            let name = f.strip_prefix(&candle).unwrap().display();
            (!found.is_empty()).then(|| format!("{name}: {}", found.join(", ")))
        })
        .collect();
    assert!(
        branching.is_empty(),
        "device checks in layers: {branching:?}"
    );
    // And the chooser is where it is said to be.
    let load = code_of(&std::fs::read_to_string(candle.join("load/mod.rs")).unwrap());
    assert!(load.contains("fn kernels_for") && load.contains("is_cpu()"));
}

/// The benchmark harnesses, the counting allocator and the GPU check's memory plan are
/// tools of the `runner` binary, not the engine's or the suite's interface: a library
/// user who does not ask for the `tools` feature neither compiles nor ships them. Each
/// is declared under a `cfg` naming that feature (`any(test, ...)` keeps its unit tests).
const TOOL_MODULES: &[(&str, &[&str])] = &[
    ("engine/src/lib.rs", &["alloc_count", "bench"]),
    ("engine/src/candle/mod.rs", &["bench", "memory_plan"]),
    ("creg/src/lib.rs", &["bench"]),
];

/// The `#[...]` attributes right above the item on the line `decl` of `code` (comments
/// between them skipped; a blank line ends them), or None where no line is `decl`.
fn attributes_above(code: &str, decl: &str) -> Option<Vec<String>> {
    let lines: Vec<&str> = code.lines().collect();
    let at = lines.iter().position(|l| l.trim() == decl)?;
    Some(
        lines[..at]
            .iter()
            .rev()
            .map(|l| l.trim())
            .take_while(|l| l.starts_with("#[") || l.starts_with("//"))
            .filter(|l| l.starts_with("#["))
            .map(String::from)
            .collect(),
    )
}

fn under_tools_feature(attributes: &[String]) -> bool {
    attributes
        .iter()
        .any(|a| a.starts_with("#[cfg(") && a.contains("feature = \"tools\""))
}

#[test]
fn the_tools_are_compiled_only_with_the_tools_feature() {
    let mut wrong = Vec::new();
    for (file, modules) in TOOL_MODULES {
        let path = crates_dir().join(file);
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        for module in *modules {
            match attributes_above(&text, &format!("pub mod {module};")) {
                None => wrong.push(format!("runner/{file}: no `pub mod {module};`")),
                Some(attrs) if !under_tools_feature(&attrs) => wrong.push(format!(
                    "runner/{file}: `pub mod {module};` is compiled without the tools feature"
                )),
                Some(_) => {}
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));

    // The check itself: an attribute above counts, through a doc comment; one a blank
    // line or an item away does not, nor a cfg of another feature.
    let code = "#[cfg(feature = \"fixture\")]\npub mod a;\n#[cfg(any(test, feature = \"tools\"))]\n/// Doc.\npub mod b;\n#[cfg(feature = \"tools\")]\npub mod c;\npub mod d;\n#[cfg(feature = \"tools\")]\n\npub mod e;\n";
    let tools = |m: &str| under_tools_feature(&attributes_above(code, m).unwrap());
    assert!(!tools("pub mod a;"));
    assert!(tools("pub mod b;"));
    assert!(tools("pub mod c;"));
    assert!(!tools("pub mod d;"));
    assert!(!tools("pub mod e;"));
}

#[test]
fn no_source_file_is_over_the_line_limit() {
    let mut files = Vec::new();
    rust_files(&crates_dir(), &mut files);
    let long: Vec<String> = files
        .iter()
        .filter(|f| !f.components().any(|c| c.as_os_str() == "target"))
        .filter_map(|f| {
            let n = std::fs::read_to_string(f).unwrap().lines().count();
            (n > MAX_LINES).then(|| format!("{} ({n} lines)", f.display()))
        })
        .collect();
    assert!(
        long.is_empty(),
        "over {MAX_LINES} lines:\n{}",
        long.join("\n")
    );
}

#[test]
fn the_import_scanner_sees_grouped_relative_and_inline_paths() {
    let module: Module = vec!["a".into(), "b".into()];
    let code = code_of(
        "use crate::x::{Y, z::W};\n// crate::q in a comment\nuse super::c::D;\nlet v = crate::k::f();\n#[cfg(test)]\nmod tests { use crate::t; }\n",
    );
    let paths: BTreeSet<String> = paths_in(&code, &module)
        .iter()
        .map(|p| p.join("::"))
        .collect();
    let want: BTreeSet<String> = ["x::Y", "x::z::W", "a::c::D", "k::f"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(paths, want);

    // A circle between two siblings is found; a child using its parent is not one; a
    // use between files of two folders counts between the folders.
    let m = |s: &str| -> Module { s.split('/').map(String::from).collect() };
    let graph: BTreeMap<Module, BTreeSet<Module>> = [
        (m("p/a"), [m("p/b")].into()),
        (m("p/b"), [m("p/a")].into()),
        (m("q/c"), BTreeSet::new()),
    ]
    .into();
    assert!(circle_through(&graph, &m("p/a")).is_some());
    assert!(circle_through(&graph, &m("q/c")).is_none());
}

#[test]
fn a_circle_between_two_folders_is_found_through_their_files() {
    let src = std::env::temp_dir().join(format!("creg-arch-{}", std::process::id()));
    let write = |rel: &str, text: &str| {
        let p = src.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    write("lib.rs", "pub mod x;\npub mod y;\n");
    write("x/mod.rs", "pub mod a;\npub mod c;\n");
    write("x/a.rs", "use crate::y::b::B;\nuse super::c::C;\n");
    write("x/c.rs", "pub struct C;\nuse crate::x::a;\n");
    write("y/mod.rs", "pub mod b;\n");
    write("y/b.rs", "pub struct B;\n");
    let m = |s: &str| -> Module { s.split('/').map(String::from).collect() };
    let graph = import_graph(&src);
    // x/a -> y/b counts as x -> y; x/a <-> x/c is a circle inside x.
    assert_eq!(graph[&m("x")], [m("y")].into());
    assert!(circle_through(&graph, &m("x")).is_none());
    assert!(circle_through(&graph, &m("x/a")).is_some());
    // y's file closing the circle through x.
    write("y/b.rs", "pub struct B;\nfn f() { crate::x::c::C; }\n");
    let graph = import_graph(&src);
    assert!(circle_through(&graph, &m("x")).is_some());
    std::fs::remove_dir_all(&src).ok();
}
