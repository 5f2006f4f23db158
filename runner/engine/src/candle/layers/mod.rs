//! Pieces the model files share: rotary tables per token position, the padded and
//! grouped attention, the gated MLP, the norm and the linear layers. Each holds the
//! kernel set chosen at load (`kernels.rs`) and computes through it: the layers say
//! what is computed, the sets how, on their device.

use crate::candle::checkpoint::Checkpoint;
pub use crate::candle::cpu::GatedAct;
use crate::candle::weights::WeightFormat;
mod embedding;
pub mod kernels;
mod names;
mod proj;
use crate::candle::runtime::kv_cache::{KvCache, StepLayout};
use candle_core::{DType, Device, Result, Tensor};
pub use embedding::Embedding;
use kernels::{CpuKernels, HeadDims, Kernels};
pub use names::{GateUpNames, QkvNames, TensorNames, SEPARATE};
pub use proj::Proj;

/// What loading a layer's weights needs: the format to hold them in, the dtype the
/// checkpoint stores them in (a quantization reads a tensor as stored rather than
/// widened to f32 first, which would hold a third copy of it while loading), and on
/// the CPU the checkpoint itself, which the embedding table is read from row by row
/// rather than held (layers::Embedding).
#[derive(Debug, Clone)]
pub struct Weights {
    pub format: WeightFormat,
    pub stored: DType,
    pub checkpoint: Option<Checkpoint>,
    /// A GGUF file's tensors, which the layers take in their stored blocks.
    pub gguf: Option<std::sync::Arc<crate::candle::gguf::GgufModel>>,
    /// The kernels the layers run, chosen with the device (`load::kernels_for`).
    pub kernels: &'static dyn Kernels,
}

impl Weights {
    /// f32 weights from an f32 checkpoint, all held in memory, for the CPU.
    pub const F32: Weights = Weights {
        format: WeightFormat::F32,
        stored: DType::F32,
        checkpoint: None,
        gguf: None,
        kernels: &CpuKernels,
    };
}

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
/// layers, a sliding window, with the additive mask where the step's kernel set reads
/// one (the CPU's fused attention reads the layout).
pub struct Mask {
    kernels: &'static dyn Kernels,
    pub(crate) layout: StepLayout,
    pub(crate) window: Option<usize>,
    pub(crate) dense: Option<Tensor>,
}

impl Mask {
    pub fn new(
        layout: &StepLayout,
        window: Option<usize>,
        device: &Device,
        kernels: &'static dyn Kernels,
    ) -> Result<Self> {
        Ok(Mask {
            kernels,
            layout: layout.clone(),
            window,
            dense: kernels.dense_mask(layout, window, device)?,
        })
    }
}

/// Appends the step's keys and values of `layer` to `cache`, the keys in the order the
/// mask's kernels read them in, and attends over all the layer's keys and values so
/// far: scaled dot-product attention with grouped key/value heads, by those kernels.
/// q: (rows, heads, new, d); k, v: (rows, kv_heads, new, d). Returns (rows, new, heads
/// * d).
pub fn attention(
    q: &Tensor,
    (k, v): (&Tensor, &Tensor),
    (cache, layer): (&mut KvCache, usize),
    mask: &Mask,
    scale: f64,
) -> Result<Tensor> {
    let order = mask.kernels.key_order(k.dim(3)?);
    let (k, v) = cache.append_in(layer, k, v, order)?;
    mask.kernels.attention(q, &k, &v, mask, scale)
}

/// The query, key and value projections as one matrix product (their weights stacked
/// at load): one pass over the input instead of three.
#[derive(Debug, Clone)]
pub struct QkvProjection {
    qkv: Proj,
    dims: HeadDims,
    kernels: &'static dyn Kernels,
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
            dims: HeadDims {
                heads,
                kv_heads,
                head_dim,
            },
            kernels: weights.kernels,
        })
    }

    /// (rows, new, hidden) -> q (rows, heads, new, d), k and v (rows, kv_heads, new, d),
    /// each contiguous.
    pub fn forward(&self, x: &Tensor) -> Result<(Tensor, Tensor, Tensor)> {
        self.kernels.qkv(&self.qkv, x, self.dims)
    }

    /// [`QkvProjection::forward`] with q and k rotated by the step's tables, as
    /// [`apply_rope`] would.
    pub fn forward_rotated(
        &self,
        x: &Tensor,
        cos: &Tensor,
        sin: &Tensor,
    ) -> Result<(Tensor, Tensor, Tensor)> {
        self.kernels
            .qkv_rotated(&self.qkv, x, (cos, sin), self.dims)
    }
}

/// down(act(gate(x)) * up(x)), with gate and up as one matrix product (their weights
/// stacked at load).
#[derive(Debug, Clone)]
pub struct GatedMlp {
    gate_up: Proj,
    down: Proj,
    inner: usize,
    act: GatedAct,
    kernels: &'static dyn Kernels,
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
            kernels: weights.kernels,
        })
    }

    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let gated = self.kernels.gated(&self.gate_up, x, self.inner, self.act)?;
        self.down.forward(&gated)
    }
}

/// RMSNorm over the last dimension with a learned scale.
#[derive(Debug, Clone)]
pub struct RmsNorm {
    weight: Tensor,
    eps: f32,
    kernels: &'static dyn Kernels,
}

impl RmsNorm {
    pub fn load(
        vb: candle_nn::VarBuilder,
        size: usize,
        eps: f64,
        kernels: &'static dyn Kernels,
    ) -> Result<Self> {
        Ok(RmsNorm {
            weight: vb.get(size, "weight")?,
            eps: eps as f32,
            kernels,
        })
    }

    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        self.kernels.rms_norm(x, &self.weight, self.eps)
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
