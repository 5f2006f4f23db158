//! The memory a GPU check needs, step by step, computed rather than allocated: the
//! weights, the KV cache at each step's peak (the joins' overlap and the bench's copy
//! included) and the activations of the largest forward pass, against the device's
//! memory. A device lent for minutes cannot afford to learn this by running out;
//! `runner bench --memory-plan` prints it, and `scripts/gpu-check` runs that first
//! (on the CPU too, with `--rehearse`). The figures come from the functions the engine
//! itself sizes its batches with.

use crate::candle::layers::kernels::gpu::GPU_SCORE_BUDGET;
use crate::candle::runtime::device::{gpu_kv_budget, row_limit};
use crate::candle::runtime::kv_cache::join_peak_bytes;
use crate::candle::runtime::scheduler::{BatchLimits, ROW_CAP};

/// What a model's memory depends on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelShape {
    pub name: &'static str,
    pub layers: usize,
    pub hidden: usize,
    pub intermediate: usize,
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
    pub vocab: usize,
    /// Weights, embeddings and output head included.
    pub params: u64,
}

impl ModelShape {
    /// Qwen2.5-7B (and the `qwen7b-shape` fixture the GPU check writes): 28 layers of
    /// 3,584, 4 KV heads, a vocabulary of 152,064 and an untied head.
    pub const QWEN2_5_7B: ModelShape = ModelShape {
        name: "Qwen2.5-7B",
        layers: 28,
        hidden: 3584,
        intermediate: 18944,
        heads: 28,
        kv_heads: 4,
        head_dim: 128,
        vocab: 152_064,
        params: 7_615_616_512,
    };

    /// Keys and values of one token in every layer.
    pub fn kv_bytes_per_token(&self, dtype_bytes: usize) -> usize {
        self.layers * 2 * self.kv_heads * self.head_dim * dtype_bytes
    }

    pub fn weight_bytes(&self, dtype_bytes: usize) -> u64 {
        self.params * dtype_bytes as u64
    }

    /// The most bytes one forward pass holds beside the weights and the cache: `rows`
    /// rows of `new` tokens attending over `slots` slots. One layer's intermediates are
    /// alive at a time (the residual stream, q/k/v and their rotated copies, the
    /// attention scores in f32 with their softmax and its copy, at most the score
    /// budget a block may hold, the gated MLP), then the last tokens' logits, in the
    /// model's dtype and in f32.
    pub fn forward_bytes(&self, rows: usize, new: usize, slots: usize, dtype_bytes: usize) -> u64 {
        let t = (rows * new) as u64;
        let b = dtype_bytes as u64;
        let (h, i) = (self.hidden as u64, self.intermediate as u64);
        let kv = (self.kv_heads * self.head_dim) as u64;
        let residual = 3 * t * h * b;
        let qkv = 2 * t * (h + 2 * kv) * b;
        let scores = ((rows * self.heads * new) as u64 * slots as u64).min(GPU_SCORE_BUDGET as u64);
        let attention = scores * (4 + 4 + b) + t * h * b;
        let mlp = t * (3 * i + h) * b;
        let logits = rows as u64 * self.vocab as u64 * (b + 4);
        residual + qkv + attention.max(mlp) + logits
    }
}

/// A device's memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceMemory {
    pub name: &'static str,
    pub bytes: u64,
}

impl DeviceMemory {
    /// One NVIDIA H200 as lent, counted low: 139 GB (its 141 GB less what the driver
    /// keeps).
    pub const H200: DeviceMemory = DeviceMemory {
        name: "H200",
        bytes: 139_000_000_000,
    };
}

/// What CUDA itself holds on the device: the context, the kernels' modules and
/// cuBLAS's workspace.
pub const CUDA_OVERHEAD: u64 = 1 << 30;

/// The KV bytes a `runner bench` pass over `rows` prompts of `prompt` tokens and `new`
/// new tokens holds at its peak (see [`crate::candle::Engine::bench_run`]): the prefill
/// groups' caches joined into one (freed layer by layer as they are copied), that cache
/// regrown layer by layer to hold the new tokens, then the select of every other row
/// measured on a copy while the cache itself stays for the whole-buffer variant.
pub fn bench_kv_peak(
    rows: usize,
    prompt: usize,
    new: usize,
    kv_per_token: usize,
    layers: usize,
) -> u64 {
    let prefilled = (rows * prompt * kv_per_token) as u64;
    let decoding = (rows * (prompt + new) * kv_per_token) as u64;
    let layers = layers.max(1) as u64;
    let join = join_peak_bytes(prefilled as usize, 0, prefilled as usize, layers as usize) as u64;
    let regrow = prefilled + decoding / layers;
    let half = (rows.div_ceil(2) * (prompt + new) * kv_per_token) as u64;
    join.max(regrow).max(decoding + half)
}

/// The rows `runner bench --batch 0` runs: the most whose [`bench_kv_peak`] fits the KV
/// budget, within `max_rows`. The engine's own row limit counts the decoding cache
/// alone; the bench's copy for the select measurement needs half as much again.
pub fn bench_row_limit(
    budget: usize,
    kv_per_token: usize,
    prompt: usize,
    new: usize,
    layers: usize,
    max_rows: usize,
) -> usize {
    let mut rows = row_limit(budget, kv_per_token, prompt + new).min(max_rows);
    while rows > 1 && bench_kv_peak(rows, prompt, new, kv_per_token, layers) > budget as u64 {
        rows -= 1;
    }
    rows
}

/// The longest prompt of the four principal conditions in Qwen2.5's real tokens, its
/// chat template included (2,114 on average, 2,464 at the 95th percentile): the panel
/// model the plan is made for. `tests/real/tokenizers.rs` measures it on the real
/// tokenizer and holds this figure to it; docs/real-models.md tabulates every panel
/// model's.
pub const QWEN2_5_LONGEST_PRINCIPAL_PROMPT: usize = 2541;

/// The GPU check's workload, as `scripts/gpu-check` runs it on a GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckWorkload {
    pub prompt_tokens: usize,
    pub new_tokens: usize,
    pub batches: Vec<usize>,
    pub mixed_rows: usize,
    /// The mixed workload's longest prompt (its prompts are 40 to 400 words) and cap.
    pub mixed_prompt: usize,
    pub mixed_cap: usize,
    /// The principal run: its longest rendered prompt and its new tokens.
    pub run_prompt: usize,
    pub run_new_tokens: usize,
}

impl CheckWorkload {
    pub fn gpu_check() -> Self {
        CheckWorkload {
            prompt_tokens: 1500,
            new_tokens: 128,
            batches: vec![1, 32, 128, 0],
            mixed_rows: 128,
            mixed_prompt: 640,
            mixed_cap: 512,
            run_prompt: QWEN2_5_LONGEST_PRINCIPAL_PROMPT,
            run_new_tokens: 256,
        }
    }
}

/// One step's peak.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepPeak {
    pub step: String,
    pub rows: usize,
    pub weights: u64,
    pub kv: u64,
    pub activations: u64,
}

impl StepPeak {
    pub fn total(&self) -> u64 {
        CUDA_OVERHEAD + self.weights + self.kv + self.activations
    }
}

/// Every step's peak on a device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryPlan {
    pub device: DeviceMemory,
    pub model: ModelShape,
    pub kv_budget: u64,
    pub steps: Vec<StepPeak>,
}

impl MemoryPlan {
    /// The steps whose peak exceeds the device's memory.
    pub fn overflows(&self) -> Vec<&StepPeak> {
        self.steps
            .iter()
            .filter(|s| s.total() > self.device.bytes)
            .collect()
    }

    /// A Markdown table, one line per step.
    pub fn table(&self) -> String {
        let gb = |b: u64| format!("{:.1}", b as f64 / 1e9);
        let mut out = format!(
            "Memory plan: {} in bf16 on one {} ({} GB; KV budget {} GB)\n\n\
             | step | rows | weights GB | KV peak GB | activations GB | total GB | fits |\n\
             |---|---|---|---|---|---|---|\n",
            self.model.name,
            self.device.name,
            gb(self.device.bytes),
            gb(self.kv_budget)
        );
        for s in &self.steps {
            let fits = if s.total() <= self.device.bytes {
                "yes"
            } else {
                "NO"
            };
            out += &format!(
                "| {} | {} | {} | {} | {} | {} | {fits} |\n",
                s.step,
                s.rows,
                gb(s.weights),
                gb(s.kv),
                gb(s.activations),
                gb(s.total())
            );
        }
        out
    }
}

/// The GPU check's steps on `device` with `model` in bf16: each step's rows as the
/// engine would choose them, and its peak.
pub fn gpu_check_plan(device: DeviceMemory, model: ModelShape, work: &CheckWorkload) -> MemoryPlan {
    const BF16: usize = 2;
    let weights = model.weight_bytes(BF16);
    let free = device.bytes.saturating_sub(CUDA_OVERHEAD + weights);
    let budget = gpu_kv_budget(free as usize);
    let per_token = model.kv_bytes_per_token(BF16);
    let limits = BatchLimits::default();
    let (prompt, new) = (work.prompt_tokens, work.new_tokens);
    let mut steps = Vec::new();
    // Token choice alone: synthetic f32 logits of up to 432 rows, no model.
    steps.push(StepPeak {
        step: "bench sampler".into(),
        rows: 432,
        weights: 0,
        kv: 0,
        activations: 2 * 432 * model.vocab as u64 * 4,
    });
    for &b in &work.batches {
        let rows = match b {
            0 => bench_row_limit(budget, per_token, prompt, new, model.layers, ROW_CAP),
            b => b,
        };
        // A prefill group holds what fits the step's token budget (one prompt at least).
        let group = (limits.prefill_tokens / prompt).clamp(1, rows);
        let activations = model
            .forward_bytes(group, prompt, prompt, BF16)
            .max(model.forward_bytes(rows, 1, prompt + new, BF16));
        steps.push(StepPeak {
            step: match b {
                0 => "bench at the row limit".into(),
                b => format!("bench batch {b}"),
            },
            rows,
            weights,
            kv: bench_kv_peak(rows, prompt, new, per_token, model.layers),
            activations,
        });
    }
    // Continuous batching: the admission keeps a join's peak within the budget.
    let mixed_extent = work.mixed_prompt + 3 * work.mixed_cap;
    let mixed_kv = (work.mixed_rows * mixed_extent * per_token).min(budget) as u64;
    steps.push(StepPeak {
        step: "bench mixed".into(),
        rows: work.mixed_rows,
        weights,
        kv: join_peak_bytes(mixed_kv as usize, 0, mixed_kv as usize, model.layers).min(budget)
            as u64,
        activations: model
            .forward_bytes(1, limits.prefill_tokens, work.mixed_prompt, BF16)
            .max(model.forward_bytes(work.mixed_rows, 1, mixed_extent, BF16)),
    });
    let run_rows = ROW_CAP;
    steps.push(StepPeak {
        step: "principal run".into(),
        rows: run_rows,
        weights,
        kv: budget as u64,
        activations: model
            .forward_bytes(1, limits.prefill_tokens, work.run_prompt, BF16)
            .max(model.forward_bytes(run_rows, 1, work.run_prompt + work.run_new_tokens, BF16)),
    });
    MemoryPlan {
        device,
        model,
        kv_budget: budget as u64,
        steps,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_step_of_the_gpu_check_fits_an_h200_with_qwen2_5_7b_in_bf16() {
        let plan = gpu_check_plan(
            DeviceMemory::H200,
            ModelShape::QWEN2_5_7B,
            &CheckWorkload::gpu_check(),
        );
        let over: Vec<String> = plan.overflows().iter().map(|s| s.step.clone()).collect();
        assert!(over.is_empty(), "{over:?} overflow:\n{}", plan.table());
        // The weights are Qwen2.5-7B's 15.2 GB; the KV cache of a token is 57,344 bytes.
        assert_eq!(plan.steps[1].weights, 15_231_233_024);
        assert_eq!(ModelShape::QWEN2_5_7B.kv_bytes_per_token(2), 57_344);
        let row_limit = plan
            .steps
            .iter()
            .find(|s| s.step == "bench at the row limit")
            .expect("the row-limit step");
        // Hundreds of rows, not a token one: the step still measures a full batch.
        assert!(row_limit.rows > 400, "{}", plan.table());
    }

    #[test]
    fn the_engines_own_row_limit_would_overflow_the_bench() {
        // The bench used to run the engine's row limit, which counts the decoding cache
        // alone: with the bench's copy for the select and its prefill join beside it,
        // that overflows the device; the bench's row limit does not.
        let m = ModelShape::QWEN2_5_7B;
        let weights = m.weight_bytes(2);
        let budget = gpu_kv_budget((DeviceMemory::H200.bytes - CUDA_OVERHEAD - weights) as usize);
        let per_token = m.kv_bytes_per_token(2);
        let engine_rows = row_limit(budget, per_token, 1628).min(ROW_CAP);
        let old_peak = bench_kv_peak(engine_rows, 1500, 128, per_token, m.layers);
        assert!(CUDA_OVERHEAD + weights + old_peak > DeviceMemory::H200.bytes);
        let rows = bench_row_limit(budget, per_token, 1500, 128, m.layers, ROW_CAP);
        assert!(rows < engine_rows);
        assert!(bench_kv_peak(rows, 1500, 128, per_token, m.layers) <= budget as u64);
        assert!(bench_kv_peak(rows + 1, 1500, 128, per_token, m.layers) > budget as u64);
    }

    #[test]
    fn the_table_says_which_steps_do_not_fit() {
        let small = DeviceMemory {
            name: "24 GB card",
            bytes: 24 << 30,
        };
        let plan = gpu_check_plan(small, ModelShape::QWEN2_5_7B, &CheckWorkload::gpu_check());
        // On 24 GB the weights leave room for a small cache only; the bench's fixed
        // batch of 128 rows of 1,628 tokens (12 GB of cache) does not fit.
        let over: Vec<&str> = plan.overflows().iter().map(|s| s.step.as_str()).collect();
        assert!(over.contains(&"bench batch 128"), "{}", plan.table());
        assert!(plan.table().contains("| bench batch 128 | 128 |"));
        assert!(plan.table().contains("NO |"));
    }
}
