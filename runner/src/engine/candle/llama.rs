//! Llama 3 (3.1): a pre-norm decoder with grouped-query attention, SwiGLU MLP, RMSNorm,
//! and RoPE whose frequencies are rescaled by the "llama3" rule: long wavelengths are
//! divided by `factor`, short ones kept, and the band between interpolated.

use super::kv_cache::KvCache;
use super::layers::{self, attention, GatedAct, GatedMlp, Mask, QkvProjection, RmsNorm, Rope};
use super::CausalLm;
use candle_core::{DType, Module, Result, Tensor};
use candle_nn::{Embedding, Linear, VarBuilder};
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
    pub fn head_dim(&self) -> usize {
        self.head_dim
            .unwrap_or(self.hidden_size / self.num_attention_heads)
    }
}

struct Attention {
    qkv: QkvProjection,
    o: Linear,
    head_dim: usize,
}

impl Attention {
    fn load(vb: VarBuilder, c: &Config) -> Result<Self> {
        let d = c.head_dim();
        let (h, kv) = (c.num_attention_heads, c.num_key_value_heads);
        Ok(Attention {
            qkv: QkvProjection::load(&vb, c.hidden_size, (h, kv, d), c.attention_bias)?,
            o: candle_nn::linear_b(h * d, c.hidden_size, c.attention_bias, vb.pp("o_proj"))?,
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
        let (k, v) = cache.append(layer, &k, &v)?;
        let y = attention(&q, &k, &v, &step.mask, 1.0 / (d as f64).sqrt())?;
        super::row_matmul::linear(&self.o, &y)
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
    head: Linear,
    rope: Rope,
    dtype: DType,
}

impl Llama {
    pub fn load(vb: VarBuilder, c: &Config) -> Result<Self> {
        let m = vb.pp("model");
        let embed = candle_nn::embedding(c.vocab_size, c.hidden_size, m.pp("embed_tokens"))?;
        let blocks = (0..c.num_hidden_layers)
            .map(|i| {
                let b = m.pp("layers").pp(i);
                Ok(Block {
                    attn_norm: RmsNorm::load(
                        b.pp("input_layernorm"),
                        c.hidden_size,
                        c.rms_norm_eps,
                    )?,
                    attn: Attention::load(b.pp("self_attn"), c)?,
                    mlp_norm: RmsNorm::load(
                        b.pp("post_attention_layernorm"),
                        c.hidden_size,
                        c.rms_norm_eps,
                    )?,
                    mlp: GatedMlp::load(
                        b.pp("mlp"),
                        c.hidden_size,
                        c.intermediate_size,
                        GatedAct::Silu,
                    )?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let norm = RmsNorm::load(m.pp("norm"), c.hidden_size, c.rms_norm_eps)?;
        let head = if c.tie_word_embeddings {
            Linear::new(embed.embeddings().clone(), None)
        } else {
            candle_nn::linear_no_bias(c.hidden_size, c.vocab_size, vb.pp("lm_head"))?
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
            dtype: vb.dtype(),
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
        let mask = Mask::new(&layout, None, tokens.device())?;
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
