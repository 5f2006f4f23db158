//! Llama 3 (3.1): a pre-norm decoder with grouped-query attention, SwiGLU MLP, RMSNorm,
//! and RoPE whose frequencies are rescaled by the "llama3" rule: long wavelengths are
//! divided by `factor`, short ones kept, and the band between interpolated.
//!
//! The same decoder runs two more architectures, whose differences are config flags:
//! Qwen2 (Qwen2.5) has biases on q, k and v (not on o) and never rescales RoPE; Phi-3
//! stores q, k, v and gate, up as fused matrices (the registry's tensor names) and may
//! attend over a sliding window.

use crate::candle::layers::kernels::Kernels;
use crate::candle::layers::TensorNames;
use crate::candle::layers::Weights;
use crate::candle::layers::{
    self, attention, GatedAct, GatedMlp, Mask, QkvProjection, RmsNorm, Rope,
};
use crate::candle::layers::{Embedding, Proj};
use crate::candle::models::shape::Shape;
use crate::candle::models::ModelConfig;
use crate::candle::runtime::kv_cache::KvCache;
use crate::candle::CausalLm;
use candle_core::{DType, Result, Tensor};
use candle_nn::VarBuilder;
use serde::Deserialize;

#[derive(Debug, Clone, Deserialize)]
pub struct Config {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub intermediate_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub num_key_value_heads: usize,
    /// Absent in Llama 3.1's config: hidden_size / num_attention_heads.
    pub head_dim: Option<usize>,
    pub rms_norm_eps: f64,
    pub rope_theta: f64,
    pub rope_scaling: Option<RopeScaling>,
    #[serde(default)]
    pub attention_bias: bool,
    #[serde(default)]
    pub tie_word_embeddings: bool,
    /// Qwen2: q, k and v carry a bias although `attention_bias` is absent and o has none.
    #[serde(skip)]
    pub qkv_bias: bool,
    /// Phi-3: each query sees only the last this many tokens (itself included). Read
    /// only for Phi-3: Qwen2 configs name a window they do not use.
    #[serde(skip)]
    pub sliding_window: Option<usize>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct RopeScaling {
    pub rope_type: String,
    pub factor: f64,
    pub low_freq_factor: f64,
    pub high_freq_factor: f64,
    pub original_max_position_embeddings: f64,
}

impl RopeScaling {
    fn adjust(&self, freq: f64) -> f64 {
        let low_wavelen = self.original_max_position_embeddings / self.low_freq_factor;
        let high_wavelen = self.original_max_position_embeddings / self.high_freq_factor;
        let wavelen = 2.0 * std::f64::consts::PI / freq;
        if wavelen < high_wavelen {
            freq
        } else if wavelen > low_wavelen {
            freq / self.factor
        } else {
            let smooth = (self.original_max_position_embeddings / wavelen - self.low_freq_factor)
                / (self.high_freq_factor - self.low_freq_factor);
            (1.0 - smooth) * freq / self.factor + smooth * freq
        }
    }
}

impl Config {
    /// 0 where no heads make it undefined, which [`ModelConfig::shape`]'s check refuses.
    pub fn head_dim(&self) -> usize {
        self.head_dim.unwrap_or_else(|| {
            self.hidden_size
                .checked_div(self.num_attention_heads)
                .unwrap_or(0)
        })
    }
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
            head_dim: self.head_dim(),
        }
    }

    fn kv_values_per_token(&self) -> usize {
        self.num_hidden_layers * self.num_key_value_heads * self.head_dim() * 2
    }

    fn load(
        &self,
        vb: VarBuilder,
        names: &TensorNames,
        weights: &Weights,
    ) -> Result<Box<dyn CausalLm>> {
        Ok(Box::new(Llama::load(vb, self, names, weights)?))
    }
}

fn from_value(v: serde_json::Value) -> std::result::Result<Config, String> {
    serde_json::from_value(v).map_err(|e| e.to_string())
}

fn object(text: &str) -> std::result::Result<serde_json::Value, String> {
    serde_json::from_str(text).map_err(|e| e.to_string())
}

/// Whether `key` is present with a value other than null.
fn is_set(v: &serde_json::Value, key: &str) -> bool {
    v.get(key).is_some_and(|x| !x.is_null())
}

pub fn parse_llama(text: &str) -> std::result::Result<Box<dyn ModelConfig>, String> {
    Ok(Box::new(from_value(object(text)?)?))
}

pub fn parse_qwen2(text: &str) -> std::result::Result<Box<dyn ModelConfig>, String> {
    let mut v = object(text)?;
    // Qwen2.5's long-context (YaRN) entry is for inputs past 32k tokens, which the
    // engine has never rescaled for; it is not Llama 3's rule and must not be read so.
    if let Some(o) = v.as_object_mut() {
        o.remove("rope_scaling");
        o.remove("attention_bias");
    }
    let mut c = from_value(v)?;
    c.qkv_bias = true;
    Ok(Box::new(c))
}

pub fn parse_phi3(text: &str) -> std::result::Result<Box<dyn ModelConfig>, String> {
    let v = object(text)?;
    if is_set(&v, "rope_scaling") {
        return Err("phi3: rope_scaling (longrope, su, yarn) is not supported; \
                    only checkpoints without it (the 4k-context ones) load"
            .into());
    }
    let partial = v.get("partial_rotary_factor").and_then(|x| x.as_f64());
    if partial.is_some_and(|p| p != 1.0) {
        return Err(format!(
            "phi3: partial_rotary_factor {} is not supported (only 1.0)",
            partial.unwrap_or_default()
        ));
    }
    let window = match v.get("sliding_window") {
        None | Some(serde_json::Value::Null) => None,
        Some(w) => Some(
            w.as_u64()
                .filter(|&w| w > 0)
                .ok_or_else(|| format!("phi3: sliding_window {w} is not a positive integer"))?
                as usize,
        ),
    };
    let mut c = from_value(v)?;
    c.sliding_window = window;
    Ok(Box::new(c))
}

struct Attention {
    qkv: QkvProjection,
    o: Proj,
    head_dim: usize,
}

impl Attention {
    fn load(vb: VarBuilder, c: &Config, names: &TensorNames, weights: &Weights) -> Result<Self> {
        let d = c.head_dim();
        let (h, kv) = (c.num_attention_heads, c.num_key_value_heads);
        let qkv_bias = c.attention_bias || c.qkv_bias;
        Ok(Attention {
            qkv: QkvProjection::load(
                &vb,
                &names.qkv,
                c.hidden_size,
                (h, kv, d),
                qkv_bias,
                weights,
            )?,
            o: Proj::load(
                &vb,
                &[("o_proj", c.hidden_size)],
                h * d,
                c.attention_bias,
                weights,
            )?,
            head_dim: d,
        })
    }

    fn forward(
        &self,
        x: &Tensor,
        step: &Step,
        cache: &mut KvCache,
        layer: usize,
    ) -> Result<Tensor> {
        let d = self.head_dim;
        let (q, k, v) = self.qkv.forward_rotated(x, &step.cos, &step.sin)?;
        let scale = 1.0 / (d as f64).sqrt();
        let y = attention(&q, (&k, &v), (cache, layer), &step.mask, scale)?;
        self.o.forward(&y)
    }
}

struct Block {
    attn_norm: RmsNorm,
    attn: Attention,
    mlp_norm: RmsNorm,
    mlp: GatedMlp,
}

/// What every layer of one forward step shares.
struct Step {
    cos: Tensor,
    sin: Tensor,
    mask: Mask,
}

pub struct Llama {
    embed: Embedding,
    blocks: Vec<Block>,
    norm: RmsNorm,
    head: Proj,
    rope: Rope,
    window: Option<usize>,
    dtype: DType,
    kernels: &'static dyn Kernels,
}

impl Llama {
    pub fn load(
        vb: VarBuilder,
        c: &Config,
        names: &TensorNames,
        weights: &Weights,
    ) -> Result<Self> {
        let m = vb.pp("model");
        let embed = Embedding::load(&m, "embed_tokens", (c.vocab_size, c.hidden_size), weights)?;
        let blocks = (0..c.num_hidden_layers)
            .map(|i| {
                let b = m.pp("layers").pp(i);
                Ok(Block {
                    attn_norm: RmsNorm::load(
                        b.pp("input_layernorm"),
                        c.hidden_size,
                        c.rms_norm_eps,
                        weights.kernels,
                    )?,
                    attn: Attention::load(b.pp("self_attn"), c, names, weights)?,
                    mlp_norm: RmsNorm::load(
                        b.pp("post_attention_layernorm"),
                        c.hidden_size,
                        c.rms_norm_eps,
                        weights.kernels,
                    )?,
                    mlp: GatedMlp::load(
                        b.pp("mlp"),
                        &names.gate_up,
                        c.hidden_size,
                        c.intermediate_size,
                        GatedAct::Silu,
                        weights,
                    )?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let norm = RmsNorm::load(m.pp("norm"), c.hidden_size, c.rms_norm_eps, weights.kernels)?;
        let head = if c.tie_word_embeddings {
            embed.tied_head(&m, "embed_tokens", weights)?
        } else {
            Proj::load(
                &vb,
                &[("lm_head", c.vocab_size)],
                c.hidden_size,
                false,
                weights,
            )?
        };
        let rope = match &c.rope_scaling {
            Some(r) if r.rope_type == "llama3" => {
                Rope::new(c.head_dim(), c.rope_theta, |f| r.adjust(f), vb.device())?
            }
            Some(r) => {
                candle_core::bail!("rope scaling {:?} is not supported for llama", r.rope_type)
            }
            None => Rope::new(c.head_dim(), c.rope_theta, |f| f, vb.device())?,
        };
        Ok(Llama {
            embed,
            blocks,
            norm,
            head,
            rope,
            window: c.sliding_window,
            dtype: vb.dtype(),
            kernels: weights.kernels,
        })
    }
}

impl CausalLm for Llama {
    fn layers(&self) -> usize {
        self.blocks.len()
    }

    fn forward(&self, tokens: &Tensor, cache: &mut KvCache) -> Result<Tensor> {
        let layout = cache.layout(tokens.dim(1)?);
        let (cos, sin) = self.rope.tables(&layout, self.dtype)?;
        let mask = Mask::new(&layout, self.window, tokens.device(), self.kernels)?;
        let step = Step { cos, sin, mask };
        let mut x = self.embed.forward(tokens)?;
        for (i, block) in self.blocks.iter().enumerate() {
            let h = block
                .attn
                .forward(&block.attn_norm.forward(&x)?, &step, cache, i)?;
            x = (x + h)?;
            let h = block.mlp.forward(&block.mlp_norm.forward(&x)?)?;
            x = (x + h)?;
        }
        cache.advance(layout.new);
        let last = self.norm.forward(&layers::last_token(&x)?)?;
        layers::logits(&self.head, &last)
    }
}
