//! The GPU's kernel set: candle's ops in the activations' dtype (bf16 by default),
//! arranged for a GPU where that saves launches or uploads: the mask is built on the
//! device from two numbers per query, long prefills are scored in large blocks, and a
//! decode step's products go through views of the stacked weights. Nothing here is
//! batch-invariant (cuBLAS chooses its kernels by shape). Any device runs it; the CPU
//! runs it only when a test rehearses the CUDA path.

use crate::candle::cpu::GatedAct;
use crate::candle::gguf::GgufPart;
use crate::candle::layers::kernels::{all_float, split_stacked, HeadDims, Kernels};
use crate::candle::layers::{apply_rope, Mask, Proj, Weights};
use crate::candle::runtime::kv_cache::{SlotOrder, StepLayout};
use crate::candle::weights::WeightFormat;
use candle_core::quantized::QMatMul;
use candle_core::{DType, Device, Module, Result, Tensor};
use candle_nn::Linear;

/// candle's ops, for CUDA.
#[derive(Debug, Clone, Copy)]
pub struct GpuKernels;

/// The score budget of one attention block: 2^28 f32 elements (1 GiB; the softmax and
/// its bf16 copy take about as much again while a block runs). A GPU gains nothing
/// from small chunks and pays launches for each: one layer of a 2,500-token prompt of
/// Qwen2.5-7B (28 heads) is one block of 175M scores instead of 84 chunks.
pub(crate) const GPU_SCORE_BUDGET: usize = 1 << 28;

impl Kernels for GpuKernels {
    fn name(&self) -> &'static str {
        "gpu"
    }

    fn weight_dtype(&self, _weights: &Weights, activations: DType) -> DType {
        activations
    }

    fn proj(&self, parts: &[&Tensor], bias: Option<Tensor>, _format: WeightFormat) -> Result<Proj> {
        let weight = match parts {
            [one] => (*one).clone(),
            _ => Tensor::cat(parts, 0)?,
        };
        Ok(Proj::Dense(Linear::new(weight, bias)))
    }

    /// Float tensors are widened to the activations' dtype; blocks stay blocks, one
    /// `QMatMul` per stacked part.
    fn gguf_proj(
        &self,
        parts: &[GgufPart],
        _inputs: usize,
        bias: Option<Tensor>,
        device: &Device,
        activations: DType,
    ) -> Result<Proj> {
        if all_float(parts) {
            let dense = parts
                .iter()
                .map(|p| p.tensor()?.dequantize(device)?.to_dtype(activations))
                .collect::<Result<Vec<_>>>()?;
            let refs: Vec<&Tensor> = dense.iter().collect();
            return self.proj(&refs, bias, WeightFormat::Gguf);
        }
        let parts = parts
            .iter()
            .map(|p| QMatMul::from_arc(p.tensor()?))
            .collect::<Result<Vec<_>>>()?;
        Ok(Proj::Device { parts, bias })
    }

    /// Held on the device, where lookups are an index_select.
    fn table_from_file(&self) -> bool {
        false
    }

    fn held_table_dtype(&self, _format: WeightFormat, activations: DType) -> DType {
        activations
    }

    fn dense_mask(
        &self,
        layout: &StepLayout,
        window: Option<usize>,
        device: &Device,
    ) -> Result<Option<Tensor>> {
        dense_mask(layout, window, device).map(Some)
    }

    fn key_order(&self, _head_dim: usize) -> SlotOrder {
        SlotOrder::Rows
    }

    fn attention(
        &self,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        mask: &Mask,
        scale: f64,
    ) -> Result<Tensor> {
        let dense = match &mask.dense {
            Some(m) => m.clone(),
            None => dense_mask(&mask.layout, mask.window, q.device())?,
        };
        chunked_attention(q, k, v, &dense, scale, GPU_SCORE_BUDGET)
    }

    fn rms_norm(&self, x: &Tensor, weight: &Tensor, eps: f32) -> Result<Tensor> {
        candle_nn::ops::rms_norm(&x.contiguous()?, weight, eps)
    }

    fn qkv(&self, proj: &Proj, x: &Tensor, dims: HeadDims) -> Result<(Tensor, Tensor, Tensor)> {
        match proj.dense() {
            Some(dense) if x.dim(1)? == 1 && dense.bias().is_none() => qkv_parts(dense, x, dims),
            _ => split_stacked(&proj.forward(x)?, dims),
        }
    }

    fn qkv_rotated(
        &self,
        proj: &Proj,
        x: &Tensor,
        (cos, sin): (&Tensor, &Tensor),
        dims: HeadDims,
    ) -> Result<(Tensor, Tensor, Tensor)> {
        let (q, k, v) = self.qkv(proj, x, dims)?;
        Ok((apply_rope(&q, cos, sin)?, apply_rope(&k, cos, sin)?, v))
    }

    fn gated(&self, gate_up: &Proj, x: &Tensor, inner: usize, act: GatedAct) -> Result<Tensor> {
        match gate_up.dense() {
            Some(dense) => gated_parts(dense, x, inner, act),
            None => gated_ops(&gate_up.forward(x)?, inner, act),
        }
    }
}

/// The additive mask as (rows, 1, 1, new, past + new) f32, shaped to broadcast over
/// grouped attention scores. Built where it is used from each query's span: the host
/// uploads two numbers per query, not a float per query and slot (at 400 rows of 4,000
/// slots, 6.4 MB filled and copied at every decode step), and the device compares them
/// with the slot indices. `log` maps visible (1) to exactly 0 and hidden (0) to -inf.
pub(crate) fn dense_mask(
    layout: &StepLayout,
    window: Option<usize>,
    device: &Device,
) -> Result<Tensor> {
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

/// Attention in query chunks whose scores stay within `budget` elements.
pub(crate) fn chunked_attention(
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
pub(crate) fn attention_block(
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

/// A decode step's q, k and v as three products through views of the stacked weight
/// (its rows are q, k, v in turn, so each part is a contiguous slice of it). Each
/// product comes out in its part's own buffer, already laid out (rows, heads, 1, d),
/// where splitting the stacked product takes a copy per part: three copies (a kernel
/// and a shape upload each) fewer per layer for two more products. Not with a bias: it
/// would take three broadcast adds, each with its own upload.
pub(crate) fn qkv_parts(
    dense: &Linear,
    x: &Tensor,
    dims: HeadDims,
) -> Result<(Tensor, Tensor, Tensor)> {
    let (rows, new, _) = x.dims3()?;
    let d = dims.head_dim;
    let part = |first: usize, heads: usize| -> Result<Tensor> {
        let weight = dense.weight().narrow(0, first * d, heads * d)?;
        Linear::new(weight, None)
            .forward(x)?
            .reshape((rows, new, heads, d))?
            .transpose(1, 2)
    };
    let (h, kv) = (dims.heads, dims.kv_heads);
    Ok((part(0, h)?, part(h, kv)?, part(h + kv, kv)?))
}

/// act(gate(x)) * up(x) as two products through views of the stacked weight (gate's
/// rows, then up's), so that both come out contiguous: the activation and the product
/// over the two halves of one product read strided operands, each of which a GPU
/// kernel is told through a shape upload. Two fewer uploads per layer for one more
/// product.
pub(crate) fn gated_parts(
    dense: &Linear,
    x: &Tensor,
    inner: usize,
    act: GatedAct,
) -> Result<Tensor> {
    let half = |first: usize| -> Result<Tensor> {
        let weight = dense.weight().narrow(0, first, inner)?;
        Linear::new(weight, None).forward(x)
    };
    activate(&half(0)?, act)? * half(inner)?
}

/// (.., 2 * inner) -> (.., inner): act(first half) * second half, with candle's ops.
pub(crate) fn gated_ops(gate_up: &Tensor, inner: usize, act: GatedAct) -> Result<Tensor> {
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
