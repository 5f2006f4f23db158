//! The CPU's kernel set, over the kernels of `candle/cpu/`: activations in f32 (`LoadOptions::resolve` loads every CPU
//! model so), weights packed in f32, bf16 or q8_0 panels or held in q4_K and GGUF
//! blocks, and the fused attention that reads the step's layout instead of a mask.
//! Every op is row-local, so a row's bits do not depend on the rows beside it.

use crate::candle::cpu::packed::{PackedWeight, Packing, Q8_BLOCK};
use crate::candle::cpu::quantized::{QuantWeight, Rows, Q4K_BLOCK};
use crate::candle::cpu::{self, GatedAct};
use crate::candle::gguf::{held_as_q8_panels, FileRows, GgufPart};
use crate::candle::layers::kernels::{all_float, split_stacked, HeadDims, Kernels};
use crate::candle::layers::{Mask, Proj, Weights};
use crate::candle::runtime::kv_cache::{SlotOrder, StepLayout, PANEL};
use crate::candle::weights::WeightFormat;
use candle_core::quantized::{GgmlDType, QTensor, QuantizedType};
use candle_core::{DType, Device, Result, Tensor};
use std::sync::Arc;

/// Where a GGUF part's rows are read from when it is packed.
enum Source {
    Held(Arc<QTensor>),
    File(FileRows),
}

/// The batch-invariant f32 kernels of `cpu/`.
#[derive(Debug, Clone, Copy)]
pub struct CpuKernels;

impl Kernels for CpuKernels {
    fn name(&self) -> &'static str {
        "cpu"
    }

    /// A quantization reads a tensor as stored rather than widened to f32 first, which
    /// would hold a third copy of it while loading.
    fn weight_dtype(&self, weights: &Weights, _activations: DType) -> DType {
        match weights.format {
            WeightFormat::Bf16 => DType::BF16,
            WeightFormat::F32 => DType::F32,
            _ => weights.stored,
        }
    }

    fn proj(&self, parts: &[&Tensor], bias: Option<Tensor>, format: WeightFormat) -> Result<Proj> {
        let inputs = parts[0].dim(1)?;
        let packing = match format {
            // A GGUF file's float tensors come here widened to f32 (`gguf_proj`).
            WeightFormat::F32 | WeightFormat::Gguf => Packing::F32,
            WeightFormat::Bf16 => Packing::Bf16,
            WeightFormat::Q4K if inputs.is_multiple_of(Q4K_BLOCK) => {
                return Ok(Proj::Quantized {
                    weight: QuantWeight::quantize_q4k(parts)?,
                    bias,
                });
            }
            // A layer whose inputs do not fill q4_K's blocks of 256 takes q8_0's of 32,
            // as llama.cpp's quantizer falls back for such tensors.
            WeightFormat::Q8_0 | WeightFormat::Q4K => Packing::Q8_0,
        };
        if packing == Packing::Q8_0 && !inputs.is_multiple_of(Q8_BLOCK) {
            candle_core::bail!(
                "{format} quantizes blocks of at least {Q8_BLOCK} inputs; this layer has {inputs}: load it as bf16 or f32"
            );
        }
        Ok(Proj::Packed {
            weight: PackedWeight::pack(parts, packing)?,
            bias,
        })
    }

    /// Float tensors are packed like a safetensors checkpoint's (bf16 when all are
    /// bf16, else f32); block types of 4 bits or more are held as q8_0 panels; Q2_K
    /// and Q3_K stay in their blocks, multiplied by candle's products.
    fn gguf_proj(
        &self,
        parts: &[GgufPart],
        inputs: usize,
        bias: Option<Tensor>,
        device: &Device,
        _activations: DType,
    ) -> Result<Proj> {
        if all_float(parts) {
            let all_bf16 = parts.iter().all(|p| p.dtype() == GgmlDType::BF16);
            let (format, dtype) = if all_bf16 {
                (WeightFormat::Bf16, DType::BF16)
            } else {
                (WeightFormat::F32, DType::F32)
            };
            let dense = parts
                .iter()
                .map(|p| p.tensor()?.dequantize(device)?.to_dtype(dtype))
                .collect::<Result<Vec<_>>>()?;
            let refs: Vec<&Tensor> = dense.iter().collect();
            return self.proj(&refs, bias, format);
        }
        if parts.iter().any(|p| held_as_q8_panels(p.dtype())) {
            // The panels' integer products run ahead of candle's block products, and
            // for 4- and 5-bit types (scalar code in candle) by about 30 times. Each
            // row is read from the file (or the blocks a table holds), widened exactly
            // and quantized to q8_0 as it is packed: one more rounding, at 8 bits, of
            // 4- to 6-bit values (exact for Q8_0).
            let sources = parts
                .iter()
                .map(|p| match &p.held {
                    Some(t) => Ok(Source::Held(t.clone())),
                    None => p.file_rows().map(Source::File),
                })
                .collect::<Result<Vec<_>>>()?;
            let rows: Vec<Rows> = sources
                .iter()
                .map(|s| match s {
                    Source::Held(t) => Rows::Blocks(t),
                    Source::File(f) => Rows::Source(f),
                })
                .collect();
            return Ok(Proj::Packed {
                weight: PackedWeight::q8_0_of_rows(&rows)?,
                bias,
            });
        }
        // The blocks are copied out of candle's tensor to be multiplied by its
        // row-by-row dot products, whose results do not depend on the rows beside
        // (QMatMul's repacked kernels on the CPU choose by the batch's size).
        let blocks = parts
            .iter()
            .map(|p| {
                let t = p.tensor()?;
                let b: Arc<dyn QuantizedType> = Arc::from(t.dtype().from_data(t.data()?));
                Ok((p.outputs, b))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Proj::Quantized {
            weight: QuantWeight::from_blocks(inputs, blocks),
            bias,
        })
    }

    /// A prompt touches a few thousand of a table's rows; a 7B model's table is 1.1 GB.
    fn table_from_file(&self) -> bool {
        true
    }

    /// A table held in memory (weights from no checkpoint file) keeps f32 weights'
    /// f32 and takes bf16 for every other format: its rows are looked up exactly.
    fn held_table_dtype(&self, format: WeightFormat, _activations: DType) -> DType {
        match format {
            WeightFormat::F32 => DType::F32,
            _ => DType::BF16,
        }
    }

    /// None: the fused attention reads each query's span from the layout.
    fn dense_mask(
        &self,
        _layout: &StepLayout,
        _window: Option<usize>,
        _device: &Device,
    ) -> Result<Option<Tensor>> {
        Ok(None)
    }

    /// Panels wherever the fused products read the keys (head dimensions of whole
    /// vectors): a decode step then reads each head's keys as one stream, as its
    /// products take them, instead of packing every panel as it goes.
    fn key_order(&self, head_dim: usize) -> SlotOrder {
        match head_dim.is_multiple_of(PANEL) {
            true => SlotOrder::Panels,
            false => SlotOrder::Rows,
        }
    }

    fn attention(
        &self,
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        mask: &Mask,
        scale: f64,
    ) -> Result<Tensor> {
        let order = self.key_order(k.dim(3)?);
        let (layout, window) = (&mask.layout, mask.window);
        cpu::attention::attention_in(q, (k, order), v, layout, window, scale as f32)
    }

    fn rms_norm(&self, x: &Tensor, weight: &Tensor, eps: f32) -> Result<Tensor> {
        cpu::rms_norm(&x.contiguous()?, weight, eps)
    }

    fn qkv(&self, proj: &Proj, x: &Tensor, dims: HeadDims) -> Result<(Tensor, Tensor, Tensor)> {
        split_stacked(&proj.forward(x)?, dims)
    }

    /// Splits and rotates in one parallel pass, the bias added in it rather than by a
    /// pass of its own; candle would take a single-threaded copy per part and a rope
    /// pass.
    fn qkv_rotated(
        &self,
        proj: &Proj,
        x: &Tensor,
        (cos, sin): (&Tensor, &Tensor),
        dims: HeadDims,
    ) -> Result<(Tensor, Tensor, Tensor)> {
        let (rows, new, hidden) = x.dims3()?;
        let y = proj.forward_t(&x.reshape((rows * new, hidden))?)?;
        let dims = (dims.heads, dims.kv_heads, dims.head_dim);
        cpu::split_rotate(&y, proj.bias(), (rows, new), dims, cos, sin)
    }

    fn gated(&self, gate_up: &Proj, x: &Tensor, inner: usize, act: GatedAct) -> Result<Tensor> {
        cpu::gated(&gate_up.forward(x)?, inner, act)
    }
}
