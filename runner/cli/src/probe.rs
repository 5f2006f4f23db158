//! `runner probe ...`: generate, check, summarise and score the Probe diagnostic.

use anyhow::{Context, Result};
use clap::Subcommand;
use probe::baseline::System;
use probe::checker::{check_pit, check_probe, Stats};
use probe::generator::{generate_pit, generate_probe, to_json};
use probe::load::{load_any, ProbeFile};
use probe::provenance::provenance;
use probe::render::{pit_prompts, probe_prompts};
use probe::score::responses::{pair_pit, pair_probe};
use probe::score::{compare_probe, score_pit, score_probe};
use runner_engine::digest::sha256_hex;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(Subcommand, Debug)]
pub enum ProbeCommand {
    /// Write probe.json and probe_pit.json from the project's own templates.
    Generate {
        /// Output folder.
        #[arg(long, default_value = "outputs/probe")]
        out: PathBuf,
    },
    /// Check files (probe.json or probe_pit.json, told apart by their ids).
    Check {
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
    /// Print counts per design axis of a file.
    Stats { file: PathBuf },
    /// Score a baseline system and print the score table (markdown).
    Baseline {
        #[arg(long)]
        system: System,
        /// A probe.json or probe_pit.json; without it, the freshly generated pair.
        file: Option<PathBuf>,
        /// Print the report as JSON instead of markdown.
        #[arg(long)]
        json: bool,
    },
    /// Score a system's responses (JSON lines; see `scoring::responses`) on a file.
    Score {
        /// The probe.json or probe_pit.json the responses answer.
        file: PathBuf,
        #[arg(long)]
        responses: PathBuf,
        /// Name of the system in the report.
        #[arg(long, default_value = "system")]
        system: String,
        /// Print the report as JSON instead of markdown.
        #[arg(long)]
        json: bool,
    },
    /// Print the prompts of a file as JSON lines (`id`, `text`).
    Prompts { file: PathBuf },
    /// Compare two baseline systems on the same items (paired bootstrap, McNemar).
    Compare {
        #[arg(long)]
        a: System,
        #[arg(long)]
        b: System,
        /// A probe.json; without it, the freshly generated one.
        file: Option<PathBuf>,
    },
}

pub fn run(cmd: ProbeCommand) -> Result<ExitCode> {
    match cmd {
        ProbeCommand::Generate { out } => generate(&out),
        ProbeCommand::Check { files } => check(&files),
        ProbeCommand::Stats { file } => stats(&file),
        ProbeCommand::Baseline { system, file, json } => baseline(system, file, json),
        ProbeCommand::Compare { a, b, file } => compare(a, b, file),
        ProbeCommand::Score {
            file,
            responses,
            system,
            json,
        } => score(&file, &responses, &system, json),
        ProbeCommand::Prompts { file } => prompts(&file),
    }
}

fn generate(out: &std::path::Path) -> Result<ExitCode> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let files = [
        ("probe.json", to_json(&generate_probe())),
        ("probe_pit.json", to_json(&generate_pit())),
    ];
    let mut sums = String::new();
    for (name, body) in &files {
        let path = out.join(name);
        std::fs::write(&path, body).with_context(|| format!("writing {}", path.display()))?;
        sums.push_str(&format!("{}  {name}\n", sha256_hex(body.as_bytes())));
        println!("wrote {}", path.display());
    }
    std::fs::write(out.join("SHA256SUMS"), &sums)?;
    print!("{sums}");
    Ok(ExitCode::SUCCESS)
}

fn check(files: &[PathBuf]) -> Result<ExitCode> {
    let mut failed = false;
    for path in files {
        let findings = match load_any(path)? {
            ProbeFile::Probe(items) => check_probe(&items),
            ProbeFile::Pit(items) => check_pit(&items),
        };
        if findings.is_empty() {
            println!("{}: ok", path.display());
        } else {
            failed = true;
            for f in &findings {
                eprintln!("{}: {f}", path.display());
            }
            eprintln!("{}: {} problem(s)", path.display(), findings.len());
        }
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

fn stats(path: &std::path::Path) -> Result<ExitCode> {
    use std::fmt::Write;
    let mut out = String::new();
    match load_any(path)? {
        ProbeFile::Probe(items) => {
            let s = Stats::of(&items);
            writeln!(out, "| axis | value | items |\n| --- | --- | --- |")?;
            let axes = [
                ("hop_depth", &s.hop_depth),
                ("contradicted", &s.contradicted),
                ("axis", &s.axis),
                ("density", &s.density),
                ("confidence", &s.confidence),
                ("domain", &s.domain),
                ("gold_axis", &s.gold_axis),
                ("sessions", &s.sessions),
            ];
            for (axis, table) in axes {
                for (value, n) in table {
                    writeln!(out, "| {axis} | {value} | {n} |")?;
                }
            }
            writeln!(out, "| gold_post | unknown | {} |", s.gold_post_unknown)?;
            writeln!(out, "| all | | {} |", s.items)?;
        }
        ProbeFile::Pit(items) => {
            writeln!(
                out,
                "| pit_id | domain | scenario | density | sessions | queries |\n| --- | --- | --- | --- | --- | --- |"
            )?;
            for i in &items {
                writeln!(
                    out,
                    "| {} | {} | {} | {} | {} | {} |",
                    i.pit_id,
                    i.domain,
                    i.scenario,
                    i.density,
                    i.sessions.len(),
                    i.queries.len()
                )?;
            }
        }
    }
    emit(&out)
}

fn baseline(system: System, file: Option<PathBuf>, json: bool) -> Result<ExitCode> {
    let set = match &file {
        Some(path) => {
            let bytes = probe::load::read(path)?;
            let sha = sha256_hex(&bytes);
            provenance(false, Some(&sha), &path.display().to_string())
        }
        None => provenance(true, None, "probe.json and probe_pit.json"),
    };
    let files = match file {
        Some(path) => vec![load_any(&path)?],
        None => vec![
            ProbeFile::Probe(generate_probe()),
            ProbeFile::Pit(generate_pit()),
        ],
    };
    let mut reports = Vec::new();
    let mut text = format!("Set: {}.\n\n", set.description);
    for f in files {
        match f {
            ProbeFile::Probe(items) => {
                let responses: Vec<_> = items.iter().map(|i| system.answer_probe(i)).collect();
                let pairs: Vec<_> = items.iter().zip(&responses).collect();
                let r = score_probe(system.name(), &pairs);
                text.push_str(&r.to_markdown());
                reports.push(("probe", serde_json::to_value(&r)?));
            }
            ProbeFile::Pit(items) => {
                let responses: Vec<_> = items.iter().map(|i| system.answer_pit(i)).collect();
                let pairs: Vec<_> = items.iter().zip(&responses).collect();
                let r = score_pit(system.name(), &pairs);
                text.push_str(&r.to_markdown());
                reports.push(("pit", serde_json::to_value(&r)?));
            }
        }
        text.push('\n');
    }
    if json {
        let mut obj = serde_json::Map::new();
        obj.insert("system".into(), system.name().into());
        obj.insert("set".into(), serde_json::to_value(&set)?);
        for (k, v) in reports {
            obj.insert(k.into(), v);
        }
        text = serde_json::to_string_pretty(&obj)? + "\n";
    }
    emit(&text)
}

fn score(file: &Path, responses: &Path, system: &str, json: bool) -> Result<ExitCode> {
    let text = std::fs::read_to_string(responses)
        .with_context(|| format!("reading {}", responses.display()))?;
    let name = responses.display().to_string();
    let bytes = probe::load::read(file)?;
    let set = provenance(
        false,
        Some(&sha256_hex(&bytes)),
        &file.display().to_string(),
    );
    let (markdown, mut value) = match load_any(file)? {
        ProbeFile::Probe(items) => {
            let pairs = pair_probe(&items, &text, &name)?;
            let refs: Vec<_> = pairs.iter().map(|(i, r)| (*i, r)).collect();
            let r = score_probe(system, &refs);
            (r.to_markdown(), serde_json::to_value(&r)?)
        }
        ProbeFile::Pit(items) => {
            let pairs = pair_pit(&items, &text, &name)?;
            let refs: Vec<_> = pairs.iter().map(|(i, r)| (*i, r)).collect();
            let r = score_pit(system, &refs);
            (r.to_markdown(), serde_json::to_value(&r)?)
        }
    };
    if let Some(obj) = value.as_object_mut() {
        obj.insert("set".into(), serde_json::to_value(&set)?);
    }
    if json {
        emit(&(serde_json::to_string_pretty(&value)? + "\n"))
    } else {
        emit(&format!("Set: {}.\n\n{markdown}", set.description))
    }
}

fn prompts(file: &Path) -> Result<ExitCode> {
    let list = match load_any(file)? {
        ProbeFile::Probe(items) => items.iter().flat_map(probe_prompts).collect::<Vec<_>>(),
        ProbeFile::Pit(items) => items.iter().flat_map(pit_prompts).collect(),
    };
    let mut out = String::new();
    for p in &list {
        out.push_str(&serde_json::to_string(p)?);
        out.push('\n');
    }
    emit(&out)
}

fn compare(a: System, b: System, file: Option<PathBuf>) -> Result<ExitCode> {
    let items = match file {
        Some(path) => match load_any(&path)? {
            ProbeFile::Probe(items) => items,
            ProbeFile::Pit(_) => anyhow::bail!("{}: compare takes a probe.json", path.display()),
        },
        None => generate_probe(),
    };
    let ra: Vec<_> = items.iter().map(|i| a.answer_probe(i)).collect();
    let rb: Vec<_> = items.iter().map(|i| b.answer_probe(i)).collect();
    let pa: Vec<_> = items.iter().zip(&ra).collect();
    let pb: Vec<_> = items.iter().zip(&rb).collect();
    emit(&compare_probe((a.name(), &pa), (b.name(), &pb)).to_markdown())
}

/// Write to stdout; a closed pipe (`| head`) is a normal end, not an error.
fn emit(text: &str) -> Result<ExitCode> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(ExitCode::SUCCESS),
    }
}
