//! Qwen2 (Qwen2.5): a pre-norm decoder with grouped-query attention whose q, k and v
//! projections carry a bias, SwiGLU MLP, RMSNorm, and tied or separate embeddings.

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
    /// Absent in Qwen2.5 configs: hidden_size / num_attention_heads.
    pub head_dim: Option<usize>,
    pub rms_norm_eps: f64,
    pub rope_theta: f64,
    #[serde(default)]
    pub tie_word_embeddings: bool,
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
            qkv: QkvProjection::load(&vb, c.hidden_size, (h, kv, d), true)?,
            o: candle_nn::linear_no_bias(h * d, c.hidden_size, vb.pp("o_proj"))?,
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

pub struct Qwen2 {
    embed: Embedding,
    blocks: Vec<Block>,
    norm: RmsNorm,
    head: Linear,
    rope: Rope,
    dtype: DType,
}

impl Qwen2 {
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
        let rope = Rope::new(c.head_dim(), c.rope_theta, |f| f, vb.device())?;
        Ok(Qwen2 {
            embed,
            blocks,
            norm,
            head,
            rope,
            dtype: vb.dtype(),
        })
    }
}

impl CausalLm for Qwen2 {
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
