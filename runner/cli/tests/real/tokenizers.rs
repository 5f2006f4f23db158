//! The panel's real tokenizers (Llama 3.1, Gemma 3, and Qwen2.5's from the real
//! Qwen2.5-Coder-0.5B checkpoint) through the panel's chat templates: the runner's token ids for
//! every prompt of the four principal conditions and four tasks (8,800 per model) equal
//! transformers' (scripts/real_tokenizers.py), compared by each prompt's length and a
//! digest over each file's ids. It prints the prompt lengths per model and condition.

use crate::{real, real_models_dir};
use creg::frozen;
use creg::render::manifest::render_file;
use creg::render::{Condition, Renderer, Task};
use rayon::prelude::*;
use runner_engine::candle::load::encoder::PromptEncoder;
use runner_engine::candle::load::hub::ModelFiles;
use runner_engine::candle::memory_plan::QWEN2_5_LONGEST_PRINCIPAL_PROMPT;
use runner_engine::digest::sha256_hex;
use runner_engine::{Message, Prompt, Role};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

#[derive(Deserialize)]
struct Reference {
    panel: BTreeMap<String, PanelTokenizer>,
    files: BTreeMap<String, BTreeMap<String, File>>,
}

#[derive(Deserialize)]
struct PanelTokenizer {
    models: Vec<String>,
    tokenizer: String,
    template: String,
}

#[derive(Deserialize)]
struct File {
    count: usize,
    lengths: Vec<usize>,
    sha256: String,
}

/// The prompt encoder the engine loads, on a tokenizer folder and a template file.
fn encoder(tokenizer_dir: &Path, template: &Path) -> PromptEncoder {
    let tokenizer_config = tokenizer_dir.join("tokenizer_config.json");
    let files = ModelFiles {
        config: tokenizer_config.clone(),
        generation_config: None,
        tokenizer: tokenizer_dir.join("tokenizer.json"),
        tokenizer_config,
        weights: Vec::new(),
        revision: None,
        chat_template: Some(template.to_path_buf()),
        verified: None,
    };
    PromptEncoder::load(&files).unwrap()
}

fn percentile(sorted: &[usize], p: f64) -> usize {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

#[test]
fn the_panels_real_tokenizers_encode_every_principal_prompt_as_transformers_does() {
    let (Some(_), Some(_)) = (real("tokenizers"), real(crate::QWEN2_5)) else {
        return;
    };
    // Each panel tokenizer's folder, relative to the real-models folder.
    let dir = real_models_dir();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/real/tokenizers.json");
    let reference: Reference =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let templates =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../engine/src/candle/chat_template/templates");
    let suite = frozen::frozen_suite().unwrap();
    let renderer = Renderer::frozen().unwrap();
    let conditions: Vec<Condition> = Condition::ALL
        .into_iter()
        .filter(|c| c.is_principal())
        .collect();
    let mut failures = Vec::new();
    println!("| panel model | condition | prompts | mean tokens | p95 | max |");
    println!("| --- | --- | ---: | ---: | ---: | ---: |");
    for (name, panel) in &reference.panel {
        let enc = encoder(
            &dir.join(&panel.tokenizer),
            &templates.join(&panel.template),
        );
        let want = &reference.files[name];
        let mut by_condition: BTreeMap<String, Vec<usize>> = BTreeMap::new();
        for task in Task::ALL {
            for &c in &conditions {
                let key = format!("{task}/{c}");
                let file = render_file(&renderer, &suite, c, task);
                let lines: Vec<&str> = file.jsonl.lines().collect();
                // Encoded on every core, collected in order.
                let encoded: Vec<Vec<u32>> = lines
                    .par_iter()
                    .map(|line| {
                        let row: serde_json::Value = serde_json::from_str(line).unwrap();
                        let prompt = Prompt::Chat(vec![Message {
                            role: Role::User,
                            content: row["text"].as_str().unwrap().to_string(),
                        }]);
                        enc.encode(&prompt).unwrap()
                    })
                    .collect();
                let mut bytes = Vec::new();
                let mut lengths = Vec::new();
                for ids in &encoded {
                    bytes.extend((ids.len() as u32).to_le_bytes());
                    bytes.extend(ids.iter().flat_map(|i| i.to_le_bytes()));
                    lengths.push(ids.len());
                }
                let w = &want[&key];
                if lengths.len() != w.count {
                    failures.push(format!(
                        "{name} {key}: {} prompts, transformers {}",
                        lengths.len(),
                        w.count
                    ));
                } else if let Some(i) = (0..lengths.len()).find(|&i| lengths[i] != w.lengths[i]) {
                    failures.push(format!(
                        "{name} {key}: prompt {i} takes {} tokens, transformers {}",
                        lengths[i], w.lengths[i]
                    ));
                } else if sha256_hex(&bytes) != w.sha256 {
                    failures.push(format!("{name} {key}: same lengths, other ids"));
                }
                by_condition
                    .entry(c.to_string())
                    .or_default()
                    .extend(lengths);
            }
        }
        if name == "qwen2.5" {
            let longest = by_condition.values().flatten().max().copied();
            assert_eq!(
                longest,
                Some(QWEN2_5_LONGEST_PRINCIPAL_PROMPT),
                "the memory plan's principal prompt is Qwen2.5's longest in real tokens"
            );
        }
        for (c, mut lengths) in by_condition {
            lengths.sort_unstable();
            let mean = lengths.iter().sum::<usize>() as f64 / lengths.len() as f64;
            println!(
                "| {} | {c} | {} | {mean:.0} | {} | {} |",
                panel.models.join(", "),
                lengths.len(),
                percentile(&lengths, 0.95),
                lengths.last().unwrap()
            );
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
