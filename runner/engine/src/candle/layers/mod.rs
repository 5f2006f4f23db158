//! Pieces the model files share: rotary tables per token position, the padded and
//! grouped attention, and the gated MLP. Each op chooses by device and dtype: `cpu/`'s
//! batch-invariant kernels for f32 on the CPU, candle's ops elsewhere, arranged for a
//! GPU where that saves launches or uploads (the mask built on the device, products
//! through views of the stacked weights).

use crate::candle::cpu;
pub use crate::candle::cpu::GatedAct;
use crate::candle::weights::Weights;
mod embedding;
mod names;
mod proj;
use crate::candle::runtime::kv_cache::StepLayout;
use candle_core::{DType, Device, Result, Tensor};
use candle_nn::{Linear, Module};
pub use embedding::Embedding;
pub use names::{GateUpNames, QkvNames, TensorNames, SEPARATE};
pub use proj::Proj;

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

/// Which keys each query of one forward step sees: the step's layout and, for local
/// layers, a sliding window. The dense additive mask is built only where the
/// attention needs it (not on the CPU, whose fused kernel reads the layout).
pub struct Mask {
    layout: StepLayout,
    window: Option<usize>,
    dense: Option<Tensor>,
}

impl Mask {
    pub fn new(layout: &StepLayout, window: Option<usize>, device: &Device) -> Result<Self> {
        let dense = match device {
            Device::Cpu => None,
            _ => Some(dense_mask(layout, window, device)?),
        };
        Ok(Mask {
            layout: layout.clone(),
            window,
            dense,
        })
    }
}

/// The additive mask as (rows, 1, 1, new, past + new) f32, shaped to broadcast over
/// grouped attention scores. Built where it is used from each query's span: the host
/// uploads two numbers per query, not a float per query and slot (at 400 rows of 4,000
/// slots, 6.4 MB filled and copied at every decode step), and the device compares them
/// with the slot indices. `log` maps visible (1) to exactly 0 and hidden (0) to -inf.
fn dense_mask(layout: &StepLayout, window: Option<usize>, device: &Device) -> Result<Tensor> {
    let total = layout.past + layout.new;
    let queries = layout.rows() * layout.new;
    let (first, last): (Vec<u32>, Vec<u32>) = layout
        .spans(window)
        .into_iter()
        .map(|(f, l)| (f as u32, l as u32))
        .unzip();
    let first = Tensor::from_vec(first, (queries, 1), device)?;
    let last = Tensor::from_vec(last, (queries, 1), device)?;
    let slots = Tensor::arange(0u32, total as u32, device)?.reshape((1, total))?;
    let visible = slots
        .broadcast_ge(&first)?
        .mul(&slots.broadcast_le(&last)?)?;
    visible
        .to_dtype(DType::F32)?
        .log()?
        .reshape((layout.rows(), 1, 1, layout.new, total))
}

/// Score elements (rows x heads x queries x slots) one attention pass may hold. Long
/// prefills are split into query chunks below this: the scores of a 1,500-token prompt
/// would otherwise be a tensor of tens of MB per layer, which the allocator hands back
/// to the kernel after each use, so every layer paid page faults on fresh memory.
const SCORE_BUDGET: usize = 1 << 21;

/// The score budget of a GPU: 2^28 f32 elements (1 GiB; the softmax and its bf16 copy
/// take about as much again while a block runs). A GPU gains nothing from small chunks
/// and pays launches for each: one layer of a 2,500-token prompt of Qwen2.5-7B (28
/// heads) is one block of 175M scores instead of 84 chunks.
pub(crate) const GPU_SCORE_BUDGET: usize = 1 << 28;

/// Score elements one attention block may hold on `device`.
fn score_budget(device: &Device) -> usize {
    if device.is_cpu() {
        SCORE_BUDGET
    } else {
        GPU_SCORE_BUDGET
    }
}

/// Scaled dot-product attention with grouped key/value heads.
///
/// q: (rows, heads, new, d); k, v: (rows, kv_heads, slots, d). Keys and values may be
/// views into larger cache buffers (strided in the slot dimension); they are read in
/// place. Returns (rows, new, heads * d). f32 on the CPU takes the fused kernel; other
/// devices and dtypes take candle ops with the dense mask.
pub fn attention(q: &Tensor, k: &Tensor, v: &Tensor, mask: &Mask, scale: f64) -> Result<Tensor> {
    let f32_cpu = [q, k, v]
        .iter()
        .all(|t| t.device().is_cpu() && t.dtype() == DType::F32);
    if f32_cpu {
        return cpu::attention::attention(q, k, v, &mask.layout, mask.window, scale as f32);
    }
    let dense = match &mask.dense {
        Some(m) => m.clone(),
        None => dense_mask(&mask.layout, mask.window, q.device())?,
    };
    chunked_attention(q, k, v, &dense, scale, score_budget(q.device()))
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

/// The query, key and value projections as one matrix product (their weights stacked
/// at load): one pass over the input instead of three.
#[derive(Debug, Clone)]
pub struct QkvProjection {
    qkv: Proj,
    heads: usize,
    kv_heads: usize,
    head_dim: usize,
}

impl QkvProjection {
    /// `vb` holds the projections under `names`, with biases when `bias`; separate
    /// ones are stacked here, a fused one is already stacked as q, k, v.
    pub fn load(
        vb: &candle_nn::VarBuilder,
        names: &QkvNames,
        hidden: usize,
        (heads, kv_heads, head_dim): (usize, usize, usize),
        bias: bool,
        weights: &Weights,
    ) -> Result<Self> {
        let (q, kv) = (heads * head_dim, kv_heads * head_dim);
        let qkv = match names {
            QkvNames::Fused(name) => Proj::load(vb, &[(name, q + 2 * kv)], hidden, bias, weights)?,
            QkvNames::Separate([qn, kn, vn]) => {
                Proj::load(vb, &[(qn, q), (kn, kv), (vn, kv)], hidden, bias, weights)?
            }
        };
        Ok(QkvProjection {
            qkv,
            heads,
            kv_heads,
            head_dim,
        })
    }

    /// (rows, new, hidden) -> q (rows, heads, new, d), k and v (rows, kv_heads, new, d),
    /// each contiguous.
    pub fn forward(&self, x: &Tensor) -> Result<(Tensor, Tensor, Tensor)> {
        let (rows, new, _) = x.dims3()?;
        if let Some(dense) = self.qkv.dense() {
            if new == 1 && dense.bias().is_none() && !x.device().is_cpu() {
                return self.forward_parts(dense, x);
            }
        }
        let all = self.heads + 2 * self.kv_heads;
        let y = self
            .qkv
            .forward(x)?
            .reshape((rows, new, all, self.head_dim))?
            .transpose(1, 2)?;
        let q = y.narrow(1, 0, self.heads)?.contiguous()?;
        let k = y.narrow(1, self.heads, self.kv_heads)?.contiguous()?;
        let v = y
            .narrow(1, self.heads + self.kv_heads, self.kv_heads)?
            .contiguous()?;
        Ok((q, k, v))
    }

    /// A decode step's q, k and v as three products through views of the stacked weight
    /// (its rows are q, k, v in turn, so each part is a contiguous slice of it). Each
    /// product comes out in its part's own buffer, already laid out (rows, heads, 1, d),
    /// where splitting the stacked product takes a copy per part: on a GPU, three copies
    /// (a kernel and a shape upload each) fewer per layer for two more products. Not
    /// with a bias: it would take three broadcast adds, each with its own upload. Not on
    /// the CPU, whose products take packed weights (`cpu::packed`).
    fn forward_parts(&self, dense: &Linear, x: &Tensor) -> Result<(Tensor, Tensor, Tensor)> {
        let (rows, new, _) = x.dims3()?;
        let d = self.head_dim;
        let part = |first: usize, heads: usize| -> Result<Tensor> {
            let weight = dense.weight().narrow(0, first * d, heads * d)?;
            Linear::new(weight, None)
                .forward(x)?
                .reshape((rows, new, heads, d))?
                .transpose(1, 2)
        };
        let (h, kv) = (self.heads, self.kv_heads);
        Ok((part(0, h)?, part(h, kv)?, part(h + kv, kv)?))
    }

    /// [`QkvProjection::forward`] with q and k rotated by the step's tables, as
    /// [`apply_rope`] would. f32 on the CPU splits and rotates in one pass, in
    /// parallel; candle takes a single-threaded copy per part and a rope pass.
    pub fn forward_rotated(
        &self,
        x: &Tensor,
        cos: &Tensor,
        sin: &Tensor,
    ) -> Result<(Tensor, Tensor, Tensor)> {
        let f32_cpu = [x, cos, sin]
            .iter()
            .all(|t| t.device().is_cpu() && t.dtype() == DType::F32);
        if !f32_cpu || self.qkv.dense().is_some() {
            let (q, k, v) = self.forward(x)?;
            return Ok((apply_rope(&q, cos, sin)?, apply_rope(&k, cos, sin)?, v));
        }
        let (rows, new, _) = x.dims3()?;
        // The bias is added in the kernel's pass rather than by a pass of its own.
        let y = self.qkv.forward_t(&x.reshape((rows * new, x.dim(2)?))?)?;
        let dims = (self.heads, self.kv_heads, self.head_dim);
        cpu::split_rotate(&y, self.qkv.bias(), (rows, new), dims, cos, sin)
    }
}

/// down(act(gate(x)) * up(x)), with gate and up as one matrix product (their weights
/// stacked at load) and, for f32 on the CPU, the activation and product in one pass.
#[derive(Debug, Clone)]
pub struct GatedMlp {
    gate_up: Proj,
    down: Proj,
    inner: usize,
    act: GatedAct,
}

impl GatedMlp {
    /// `vb` holds the projections under `names`; separate gate and up weights are
    /// stacked here, a fused one is already stacked as gate, up.
    pub fn load(
        vb: candle_nn::VarBuilder,
        names: &GateUpNames,
        hidden: usize,
        inner: usize,
        act: GatedAct,
        weights: &Weights,
    ) -> Result<Self> {
        let gate_up = match names {
            GateUpNames::Fused(name) => {
                Proj::load(&vb, &[(name, 2 * inner)], hidden, false, weights)?
            }
            GateUpNames::Separate([gate, up]) => {
                Proj::load(&vb, &[(gate, inner), (up, inner)], hidden, false, weights)?
            }
        };
        Ok(GatedMlp {
            gate_up,
            down: Proj::load(&vb, &[("down_proj", hidden)], inner, false, weights)?,
            inner,
            act,
        })
    }

    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let gated_out = match self.gate_up.dense() {
            Some(dense) if !x.device().is_cpu() => self.gated_parts(dense, x)?,
            _ => gated(&self.gate_up.forward(x)?, self.inner, self.act)?,
        };
        self.down.forward(&gated_out)
    }

    /// act(gate(x)) * up(x) as two products through views of the stacked weight (gate's
    /// rows, then up's), so that both come out contiguous: the activation and the
    /// product over the two halves of one product read strided operands, each of which
    /// a GPU kernel is told through a shape upload. Two fewer uploads per layer for one
    /// more product.
    fn gated_parts(&self, dense: &Linear, x: &Tensor) -> Result<Tensor> {
        let half = |first: usize| -> Result<Tensor> {
            let weight = dense.weight().narrow(0, first, self.inner)?;
            Linear::new(weight, None).forward(x)
        };
        activate(&half(0)?, self.act)? * half(self.inner)?
    }
}

/// RMSNorm over the last dimension with a learned scale.
#[derive(Debug, Clone)]
pub struct RmsNorm {
    weight: Tensor,
    eps: f32,
}

impl RmsNorm {
    pub fn load(vb: candle_nn::VarBuilder, size: usize, eps: f64) -> Result<Self> {
        Ok(RmsNorm {
            weight: vb.get(size, "weight")?,
            eps: eps as f32,
        })
    }

    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        rms_norm(x, &self.weight, self.eps)
    }
}

/// `x / sqrt(mean(x^2) + eps) * weight` over the last dimension: one vectorised pass
/// for f32 on the CPU, candle's kernel elsewhere.
pub fn rms_norm(x: &Tensor, weight: &Tensor, eps: f32) -> Result<Tensor> {
    let x = x.contiguous()?;
    let f32_cpu = [&x, weight]
        .iter()
        .all(|t| t.device().is_cpu() && t.dtype() == DType::F32);
    if !f32_cpu {
        return candle_nn::ops::rms_norm(&x, weight, eps);
    }
    cpu::rms_norm(&x, weight, eps)
}

/// (.., 2 * inner) -> (.., inner): act(first half) * second half.
fn gated(gate_up: &Tensor, inner: usize, act: GatedAct) -> Result<Tensor> {
    if gate_up.device().is_cpu() && gate_up.dtype() == DType::F32 {
        return cpu::gated(gate_up, inner, act);
    }
    gated_ops(gate_up, inner, act)
}

/// [`gated`] with candle's ops, for dtypes without the fused pass.
fn gated_ops(gate_up: &Tensor, inner: usize, act: GatedAct) -> Result<Tensor> {
    let last = gate_up.rank() - 1;
    let gate = gate_up.narrow(last, 0, inner)?;
    activate(&gate, act)? * gate_up.narrow(last, inner, inner)?
}

fn activate(gate: &Tensor, act: GatedAct) -> Result<Tensor> {
    match act {
        GatedAct::Silu => candle_nn::ops::silu(gate),
        GatedAct::GeluTanh => gate.gelu(),
    }
}

/// The hidden state of each row's last token, (rows, 1, hidden).
pub fn last_token(x: &Tensor) -> Result<Tensor> {
    let new = x.dim(1)?;
    x.narrow(1, new - 1, 1)
}

/// Logits (rows, vocab) in f32 from the last-token hidden state.
pub fn logits(head: &Proj, last: &Tensor) -> Result<Tensor> {
    head.forward(last)?.squeeze(1)?.to_dtype(DType::F32)
}

#[cfg(test)]
mod tests;
