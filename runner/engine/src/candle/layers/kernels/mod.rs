//! The kernel sets a model's layers run: one per kind of device, chosen once, at load
//! (`load::kernels_for`), and held by every layer. A layer calls its set; it never asks
//! where its tensors are or in which dtype.
//!
//! - [`CpuKernels`] (`cpu.rs`, over `candle/cpu/`): f32 activations, packed and quantized
//!   weights, the fused attention over the step's layout; batch-invariant.
//! - [`GpuKernels`] (`gpu.rs`): candle's ops in the activations' dtype, arranged for a
//!   GPU (the mask built on the device, products through views of stacked weights).
//!   Any device can run it, the CPU included, which is how the path no GPU has run yet
//!   is rehearsed.

mod cpu;
pub(crate) mod gpu;

use crate::candle::cpu::GatedAct;
use crate::candle::gguf::GgufPart;
use crate::candle::layers::{Mask, Proj, Weights};
use crate::candle::runtime::kv_cache::{SlotOrder, StepLayout};
use crate::candle::weights::WeightFormat;
use candle_core::{DType, Device, Result, Tensor};
pub use cpu::CpuKernels;
pub use gpu::GpuKernels;

/// The query, key and value heads of an attention layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeadDims {
    pub heads: usize,
    pub kv_heads: usize,
    pub head_dim: usize,
}

/// What a model's layers compute with, on one kind of device.
pub trait Kernels: std::fmt::Debug + Send + Sync {
    /// "cpu" or "gpu", as an engine's description names them.
    fn name(&self) -> &'static str;

    /// The dtype a projection's float weights are read in from a safetensors
    /// checkpoint, for `weights` and activations in `activations`.
    fn weight_dtype(&self, weights: &Weights, activations: DType) -> DType;

    /// A projection over `parts`, each (outputs, inputs), stacked along the outputs,
    /// held in `format`.
    fn proj(&self, parts: &[&Tensor], bias: Option<Tensor>, format: WeightFormat) -> Result<Proj>;

    /// A projection over a GGUF file's tensors, each part with `inputs` columns,
    /// stacked in order; `device` and `activations` are the model's.
    fn gguf_proj(
        &self,
        parts: &[GgufPart],
        inputs: usize,
        bias: Option<Tensor>,
        device: &Device,
        activations: DType,
    ) -> Result<Proj>;

    /// Whether the embedding table is read row by row from a safetensors checkpoint
    /// rather than held in memory.
    fn table_from_file(&self) -> bool;

    /// The dtype an embedding table held in memory is kept in.
    fn held_table_dtype(&self, format: WeightFormat, activations: DType) -> DType;

    /// The additive mask of one step on `device`, where this set's attention reads one
    /// (see [`Mask`]).
    fn dense_mask(
        &self,
        layout: &StepLayout,
        window: Option<usize>,
        device: &Device,
    ) -> Result<Option<Tensor>>;

    /// How a key/value cache should hold the keys of heads of `head_dim` values for
    /// [`Kernels::attention`] to read them.
    fn key_order(&self, head_dim: usize) -> SlotOrder;

    /// Scaled dot-product attention with grouped key/value heads. q: (rows, heads, new,
    /// d); k, v: (rows, kv_heads, slots, d), possibly views into larger cache buffers,
    /// the keys' slots in [`Kernels::key_order`]'s order. Returns (rows, new, heads * d).
    fn attention(
        &self,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        mask: &Mask,
        scale: f64,
    ) -> Result<Tensor>;

    /// `x / sqrt(mean(x^2) + eps) * weight` over the last dimension.
    fn rms_norm(&self, x: &Tensor, weight: &Tensor, eps: f32) -> Result<Tensor>;

    /// (rows, new, hidden) through the stacked q, k, v projection -> q (rows, heads,
    /// new, d), k and v (rows, kv_heads, new, d), each contiguous.
    fn qkv(&self, proj: &Proj, x: &Tensor, dims: HeadDims) -> Result<(Tensor, Tensor, Tensor)>;

    /// [`Kernels::qkv`] with q and k rotated by the step's tables (half-split layout).
    fn qkv_rotated(
        &self,
        proj: &Proj,
        x: &Tensor,
        rope: (&Tensor, &Tensor),
        dims: HeadDims,
    ) -> Result<(Tensor, Tensor, Tensor)>;

    /// act(gate(x)) * up(x) through the stacked gate and up projection, each `inner`
    /// wide.
    fn gated(&self, gate_up: &Proj, x: &Tensor, inner: usize, act: GatedAct) -> Result<Tensor>;
}

/// Whether every part of a GGUF projection is stored as floats (F32, F16, BF16),
/// which both sets widen and multiply as dense weights.
pub(crate) fn all_float(parts: &[GgufPart]) -> bool {
    use candle_core::quantized::GgmlDType;
    parts
        .iter()
        .all(|p| matches!(p.dtype(), GgmlDType::F32 | GgmlDType::F16 | GgmlDType::BF16))
}

/// The stacked product `y` (rows, new, (heads + 2 * kv_heads) * d) split into q, k and
/// v, each contiguous.
pub(crate) fn split_stacked(y: &Tensor, dims: HeadDims) -> Result<(Tensor, Tensor, Tensor)> {
    let (rows, new, _) = y.dims3()?;
    let HeadDims {
        heads,
        kv_heads,
        head_dim,
    } = dims;
    let y = y
        .reshape((rows, new, heads + 2 * kv_heads, head_dim))?
        .transpose(1, 2)?;
    let q = y.narrow(1, 0, heads)?.contiguous()?;
    let k = y.narrow(1, heads, kv_heads)?.contiguous()?;
    let v = y.narrow(1, heads + kv_heads, kv_heads)?.contiguous()?;
    Ok((q, k, v))
}
