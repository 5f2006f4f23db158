//! Tests on real trained checkpoints and the panel's real tokenizers, which
//! scripts/real-models brings from the package registries: SmolLM2-135M-Instruct (the
//! Llama architecture, a chat model) and Gemma 3 270M (a base model), as folders written
//! by transformers 5, Qwen2.5-Coder-0.5B-Instruct (qwen2) as a GGUF file and the folder
//! transformers 5 dequantized from it (and, by scripts/real-qwen-1.5b, the 1.5B at the
//! panel's shape), and the Llama 3.1, Gemma 3 and Qwen2.5 tokenizers.
//!
//! They find the files in CREG_REAL_MODELS, else in target/real-models. Without them
//! each test says so and passes, unless CREG_REAL_MODELS_REQUIRED=1 (scripts/test sets
//! it, after running scripts/real-models), where a missing file fails the test.
//! `cargo test` leaves this target out (its `test = false`): scripts/test runs it.

mod agreement;
#[path = "../support/cgroup.rs"]
mod cgroup;
mod gguf;
mod gguf_tokenizer;
mod invariance;
mod memory;
mod parity;
mod qwen2_gguf;
mod resume;
mod smoke;
mod tokenizers;

use runner_engine::candle::load::hub::ModelFiles;
use runner_engine::candle::weights::{DTypeChoice, LoadOptions};
use runner_engine::candle::Engine;
use serde::Deserialize;
use std::path::{Path, PathBuf};

pub const SMOLLM2: &str = "smollm2-135m-instruct";
pub const GEMMA3: &str = "gemma-3-270m";
/// Qwen2.5-Coder-0.5B-Instruct: the qwen2 architecture, in CI.
pub const QWEN2_5: &str = "qwen2.5-coder-0.5b";
/// Qwen2.5-Coder-1.5B-Instruct, at the panel's `qwen2.5-1.5b` shape: only
/// `scripts/real-models --qwen2.5-1.5b` brings it (CI does not), so its tests skip
/// without it even where the others are required; scripts/real-qwen-1.5b runs them.
pub const QWEN2_5_1_5B: &str = "qwen2.5-coder-1.5b";

/// The folder scripts/real-models wrote.
pub fn real_models_dir() -> PathBuf {
    std::env::var_os("CREG_REAL_MODELS").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/real-models"),
        PathBuf::from,
    )
}

/// `name` under the real-models folder, or `None` (with a message) when it is missing
/// and not required.
#[track_caller]
pub fn real(name: &str) -> Option<PathBuf> {
    let path = real_models_dir().join(name);
    if path.exists() {
        return Some(path);
    }
    let by_script = name.contains(QWEN2_5_1_5B);
    let required = !by_script && std::env::var("CREG_REAL_MODELS_REQUIRED").is_ok_and(|v| v == "1");
    assert!(
        !required,
        "{} is missing (CREG_REAL_MODELS_REQUIRED=1): run `bash scripts/real-models`",
        path.display()
    );
    eprintln!(
        "skipped: {} is missing; run `bash scripts/real-models` to test on real checkpoints",
        path.display()
    );
    None
}

pub fn runner_exe() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_runner"))
}

/// An absent scratch folder for one test of this process.
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("real-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

/// A real model on the CPU in `dtype` (and `quantization`).
pub fn load(dir: &Path, dtype: DTypeChoice, quantization: Option<&str>) -> Engine {
    let options = LoadOptions {
        dtype,
        quantization: quantization.map(|q| q.parse().unwrap()),
        ..Default::default()
    };
    let label = dir.file_name().unwrap().to_string_lossy().into_owned();
    Engine::load_with(
        &ModelFiles::from_dir(dir).unwrap(),
        candle_core::Device::Cpu,
        &label,
        options,
    )
    .unwrap_or_else(|e| panic!("loading {}: {e}", dir.display()))
}

/// transformers' greedy decoding of real CREG prompts (scripts/real_parity.py).
#[derive(Deserialize)]
pub struct Reference {
    pub weights_sha256: String,
    pub prompt_format: String,
    pub new_tokens: usize,
    pub cases: Vec<Case>,
}

#[derive(Deserialize)]
pub struct Case {
    pub name: String,
    pub task: Option<String>,
    #[serde(default)]
    pub condition: Option<String>,
    pub user: String,
    pub prompt_ids: Vec<u32>,
    pub greedy: Vec<u32>,
    pub gaps: Vec<f32>,
}

impl Case {
    /// On the diagonal CI decodes: the i-th task under the i-th principal condition
    /// (scripts/real_parity.py's `--cases ci`), every task and every condition once each.
    pub fn on_the_diagonal(&self) -> bool {
        const TASKS: [&str; 4] = ["belief", "contradiction", "action", "explanation"];
        const CONDITIONS: [&str; 4] = [
            "full_graph",
            "graph_without_relations",
            "canonical_json",
            "structured_list",
        ];
        let at = |all: &[&str], v: &Option<String>| {
            v.as_deref().and_then(|v| all.iter().position(|&a| a == v))
        };
        let task = at(&TASKS, &self.task);
        task.is_some() && task == at(&CONDITIONS, &self.condition)
    }

    pub fn prompt(&self) -> runner_engine::Prompt {
        runner_engine::Prompt::Chat(vec![runner_engine::Message {
            role: runner_engine::Role::User,
            content: self.user.clone(),
        }])
    }
}

pub fn reference(model: &str) -> Reference {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/data/real/{model}.json"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (scripts/real_parity.py writes it)", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}
