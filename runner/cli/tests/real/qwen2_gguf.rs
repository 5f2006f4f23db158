//! The real Qwen2.5 checkpoint scripts/real-models brings (Qwen2.5-Coder-0.5B-Instruct,
//! a qwen2 GGUF of Q5_0, Q8_0, Q6_K and Q4_K blocks): `runner generate` takes the file
//! as its model (hyper-parameters, q/k/v biases, tokenizer, template and end tokens from
//! the metadata) and answers; the tokenizer the runner builds from the file's metadata,
//! through the file's own chat template, encodes real CREG prompts as the tokenizer.json
//! transformers 5 rebuilt from the same file (the converted folder's) does.

use crate::{real, runner_exe, QWEN2_5};
use creg::frozen;
use creg::render::manifest::render_file;
use creg::render::{Condition, Renderer, Task};
use rayon::prelude::*;
use runner_engine::candle::load::gguf_tokenizer::chat_from_gguf_file;
use runner_engine::{Message, Role};

const QWEN2_5_GGUF: &str = "gguf/qwen2.5-coder-0.5b-instruct-awq.gguf";

#[test]
fn runner_generate_takes_the_qwen2_gguf_file_and_answers() {
    let Some(file) = real(QWEN2_5_GGUF) else {
        return;
    };
    let o = std::process::Command::new(runner_exe())
        .args(["generate", "--greedy", "--max-new-tokens", "8"])
        .args([
            "--prompt",
            "What is the capital of France? Answer in one word.",
        ])
        .arg("--model")
        .arg(&file)
        .output()
        .unwrap();
    let v = crate::gguf::generated(&o);
    let engine = v["engine"].as_str().unwrap();
    assert!(engine.contains("Q4_K") && engine.contains("Q5_0"), "{v}");
    assert_eq!(v["text"].as_str().unwrap().trim(), "Paris", "{v}");
    assert_eq!(v["finish_reason"], "stop", "{v}");
}

#[test]
fn the_qwen2_gguf_tokenizer_encodes_real_creg_prompts_as_transformers_rebuilt_one() {
    let (Some(file), Some(folder)) = (real(QWEN2_5_GGUF), real(QWEN2_5)) else {
        return;
    };
    let chat = chat_from_gguf_file(&file).unwrap();
    // Qwen2.5: no BOS in front of a prompt, <|im_end|> ends a turn.
    assert!(!chat.add_bos);
    let end = chat
        .eos
        .first()
        .and_then(|&i| chat.tokenizer.id_to_token(i));
    assert_eq!(end.as_deref(), Some("<|im_end|>"));
    let template = chat.template().expect("the file's chat template");
    let theirs = tokenizers::Tokenizer::from_file(folder.join("tokenizer.json")).unwrap();
    let suite = frozen::frozen_suite().unwrap();
    let renderer = Renderer::frozen().unwrap();
    let mut compared = 0;
    for task in Task::ALL {
        let file = render_file(&renderer, &suite, Condition::ALL[0], task);
        // Every 5th prompt of each task: 440 prompts of 1,000-2,500 tokens.
        let lines: Vec<&str> = file.jsonl.lines().step_by(5).collect();
        let differ: Vec<String> = lines
            .par_iter()
            .filter_map(|line| {
                let row: serde_json::Value = serde_json::from_str(line).unwrap();
                let text = template
                    .render(&[Message {
                        role: Role::User,
                        content: row["text"].as_str().unwrap().to_string(),
                    }])
                    .unwrap();
                let ours = chat.tokenizer.encode(text.as_str(), false).unwrap();
                let want = theirs.encode(text.as_str(), false).unwrap();
                (ours.get_ids() != want.get_ids()).then(|| {
                    format!(
                        "{task} {}: {} ids, transformers' {}",
                        row["scenario"],
                        ours.get_ids().len(),
                        want.get_ids().len()
                    )
                })
            })
            .collect();
        assert!(differ.is_empty(), "{}", differ.join("\n"));
        compared += lines.len();
    }
    println!(
        "{QWEN2_5} GGUF tokenizer: {compared} prompts encode as transformers' rebuilt tokenizer"
    );
    assert!(compared >= 400);
}
