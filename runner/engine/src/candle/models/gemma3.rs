//! Gemma 3 text decoder. Differences from Llama, in the order a token meets them:
//! embeddings scaled by sqrt(hidden); RMSNorms that scale by `1 + w` in f32; norms after
//! attention and after the MLP as well as before; q and k normalised per head; attention
//! scaled by `query_pre_attn_scalar^-1/2`; local layers that see a sliding window with
//! their own RoPE base, global layers with linearly scaled RoPE; GELU (tanh) MLP.
//!
//! The multimodal checkpoints keep the decoder under `language_model.model.`; their
//! vision tensors are never read.

use crate::candle::layers::kernels::Kernels;
use crate::candle::layers::TensorNames;
use crate::candle::layers::Weights;
use crate::candle::layers::{self, attention, GatedAct, GatedMlp, Mask, QkvProjection, Rope};
use crate::candle::layers::{Embedding, Proj};
use crate::candle::models::shape::Shape;
use crate::candle::models::ModelConfig;
use crate::candle::runtime::kv_cache::KvCache;
use crate::candle::CausalLm;
use candle_core::{DType, Result, Tensor};
use candle_nn::VarBuilder;
use serde::Deserialize;

/// Gemma3TextConfig; defaults are transformers' for keys the 12B config omits.
#[derive(Debug, Clone, Deserialize)]
pub struct Config {
    #[serde(default = "d_vocab")]
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub num_key_value_heads: usize,
    #[serde(default = "d_head_dim")]
    pub head_dim: usize,
    #[serde(default = "d_head_dim_f")]
    pub query_pre_attn_scalar: f64,
    #[serde(default = "d_eps")]
    pub rms_norm_eps: f64,
    #[serde(default = "d_theta")]
    pub rope_theta: f64,
    #[serde(default = "d_local_theta")]
    pub rope_local_base_freq: f64,
    pub rope_scaling: Option<RopeScaling>,
    #[serde(default = "d_window")]
    pub sliding_window: usize,
    #[serde(default = "d_pattern")]
    pub sliding_window_pattern: usize,
    /// Newer configs name each layer's kind; older ones rely on the pattern.
    pub layer_types: Option<Vec<String>>,
    pub final_logit_softcapping: Option<f64>,
    pub attn_logit_softcapping: Option<f64>,
}

fn d_vocab() -> usize {
    262_208
}
fn d_head_dim() -> usize {
    256
}
fn d_head_dim_f() -> f64 {
    256.0
}
fn d_eps() -> f64 {
    1e-6
}
fn d_theta() -> f64 {
    1_000_000.0
}
fn d_local_theta() -> f64 {
    10_000.0
}
fn d_window() -> usize {
    4096
}
fn d_pattern() -> usize {
    6
}

#[derive(Debug, Clone, Deserialize)]
pub struct RopeScaling {
    pub rope_type: String,
    pub factor: f64,
}

/// config.json of either the text-only model or the multimodal wrapper.
#[derive(Deserialize)]
struct Outer {
    text_config: Option<Config>,
}

impl Config {
    pub fn from_json(text: &str) -> std::result::Result<Config, serde_json::Error> {
        match serde_json::from_str::<Outer>(text)? {
            Outer {
                text_config: Some(c),
            } => Ok(c),
            Outer { text_config: None } => serde_json::from_str(text),
        }
    }

    pub fn kv_values_per_token(&self) -> usize {
        self.num_hidden_layers * self.num_key_value_heads * self.head_dim * 2
    }

    fn is_sliding(&self, layer: usize) -> bool {
        match &self.layer_types {
            Some(kinds) => kinds.get(layer).map(String::as_str) == Some("sliding_attention"),
            None => !(layer + 1).is_multiple_of(self.sliding_window_pattern),
        }
    }
}

pub fn parse(text: &str) -> std::result::Result<Box<dyn ModelConfig>, String> {
    Ok(Box::new(
        Config::from_json(text).map_err(|e| e.to_string())?,
    ))
}

impl ModelConfig for Config {
    fn shape(&self) -> Shape {
        Shape {
            vocab: self.vocab_size,
            hidden: self.hidden_size,
            intermediate: self.intermediate_size,
            layers: self.num_hidden_layers,
            heads: self.num_attention_heads,
            kv_heads: self.num_key_value_heads,
            head_dim: self.head_dim,
        }
    }

    fn kv_values_per_token(&self) -> usize {
        Config::kv_values_per_token(self)
    }

    fn load(
        &self,
        vb: VarBuilder,
        names: &TensorNames,
        weights: &Weights,
    ) -> Result<Box<dyn CausalLm>> {
        Ok(Box::new(Gemma3::load(vb, self, names, weights)?))
    }
}

/// RMSNorm scaling by `1 + w`, computed in f32 whatever the model dtype.
struct Norm {
    scale: Tensor,
    eps: f32,
    kernels: &'static dyn Kernels,
}

impl Norm {
    fn load(vb: VarBuilder, size: usize, eps: f64, kernels: &'static dyn Kernels) -> Result<Self> {
        let w = vb.get(size, "weight")?.to_dtype(DType::F32)?;
        Ok(Norm {
            scale: (w + 1.0)?,
            eps: eps as f32,
            kernels,
        })
    }

    fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let y = self
            .kernels
            .rms_norm(&x.to_dtype(DType::F32)?, &self.scale, self.eps)?;
        y.to_dtype(x.dtype())
    }
}

struct Attention {
    qkv: QkvProjection,
    o: Proj,
    q_norm: Norm,
    k_norm: Norm,
    scale: f64,
    sliding: bool,
}

impl Attention {
    fn load(
        vb: VarBuilder,
        c: &Config,
        layer: usize,
        (names, weights): (&TensorNames, &Weights),
    ) -> Result<Self> {
        let d = c.head_dim;
        let (h, kv) = (c.num_attention_heads, c.num_key_value_heads);
        Ok(Attention {
            qkv: QkvProjection::load(&vb, &names.qkv, c.hidden_size, (h, kv, d), false, weights)?,
            o: Proj::load(&vb, &[("o_proj", c.hidden_size)], h * d, false, weights)?,
            q_norm: Norm::load(vb.pp("q_norm"), d, c.rms_norm_eps, weights.kernels)?,
            k_norm: Norm::load(vb.pp("k_norm"), d, c.rms_norm_eps, weights.kernels)?,
            scale: 1.0 / c.query_pre_attn_scalar.sqrt(),
            sliding: c.is_sliding(layer),
        })
    }

    fn forward(
        &self,
        x: &Tensor,
        step: &Step,
        cache: &mut KvCache,
        layer: usize,
    ) -> Result<Tensor> {
        let (q, k, v) = self.qkv.forward(x)?;
        let q = self.q_norm.forward(&q)?;
        let k = self.k_norm.forward(&k)?;
        let (cos, sin, mask) = if self.sliding {
            (&step.local_cos, &step.local_sin, &step.local_mask)
        } else {
            (&step.global_cos, &step.global_sin, &step.global_mask)
        };
        let q = layers::apply_rope(&q, cos, sin)?;
        let k = layers::apply_rope(&k, cos, sin)?;
        let y = attention(&q, (&k, &v), (cache, layer), mask, self.scale)?;
        self.o.forward(&y)
    }
}

struct Block {
    input_norm: Norm,
    attn: Attention,
    post_attn_norm: Norm,
    pre_mlp_norm: Norm,
    mlp: GatedMlp,
    post_mlp_norm: Norm,
}

/// What the layers of one forward step share: two rotary tables and two masks.
struct Step {
    local_cos: Tensor,
    local_sin: Tensor,
    local_mask: Mask,
    global_cos: Tensor,
    global_sin: Tensor,
    global_mask: Mask,
}

pub struct Gemma3 {
    embed: Embedding,
    embed_scale: f64,
    blocks: Vec<Block>,
    norm: Norm,
    head: Proj,
    local_rope: Rope,
    global_rope: Rope,
    window: usize,
    final_softcap: Option<f64>,
    dtype: DType,
    kernels: &'static dyn Kernels,
}

impl Gemma3 {
    pub fn load(
        vb: VarBuilder,
        c: &Config,
        names: &TensorNames,
        weights: &Weights,
    ) -> Result<Self> {
        if c.attn_logit_softcapping.is_some() {
            candle_core::bail!("gemma3: attention logit soft-capping is not supported")
        }
        let m = if vb.contains_tensor("language_model.model.embed_tokens.weight") {
            vb.pp("language_model").pp("model")
        } else {
            vb.pp("model")
        };
        let h = c.hidden_size;
        let head_tied = !vb.contains_tensor("lm_head.weight");
        let embed = Embedding::load(&m, "embed_tokens", (c.vocab_size, h), weights)?;
        let blocks = (0..c.num_hidden_layers)
            .map(|i| {
                let b = m.pp("layers").pp(i);
                Ok(Block {
                    input_norm: Norm::load(
                        b.pp("input_layernorm"),
                        h,
                        c.rms_norm_eps,
                        weights.kernels,
                    )?,
                    attn: Attention::load(b.pp("self_attn"), c, i, (names, weights))?,
                    post_attn_norm: Norm::load(
                        b.pp("post_attention_layernorm"),
                        h,
                        c.rms_norm_eps,
                        weights.kernels,
                    )?,
                    pre_mlp_norm: Norm::load(
                        b.pp("pre_feedforward_layernorm"),
                        h,
                        c.rms_norm_eps,
                        weights.kernels,
                    )?,
                    mlp: GatedMlp::load(
                        b.pp("mlp"),
                        &names.gate_up,
                        h,
                        c.intermediate_size,
                        GatedAct::GeluTanh,
                        weights,
                    )?,
                    post_mlp_norm: Norm::load(
                        b.pp("post_feedforward_layernorm"),
                        h,
                        c.rms_norm_eps,
                        weights.kernels,
                    )?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let norm = Norm::load(m.pp("norm"), h, c.rms_norm_eps, weights.kernels)?;
        let head = if head_tied {
            embed.tied_head(&m, "embed_tokens", weights)?
        } else {
            Proj::load(&vb, &[("lm_head", c.vocab_size)], h, false, weights)?
        };
        let factor = match &c.rope_scaling {
            Some(r) if r.rope_type == "linear" => r.factor,
            Some(r) => {
                candle_core::bail!("gemma3: rope scaling {:?} is not supported", r.rope_type)
            }
            None => 1.0,
        };
        Ok(Gemma3 {
            embed,
            embed_scale: (h as f64).sqrt(),
            blocks,
            norm,
            head,
            local_rope: Rope::new(c.head_dim, c.rope_local_base_freq, |f| f, vb.device())?,
            global_rope: Rope::new(c.head_dim, c.rope_theta, |f| f / factor, vb.device())?,
            window: c.sliding_window,
            final_softcap: c.final_logit_softcapping,
            dtype: vb.dtype(),
            kernels: weights.kernels,
        })
    }
}

impl CausalLm for Gemma3 {
    fn layers(&self) -> usize {
        self.blocks.len()
    }

    fn forward(&self, tokens: &Tensor, cache: &mut KvCache) -> Result<Tensor> {
        let layout = cache.layout(tokens.dim(1)?);
        let (local_cos, local_sin) = self.local_rope.tables(&layout, self.dtype)?;
        let (global_cos, global_sin) = self.global_rope.tables(&layout, self.dtype)?;
        let step = Step {
            local_cos,
            local_sin,
            local_mask: Mask::new(&layout, Some(self.window), tokens.device(), self.kernels)?,
            global_cos,
            global_sin,
            global_mask: Mask::new(&layout, None, tokens.device(), self.kernels)?,
        };
        // transformers multiplies by the scale as a tensor of the model dtype, so the
        // scale itself is rounded to that dtype first.
        let scale = Tensor::new(self.embed_scale as f32, tokens.device())?.to_dtype(self.dtype)?;
        let mut x = self.embed.forward(tokens)?.broadcast_mul(&scale)?;
        for (i, b) in self.blocks.iter().enumerate() {
            let h = b
                .attn
                .forward(&b.input_norm.forward(&x)?, &step, cache, i)?;
            x = (x + b.post_attn_norm.forward(&h)?)?;
            let h = b.mlp.forward(&b.pre_mlp_norm.forward(&x)?)?;
            x = (x + b.post_mlp_norm.forward(&h)?)?;
        }
        cache.advance(layout.new);
        let last = self.norm.forward(&layers::last_token(&x)?)?;
        let logits = layers::logits(&self.head, &last)?;
        match self.final_softcap {
            Some(cap) => (logits / cap)?.tanh()? * cap,
            None => Ok(logits),
        }
    }
}
