//! Pieces the model files share: rotary tables per token position, the padded and
//! grouped attention, and the gated MLP.

use super::kv_cache::StepLayout;
use candle_core::{DType, Device, Module, Result, Tensor};
use candle_nn::Linear;

/// Rotary embedding frequencies; the tables are computed in f32 for the positions of
/// each step (per row, since rows sit at different positions).
#[derive(Debug, Clone)]
pub struct Rope {
    /// (1, head_dim / 2)
    inv_freq: Tensor,
}

impl Rope {
    /// Inverse frequencies `base^(-2i/d)`; `adjust` rescales each one (RoPE scaling).
    pub fn new(
        head_dim: usize,
        base: f64,
        adjust: impl Fn(f64) -> f64,
        device: &Device,
    ) -> Result<Self> {
        let inv: Vec<f32> = (0..head_dim / 2)
            .map(|i| {
                let f = 1.0 / (base as f32).powf(2.0 * i as f32 / head_dim as f32);
                adjust(f as f64) as f32
            })
            .collect();
        Ok(Rope {
            inv_freq: Tensor::from_vec(inv, (1, head_dim / 2), device)?,
        })
    }

    /// cos and sin tables (rows, new, head_dim / 2) in `dtype`.
    pub fn tables(&self, layout: &StepLayout, dtype: DType) -> Result<(Tensor, Tensor)> {
        let pos: Vec<f32> = layout.positions().iter().map(|&p| p as f32).collect();
        let n = pos.len();
        let pos = Tensor::from_vec(pos, (n, 1), self.inv_freq.device())?;
        let freqs = pos.broadcast_mul(&self.inv_freq)?;
        let shape = (layout.rows(), layout.new, freqs.dim(1)?);
        let cos = freqs.cos()?.reshape(shape)?.to_dtype(dtype)?;
        let sin = freqs.sin()?.reshape(shape)?.to_dtype(dtype)?;
        Ok((cos, sin))
    }
}

/// Rotates (rows, heads, new, head_dim) by the step's tables (half-split layout).
pub fn apply_rope(x: &Tensor, cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
    candle_nn::rotary_emb::rope(&x.contiguous()?, cos, sin)
}

/// The step's additive mask as (rows, 1, 1, new, past + new) f32, shaped to broadcast
/// over grouped attention scores.
pub fn mask_tensor(layout: &StepLayout, window: Option<usize>, device: &Device) -> Result<Tensor> {
    let total = layout.past + layout.new;
    Tensor::from_vec(
        layout.mask(window),
        (layout.rows(), 1, 1, layout.new, total),
        device,
    )
}

/// Score elements (rows x heads x queries x slots) one attention pass may hold. Long
/// prefills are split into query chunks below this: the scores of a 1,500-token prompt
/// would otherwise be a tensor of tens of MB per layer, which the allocator hands back
/// to the kernel after each use, so every layer paid page faults on fresh memory.
const SCORE_BUDGET: usize = 1 << 21;

/// Scaled dot-product attention with grouped key/value heads and an additive mask.
///
/// q: (rows, heads, new, d); k, v: (rows, kv_heads, slots, d); mask from
/// [`mask_tensor`]. Keys and values may be views into larger cache buffers (strided
/// in the slot dimension); the matmuls read them in place. Returns (rows, new, heads * d).
pub fn attention(q: &Tensor, k: &Tensor, v: &Tensor, mask: &Tensor, scale: f64) -> Result<Tensor> {
    chunked_attention(q, k, v, mask, scale, SCORE_BUDGET)
}

fn chunked_attention(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: &Tensor,
    scale: f64,
    budget: usize,
) -> Result<Tensor> {
    let (rows, heads, new, _) = q.dims4()?;
    let slots = k.dim(2)?;
    let chunk = (budget / (rows * heads * slots).max(1)).max(1);
    if new <= chunk {
        return attention_block(q, k, v, mask, scale);
    }
    // The new tokens occupy the last `new` slots, so a query chunk ending at new token
    // `start + len` cannot see any slot after `past + start + len`: those keys are cut
    // off instead of being scored and masked, which halves the work of a long prefill.
    let past = slots - new;
    let mut parts = Vec::new();
    let mut start = 0;
    while start < new {
        let len = chunk.min(new - start);
        let visible = past + start + len;
        let q = q.narrow(2, start, len)?;
        let k = k.narrow(2, 0, visible)?;
        let v = v.narrow(2, 0, visible)?;
        let mask = mask
            .narrow(3, start, len)?
            .narrow(4, 0, visible)?
            .contiguous()?;
        parts.push(attention_block(&q, &k, &v, &mask, scale)?);
        start += len;
    }
    Tensor::cat(&parts, 1)
}

/// One block of queries. The query heads of one group are folded into the row
/// dimension of one matmul, so keys and values are never copied per query head.
/// Scores and softmax run in f32.
fn attention_block(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: &Tensor,
    scale: f64,
) -> Result<Tensor> {
    let (rows, heads, new, d) = q.dims4()?;
    let kv_heads = k.dim(1)?;
    let group = heads / kv_heads;
    let slots = k.dim(2)?;
    let q = q.contiguous()?.reshape((rows, kv_heads, group * new, d))?;
    let scores = (q.matmul(&k.t()?)? * scale)?
        .to_dtype(DType::F32)?
        .reshape((rows, kv_heads, group, new, slots))?
        .broadcast_add(mask)?;
    let probs = candle_nn::ops::softmax_last_dim(&scores)?
        .to_dtype(v.dtype())?
        .reshape((rows, kv_heads, group * new, slots))?;
    probs
        .matmul(v)?
        .reshape((rows, heads, new, d))?
        .transpose(1, 2)?
        .reshape((rows, new, heads * d))
}

/// (rows, new, heads * d) -> (rows, heads, new, d)
pub fn split_heads(x: &Tensor, heads: usize, d: usize) -> Result<Tensor> {
    let (rows, new, _) = x.dims3()?;
    x.reshape((rows, new, heads, d))?
        .transpose(1, 2)?
        .contiguous()
}

/// down(act(gate(x)) * up(x))
#[derive(Debug, Clone)]
pub struct GatedMlp {
    pub gate: Linear,
    pub up: Linear,
    pub down: Linear,
    pub act: candle_nn::Activation,
}

impl GatedMlp {
    pub fn load(
        vb: candle_nn::VarBuilder,
        hidden: usize,
        inner: usize,
        act: candle_nn::Activation,
    ) -> Result<Self> {
        Ok(GatedMlp {
            gate: candle_nn::linear_no_bias(hidden, inner, vb.pp("gate_proj"))?,
            up: candle_nn::linear_no_bias(hidden, inner, vb.pp("up_proj"))?,
            down: candle_nn::linear_no_bias(inner, hidden, vb.pp("down_proj"))?,
            act,
        })
    }

    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let gate = self.gate.forward(x)?.apply(&self.act)?;
        self.down.forward(&(gate * self.up.forward(x)?)?)
    }
}

/// The hidden state of each row's last token, (rows, 1, hidden).
pub fn last_token(x: &Tensor) -> Result<Tensor> {
    let new = x.dim(1)?;
    x.narrow(1, new - 1, 1)
}

/// Logits (rows, vocab) in f32 from the last-token hidden state.
pub fn logits(head: &Linear, last: &Tensor) -> Result<Tensor> {
    head.forward(last)?.squeeze(1)?.to_dtype(DType::F32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::candle::kv_cache::StepLayout;

    #[test]
    fn query_chunks_give_the_same_attention_as_one_block() -> Result<()> {
        let dev = Device::Cpu;
        let (rows, heads, kv, new, d) = (2, 4, 2, 9, 8);
        let q = Tensor::randn(0f32, 1.0, (rows, heads, new, d), &dev)?;
        let k = Tensor::randn(0f32, 1.0, (rows, kv, new, d), &dev)?;
        let v = Tensor::randn(0f32, 1.0, (rows, kv, new, d), &dev)?;
        let layout = StepLayout {
            past: 0,
            new,
            pad: vec![0, 3],
        };
        let mask = mask_tensor(&layout, None, &dev)?;
        let whole = attention_block(&q, &k, &v, &mask, 0.3)?;
        // A budget of two query rows per chunk: five chunks, the last one short.
        let chunked = chunked_attention(&q, &k, &v, &mask, 0.3, 2 * rows * heads * new)?;
        assert_eq!(chunked.dims(), whole.dims());
        let diff = (chunked - whole)?
            .abs()?
            .flatten_all()?
            .max(0)?
            .to_scalar::<f32>()?;
        assert!(diff < 1e-6, "{diff}");
        Ok(())
    }
}
