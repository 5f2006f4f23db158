//! The candle engine: model files per architecture, an engine-owned batched KV cache,
//! a scheduler that prefills each prompt once and forks it per seed, and the sampler.

pub mod bench;
pub mod chat_template;
mod cpu_attention;
pub mod fixture;
pub mod gemma3;
pub mod kv_cache;
mod layers;
pub mod llama;
pub mod loader;
mod nucleus;
pub mod qwen2;
pub mod sampler;
pub mod step;
mod vectorised;

use crate::engine::{
    Backend, EngineError, FinishReason, Prompt, Request, RequestId, Sample, Sampling, Timings,
};
pub use bench::{BenchBreakdown, BenchTimes};
use candle_core::{DType, Device, Tensor};
use chat_template::ChatTemplate;
use kv_cache::KvCache;
use loader::ModelFiles;
use sampler::StreamKey;
use serde::Deserialize;
use std::collections::HashSet;
use std::path::Path;
use std::time::Instant;
use tokenizers::Tokenizer;

/// A decoder-only model that runs one step over a batch with an external cache.
pub trait CausalLm: Send + Sync {
    fn layers(&self) -> usize;

    /// Feeds `tokens` (rows, new) after what `cache` holds, appends their keys and
    /// values, and returns the logits of each row's last new token (rows, vocab) in f32.
    fn forward(&self, tokens: &Tensor, cache: &mut KvCache) -> candle_core::Result<Tensor>;
}

/// Where to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceChoice {
    /// CUDA device 0 when the binary has CUDA and a device answers, else the CPU.
    Auto,
    Cpu,
    Cuda(usize),
}

impl std::str::FromStr for DeviceChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(DeviceChoice::Auto),
            "cpu" => Ok(DeviceChoice::Cpu),
            _ => s
                .strip_prefix("cuda:")
                .and_then(|n| n.parse().ok())
                .map(DeviceChoice::Cuda)
                .ok_or_else(|| format!("unknown device {s:?} (auto, cpu, cuda:N)")),
        }
    }
}

/// The device to use and, for `auto` falling back to the CPU, the reason why.
pub fn select_device(choice: DeviceChoice) -> Result<(Device, Option<String>), EngineError> {
    match choice {
        DeviceChoice::Cpu => Ok((Device::Cpu, None)),
        DeviceChoice::Cuda(n) => cuda_device(n).map(|d| (d, None)),
        DeviceChoice::Auto => match cuda_device(0) {
            Ok(d) => Ok((d, None)),
            Err(e) => Ok((Device::Cpu, Some(format!("running on the CPU: {e}")))),
        },
    }
}

#[cfg(feature = "cuda")]
fn cuda_device(n: usize) -> Result<Device, EngineError> {
    // Some CUDA initialisation failures panic inside the driver bindings instead of
    // returning an error; the fallback must survive them.
    match std::panic::catch_unwind(|| Device::new_cuda(n)) {
        Ok(Ok(d)) => {
            if let Device::Cuda(cuda) = &d {
                // Safety: the engine issues all its work on the device's one stream, in
                // order, so no tensor is used on another stream; the two CUDA events that
                // cudarc records per allocation to order streams are pure overhead here.
                unsafe { cuda.disable_event_tracking() };
            }
            Ok(d)
        }
        Ok(Err(e)) => Err(EngineError::Device(format!(
            "CUDA device {n} is not usable: {e}"
        ))),
        Err(_) => Err(EngineError::Device(format!(
            "CUDA device {n} is not usable (driver panic)"
        ))),
    }
}

#[cfg(not(feature = "cuda"))]
fn cuda_device(_n: usize) -> Result<Device, EngineError> {
    Err(EngineError::Device(
        "this binary was built without the `cuda` feature".into(),
    ))
}

/// bf16 on GPUs, f32 on the CPU (where bf16 matmuls are slow and parity needs f32).
pub fn default_dtype(device: &Device) -> DType {
    if device.is_cpu() {
        DType::F32
    } else {
        DType::BF16
    }
}

/// How much work one forward pass may take on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchLimits {
    /// Sequences decoded together (seeds count separately).
    pub max_rows: usize,
    /// Prompt tokens (padded rows x longest prompt) in one prefill pass; bounds the
    /// attention score tensor of prefill.
    pub prefill_tokens: usize,
    /// Bytes the KV cache of one group of rows may take: rows x (longest prompt + new
    /// tokens) x the model's KV bytes per token. Measured at load time from the free
    /// memory of the device.
    pub kv_budget_bytes: usize,
}

impl Default for BatchLimits {
    fn default() -> Self {
        BatchLimits {
            max_rows: 32,
            prefill_tokens: 4096,
            kv_budget_bytes: usize::MAX,
        }
    }
}

#[derive(Deserialize)]
struct ArchProbe {
    model_type: Option<String>,
    #[serde(default)]
    eos_token_id: Option<TokenIds>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum TokenIds {
    One(u32),
    Many(Vec<u32>),
}

impl TokenIds {
    fn ids(self) -> Vec<u32> {
        match self {
            TokenIds::One(i) => vec![i],
            TokenIds::Many(v) => v,
        }
    }
}

fn read_json<T: serde::de::DeserializeOwned>(
    path: &Path,
    what: &'static str,
) -> Result<T, EngineError> {
    let text = std::fs::read_to_string(path).map_err(|source| EngineError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|e| EngineError::BadFile {
        what,
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

/// A loaded model with its tokenizer and chat template, ready to decode.
pub struct Engine {
    model: Box<dyn CausalLm>,
    /// Keys and values of one token in every layer.
    kv_bytes_per_token: usize,
    /// Test hook: fail like a GPU out of memory when a group has more rows than this.
    simulated_oom_above: Option<usize>,
    tokenizer: Tokenizer,
    template: ChatTemplate,
    eos: Vec<u32>,
    device: Device,
    dtype: DType,
    limits: BatchLimits,
    label: String,
}

impl Engine {
    pub fn load(files: &ModelFiles, device: Device, label: &str) -> Result<Engine, EngineError> {
        let dtype = default_dtype(&device);
        let probe: ArchProbe = read_json(&files.config, "model config")?;
        let mut eos = probe.eos_token_id.map(TokenIds::ids).unwrap_or_default();
        if let Some(g) = &files.generation_config {
            let gen: ArchProbe = read_json(g, "generation config")?;
            eos.extend(gen.eos_token_id.map(TokenIds::ids).unwrap_or_default());
        }
        eos.sort_unstable();
        eos.dedup();
        if eos.is_empty() {
            return Err(EngineError::Model(format!(
                "{} declares no eos_token_id",
                files.config.display()
            )));
        }
        // Safety: the weight files are memory-mapped read-only; the engine never writes
        // them, and a file changed underneath a running process is outside its contract.
        let vb = unsafe {
            candle_nn::VarBuilder::from_mmaped_safetensors(&files.weights, dtype, &device)?
        };
        let kv_elems: usize;
        let model: Box<dyn CausalLm> = match probe.model_type.as_deref() {
            Some("qwen2") => {
                let c: qwen2::Config = read_json(&files.config, "qwen2 config")?;
                kv_elems = c.num_hidden_layers * c.num_key_value_heads * c.head_dim() * 2;
                Box::new(qwen2::Qwen2::load(vb, &c)?)
            }
            Some("llama") => {
                let c: llama::Config = read_json(&files.config, "llama config")?;
                kv_elems = c.num_hidden_layers * c.num_key_value_heads * c.head_dim() * 2;
                Box::new(llama::Llama::load(vb, &c)?)
            }
            Some("gemma3" | "gemma3_text") => {
                let text =
                    std::fs::read_to_string(&files.config).map_err(|source| EngineError::Io {
                        path: files.config.clone(),
                        source,
                    })?;
                let c = gemma3::Config::from_json(&text).map_err(|e| EngineError::BadFile {
                    what: "gemma3 config",
                    path: files.config.clone(),
                    message: e.to_string(),
                })?;
                kv_elems = c.num_hidden_layers * c.num_key_value_heads * c.head_dim * 2;
                Box::new(gemma3::Gemma3::load(vb, &c)?)
            }
            other => {
                return Err(EngineError::Model(format!(
                    "architecture {other:?} in {} is not supported",
                    files.config.display()
                )))
            }
        };
        let tokenizer = Tokenizer::from_file(&files.tokenizer)
            .map_err(|e| EngineError::Tokenizer(e.to_string()))?;
        let template = ChatTemplate::from_tokenizer_config(&files.tokenizer_config)?;
        let limits = BatchLimits {
            kv_budget_bytes: kv_budget(&device),
            ..BatchLimits::default()
        };
        Ok(Engine {
            model,
            kv_bytes_per_token: kv_elems * dtype.size_in_bytes(),
            simulated_oom_above: None,
            tokenizer,
            template,
            eos,
            label: format!(
                "{label} on {} ({dtype:?})",
                if device.is_cpu() { "cpu" } else { "cuda" }
            ),
            device,
            dtype,
            limits,
        })
    }

    pub fn with_limits(mut self, limits: BatchLimits) -> Self {
        self.limits = limits;
        self
    }

    pub fn limits(&self) -> BatchLimits {
        self.limits
    }

    pub fn kv_bytes_per_token(&self) -> usize {
        self.kv_bytes_per_token
    }

    /// Test hook: every group of more than `rows` rows fails after its first decode
    /// step as a GPU out of memory does, so that the shrink-and-retry path runs on
    /// the CPU.
    #[doc(hidden)]
    pub fn simulate_out_of_memory_above(mut self, rows: usize) -> Self {
        self.simulated_oom_above = Some(rows);
        self
    }

    /// Token ids the tokenizer knows, special tokens included.
    pub fn vocab_size(&self) -> usize {
        self.tokenizer.get_vocab_size(true)
    }

    pub fn eos_ids(&self) -> &[u32] {
        &self.eos
    }

    pub fn dtype(&self) -> DType {
        self.dtype
    }

    pub fn template(&self) -> &ChatTemplate {
        &self.template
    }

    /// The token ids of a prompt. Rendered chat text already carries the special
    /// tokens the model expects (BOS included), so none are added here.
    pub fn encode(&self, prompt: &Prompt) -> Result<Vec<u32>, EngineError> {
        let text = match prompt {
            Prompt::Chat(messages) => self.template.render(messages)?,
            Prompt::Raw(text) => text.clone(),
        };
        let enc = self
            .tokenizer
            .encode(text, false)
            .map_err(|e| EngineError::Tokenizer(e.to_string()))?;
        Ok(enc.get_ids().to_vec())
    }

    pub fn decode(&self, ids: &[u32]) -> Result<String, EngineError> {
        self.tokenizer
            .decode(ids, true)
            .map_err(|e| EngineError::Tokenizer(e.to_string()))
    }

    /// Logits of the last prompt token for each prompt, prefilled together with left
    /// padding; used by parity and batch-invariance tests.
    pub fn prompt_logits(&self, prompts: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, EngineError> {
        let (logits, _) = self.prefill(prompts)?;
        Ok(logits.to_vec2()?)
    }

    /// Prefills prompts in groups that respect the token budget and joins their caches;
    /// the logits (prompts, vocab) stay on the device.
    fn prefill(&self, prompts: &[Vec<u32>]) -> Result<(Tensor, KvCache), EngineError> {
        let mut logits = Vec::with_capacity(prompts.len());
        let mut caches = Vec::new();
        let mut start = 0;
        while start < prompts.len() {
            let mut end = start + 1;
            let mut longest = prompts[start].len();
            while end < prompts.len() {
                let l = longest.max(prompts[end].len());
                if l * (end + 1 - start) > self.limits.prefill_tokens {
                    break;
                }
                longest = l;
                end += 1;
            }
            let group = &prompts[start..end];
            let pad: Vec<usize> = group.iter().map(|p| longest - p.len()).collect();
            let mut ids = Vec::with_capacity(group.len() * longest);
            for (p, &k) in group.iter().zip(&pad) {
                // Padding slots are masked out; any valid id will do.
                ids.extend(std::iter::repeat_n(0u32, k));
                ids.extend_from_slice(p);
            }
            let tokens = Tensor::from_vec(ids, (group.len(), longest), &self.device)?;
            let mut cache = KvCache::new(self.model.layers(), pad);
            let out = self.model.forward(&tokens, &mut cache)?;
            logits.push(out);
            caches.push(cache);
            start = end;
        }
        let cache = if caches.len() == 1 {
            caches.pop().expect("one cache")
        } else {
            KvCache::join(caches)?
        };
        let logits = if logits.len() == 1 {
            logits.pop().expect("one part")
        } else {
            Tensor::cat(&logits, 0)?
        };
        Ok((logits, cache))
    }

    /// Decodes a group of requests that fits the row limit together.
    fn run_group(
        &self,
        group: &[&Request],
        prompts: &[Vec<u32>],
        on_sample: &mut dyn FnMut(Sample),
    ) -> Result<(), EngineError> {
        struct Row<'a> {
            request: &'a Request,
            seed: u64,
            key: StreamKey,
            tokens: Vec<u32>,
            decode_s: f64,
        }
        let t0 = Instant::now();
        let (prompt_logits, mut cache) = self.prefill(prompts)?;
        // Kernels run asynchronously on a GPU: the prefill ends when they do.
        self.device.synchronize()?;
        let prefill_s = t0.elapsed().as_secs_f64();

        // Fork: one cache row and one logits row per (request, seed).
        let mut fork = Vec::new();
        let mut rows = Vec::new();
        for (i, r) in group.iter().enumerate() {
            for &seed in &r.seeds {
                fork.push(i);
                rows.push(Row {
                    request: r,
                    seed,
                    key: StreamKey::new(seed, &r.id),
                    tokens: Vec::new(),
                    decode_s: 0.0,
                });
            }
        }
        let fork_ids: Vec<u32> = fork.iter().map(|&i| i as u32).collect();
        let mut logits =
            prompt_logits.index_select(&Tensor::new(fork_ids.as_slice(), &self.device)?, 0)?;
        cache.select(&fork)?;
        let mut stats = step::ChoiceStats::default();
        let group_rows = fork.len();
        let longest = group.iter().map(|r| r.max_new_tokens).max().unwrap_or(0);
        cache.reserve(cache.slots() + longest)?;

        // A step runs from its forward pass until its tokens are chosen: on a GPU the
        // forward pass only queues kernels, and the wait falls in the logits transfer.
        let mut step_start: Option<Instant> = None;
        loop {
            let draws: Vec<(Sampling, f64)> = rows
                .iter()
                .map(|row| (row.request.sampling, row.key.uniform(row.tokens.len())))
                .collect();
            let next = step::next_tokens(&logits, &draws, &mut stats)?;
            if let Some(t) = step_start.take() {
                let dt = t.elapsed().as_secs_f64();
                rows.iter_mut().for_each(|r| r.decode_s += dt);
            }
            let mut keep = Vec::new();
            let mut kept_rows = Vec::new();
            for (i, (mut row, tok)) in rows.into_iter().zip(next).enumerate() {
                let finish = if self.eos.contains(&tok) {
                    Some(FinishReason::Stop)
                } else {
                    row.tokens.push(tok);
                    (row.tokens.len() >= row.request.max_new_tokens).then_some(FinishReason::Length)
                };
                match finish {
                    Some(reason) => on_sample(Sample {
                        request_id: row.request.id.clone(),
                        seed: row.seed,
                        text: self.decode(&row.tokens)?,
                        prompt_tokens: prompts[fork[i]].len(),
                        token_ids: row.tokens,
                        finish_reason: reason,
                        timings: Timings {
                            prefill_s,
                            decode_s: row.decode_s,
                        },
                    }),
                    None => {
                        keep.push(i);
                        kept_rows.push(row);
                    }
                }
            }
            if kept_rows.is_empty() {
                return Ok(());
            }
            if keep.len() < fork.len() {
                cache.select(&keep)?;
                fork = keep.iter().map(|&i| fork[i]).collect();
            }
            rows = kept_rows;
            if self
                .simulated_oom_above
                .is_some_and(|limit| group_rows > limit)
            {
                return Err(EngineError::Tensor(candle_core::Error::Msg(
                    "CUDA_ERROR_OUT_OF_MEMORY: out of memory (simulated)".into(),
                )));
            }
            step_start = Some(Instant::now());
            let last: Vec<u32> = rows
                .iter()
                .map(|r| *r.tokens.last().expect("a token was pushed"))
                .collect();
            let tokens = Tensor::from_vec(last, (rows.len(), 1), &self.device)?;
            logits = self.model.forward(&tokens, &mut cache)?;
        }
    }
}

impl Backend for Engine {
    fn describe(&self) -> String {
        self.label.clone()
    }

    fn preferred_batch(&self) -> usize {
        self.limits.max_rows
    }

    fn generate_each(
        &mut self,
        requests: &[Request],
        on_sample: &mut dyn FnMut(Sample),
    ) -> Result<(), EngineError> {
        let mut pending: Vec<(&Request, Vec<u32>)> = Vec::new();
        for r in requests {
            if r.seeds.is_empty() {
                continue;
            }
            if r.max_new_tokens == 0 {
                return Err(EngineError::InvalidRequest {
                    id: r.id.to_string(),
                    message: "max_new_tokens must be at least 1".into(),
                });
            }
            let ids = self.encode(&r.prompt)?;
            if ids.is_empty() {
                return Err(EngineError::InvalidRequest {
                    id: r.id.to_string(),
                    message: "the prompt encodes to no tokens".into(),
                });
            }
            pending.push((r, ids));
        }
        // Samples already handed over: a group retried after an out-of-memory error
        // decodes them again (identically) and they are not handed over twice.
        let mut emitted: HashSet<(RequestId, u64)> = HashSet::new();
        let mut start = 0;
        while start < pending.len() {
            let end = self.group_end(&pending, start);
            let rows: usize = pending[start..end].iter().map(|(r, _)| r.seeds.len()).sum();
            let group: Vec<&Request> = pending[start..end].iter().map(|(r, _)| *r).collect();
            let prompts: Vec<Vec<u32>> =
                pending[start..end].iter().map(|(_, p)| p.clone()).collect();
            let result = self.run_group(&group, &prompts, &mut |s: Sample| {
                if emitted.insert((s.request_id.clone(), s.seed)) {
                    on_sample(s)
                }
            });
            match result {
                Err(e) if is_out_of_memory(&e) && end - start > 1 => {
                    let shrunk: usize = pending[start..start + (end - start) / 2]
                        .iter()
                        .map(|(r, _)| r.seeds.len())
                        .sum();
                    eprintln!(
                        "warning: out of memory decoding {rows} rows together; retrying with at most {shrunk}"
                    );
                    self.limits.max_rows = shrunk.max(1);
                }
                Err(e) => return Err(e),
                Ok(()) => start = end,
            }
        }
        Ok(())
    }
}

/// Whether an engine error is the device running out of memory (worth a smaller batch).
fn is_out_of_memory(e: &EngineError) -> bool {
    let text = e.to_string().to_ascii_lowercase();
    text.contains("out of memory") || text.contains("out_of_memory")
}

/// Bytes the KV cache may take on `device`: most of what is free after the weights
/// are loaded on a GPU; half of the available memory on the CPU.
fn kv_budget(device: &Device) -> usize {
    match device {
        Device::Cpu => {
            let available = std::fs::read_to_string("/proc/meminfo")
                .ok()
                .and_then(|m| {
                    let line = m.lines().find(|l| l.starts_with("MemAvailable:"))?;
                    line.split_whitespace().nth(1)?.parse::<usize>().ok()
                })
                .map(|kib| kib * 1024);
            available.map_or(8 << 30, |b| b / 2)
        }
        _ => gpu_free_bytes().map_or(16 << 30, |free| free / 10 * 8),
    }
}

#[cfg(feature = "cuda")]
fn gpu_free_bytes() -> Option<usize> {
    candle_core::cuda_backend::cudarc::driver::result::mem_get_info()
        .ok()
        .map(|(free, _total)| free)
}

#[cfg(not(feature = "cuda"))]
fn gpu_free_bytes() -> Option<usize> {
    None
}

impl Engine {
    /// The end of the group that starts at `start`: requests are added while their
    /// rows fit `max_rows` and the group's KV cache (rows x (longest prompt + longest
    /// budget of new tokens)) fits the KV budget; the first request always goes in.
    fn group_end(&self, pending: &[(&Request, Vec<u32>)], start: usize) -> usize {
        let (mut rows, mut longest_prompt, mut longest_new) = (0, 0, 0);
        let mut end = start;
        while end < pending.len() {
            let (r, p) = &pending[end];
            let rows2 = rows + r.seeds.len();
            let prompt2 = longest_prompt.max(p.len());
            let new2 = longest_new.max(r.max_new_tokens);
            let kv = rows2
                .saturating_mul(prompt2 + new2)
                .saturating_mul(self.kv_bytes_per_token);
            if end > start && (rows2 > self.limits.max_rows || kv > self.limits.kv_budget_bytes) {
                break;
            }
            (rows, longest_prompt, longest_new) = (rows2, prompt2, new2);
            end += 1;
        }
        end
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::RequestId;

    #[test]
    fn decoding_stops_before_any_declared_end_token() {
        let dir = std::env::temp_dir().join(format!("engine-stop-{}", std::process::id()));
        fixture::write_fixture(fixture::Arch::Qwen2, fixture::Size::Tiny, &dir).unwrap();
        let mut e =
            Engine::load(&ModelFiles::from_dir(&dir).unwrap(), Device::Cpu, "stop").unwrap();
        let req = Request {
            id: RequestId::new("stop"),
            prompt: Prompt::Raw("the river is north".into()),
            seeds: vec![0],
            max_new_tokens: 6,
            sampling: Sampling::Greedy,
        };
        let free = e.generate(std::slice::from_ref(&req)).unwrap().remove(0);
        assert_eq!(free.finish_reason, FinishReason::Length);
        assert_eq!(free.token_ids.len(), 6);
        let end = free.token_ids[2];
        e.eos.push(end);
        let stopped = e.generate(std::slice::from_ref(&req)).unwrap().remove(0);
        let cut = free.token_ids.iter().position(|&t| t == end).unwrap();
        assert_eq!(stopped.finish_reason, FinishReason::Stop);
        assert_eq!(stopped.token_ids, free.token_ids[..cut]);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
