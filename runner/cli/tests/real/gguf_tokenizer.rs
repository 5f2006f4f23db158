//! The tokenizers the runner builds from the two real GGUF files' metadata (SmolLM2-135M-
//! Instruct's byte-level BPE, Gemma 3 270M's SentencePiece) encode every prompt of the
//! four principal conditions and four tasks (8,800 per model, each through the file's chat
//! template, or the panel's Gemma 3 template where the file has none) and a set of awkward
//! strings as transformers' GGUF tokenizer does (scripts/gguf_tokenizer_ids.py), compared by
//! each prompt's length and a digest over each file's ids; the awkward strings also encode
//! as the model's own tokenizer.json does.

use crate::{real, GEMMA3, SMOLLM2};
use creg::frozen;
use creg::render::manifest::render_file;
use creg::render::{Condition, Renderer, Task};
use rayon::prelude::*;
use runner_engine::candle::chat_template::ChatTemplate;
use runner_engine::candle::load::gguf_tokenizer::chat_from_gguf_file;
use runner_engine::digest::sha256_hex;
use runner_engine::{Message, Role};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::Path;

#[derive(Deserialize)]
struct Reference {
    awkward: Vec<String>,
    models: BTreeMap<String, Model>,
}

#[derive(Deserialize)]
struct Model {
    /// The panel's template, where the file has none.
    template: Option<String>,
    bos: Option<u32>,
    eos: Option<u32>,
    add_bos: bool,
    files: BTreeMap<String, File>,
    awkward_ids: Vec<Vec<u32>>,
}

#[derive(Deserialize)]
struct File {
    count: usize,
    lengths: Vec<usize>,
    sha256: String,
}

/// The safetensors folder of the model a GGUF file was made from.
fn twin(gguf: &str) -> &'static str {
    if gguf.starts_with("SmolLM2") {
        SMOLLM2
    } else {
        GEMMA3
    }
}

#[test]
fn the_real_gguf_files_tokenizers_encode_every_principal_prompt_as_transformers_does() {
    let Some(dir) = real("gguf") else {
        return;
    };
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let path = manifest.join("tests/data/real/gguf_tokenizer.json");
    let reference: Reference =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let templates = manifest.join("../engine/src/candle/chat_template/templates");
    let suite = frozen::frozen_suite().unwrap();
    let renderer = Renderer::frozen().unwrap();
    let conditions: Vec<Condition> = Condition::ALL
        .into_iter()
        .filter(|c| c.is_principal())
        .collect();
    let mut failures = Vec::new();
    for (name, model) in &reference.models {
        let chat = chat_from_gguf_file(&dir.join(name)).unwrap();
        assert_eq!(chat.bos, model.bos, "{name}: BOS");
        assert_eq!(chat.eos.first().copied(), model.eos, "{name}: EOS");
        assert_eq!(chat.add_bos, model.add_bos, "{name}: add_bos");
        let template = match &model.template {
            Some(file) => {
                assert!(chat.chat_template.is_none(), "{name} has a template now");
                let text = |id: Option<u32>| id.and_then(|i| chat.tokenizer.id_to_token(i));
                let source = std::fs::read_to_string(templates.join(file)).unwrap();
                ChatTemplate::new(source, text(chat.bos), text(chat.eos.first().copied()))
            }
            None => chat.template().expect("the file's chat template"),
        };
        let (mut prompts, mut tokens) = (0, 0);
        // CI compares one condition's four files per model (2,200 prompts); all sixteen
        // with CREG_REAL_GGUF_TOKENIZER_ALL=1.
        let every = std::env::var_os("CREG_REAL_GGUF_TOKENIZER_ALL").is_some();
        let compared: &[Condition] = if every { &conditions } else { &conditions[..1] };
        for task in Task::ALL {
            for &c in compared {
                let key = format!("{task}/{c}");
                let file = render_file(&renderer, &suite, c, task);
                let lines: Vec<&str> = file.jsonl.lines().collect();
                // Encoded on every core, collected in order.
                let encoded: Vec<Vec<u32>> = lines
                    .par_iter()
                    .map(|line| {
                        let row: serde_json::Value = serde_json::from_str(line).unwrap();
                        let text = template
                            .render(&[Message {
                                role: Role::User,
                                content: row["text"].as_str().unwrap().to_string(),
                            }])
                            .unwrap();
                        let enc = chat.tokenizer.encode(text, false).unwrap();
                        enc.get_ids().to_vec()
                    })
                    .collect();
                let mut bytes = Vec::new();
                let mut lengths = Vec::new();
                for ids in &encoded {
                    bytes.extend((ids.len() as u32).to_le_bytes());
                    bytes.extend(ids.iter().flat_map(|i| i.to_le_bytes()));
                    lengths.push(ids.len());
                }
                prompts += lengths.len();
                tokens += lengths.iter().sum::<usize>();
                let w = &model.files[&key];
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
            }
        }
        println!("{name}: {prompts} prompts, {tokens} tokens compared");
        let own = real(&format!("{}/tokenizer.json", twin(name)))
            .map(|p| tokenizers::Tokenizer::from_file(p).unwrap());
        for (text, want) in reference.awkward.iter().zip(&model.awkward_ids) {
            let got = chat.tokenizer.encode(text.as_str(), false).unwrap();
            if got.get_ids() != want.as_slice() {
                failures.push(format!(
                    "{name} {text:?}: {:?}, transformers {want:?}",
                    got.get_ids()
                ));
            }
            if let Some(own) = &own {
                let theirs = own.encode(text.as_str(), false).unwrap();
                if theirs.get_ids() != got.get_ids() {
                    failures.push(format!(
                        "{name} {text:?}: {:?}, its tokenizer.json {:?}",
                        got.get_ids(),
                        theirs.get_ids()
                    ));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
