//! A linear layer in the weight format the model was loaded in: candle's product on a
//! GPU; on the CPU, packed panels for f32, bf16 and q8_0, and candle's quantized dot
//! products for q4_K. A GGUF file's weights keep their stored blocks: candle's
//! quantized dot products on the CPU, its `QMatMul` on a GPU.

use crate::candle::cpu::packed::{PackedWeight, Packing, Q8_BLOCK};
use crate::candle::cpu::quantized::{QuantWeight, Q4K_BLOCK};
use crate::candle::gguf::{has_cpu_kernel, GgufModel};
use crate::candle::weights::{WeightFormat, Weights};
use candle_core::quantized::{GgmlDType, QMatMul, QuantizedType};
use candle_core::{DType, Module, Result, Tensor};
use candle_nn::{Linear, VarBuilder};
use std::sync::Arc;

#[derive(Debug, Clone)]
pub enum Proj {
    Dense(Linear),
    Packed {
        weight: PackedWeight,
        bias: Option<Tensor>,
    },
    Quantized {
        weight: QuantWeight,
        bias: Option<Tensor>,
    },
    /// A GGUF file's blocks on a GPU, one product per stacked part.
    Device {
        parts: Vec<QMatMul>,
        bias: Option<Tensor>,
    },
}

impl Proj {
    /// The weights under `vb.pp(name)/weight` for each `(name, outputs)` of `parts`,
    /// stacked along the outputs in order, each `inputs` wide; their biases when `bias`.
    pub fn load(
        vb: &VarBuilder,
        parts: &[(&str, usize)],
        inputs: usize,
        bias: bool,
        weights: &Weights,
    ) -> Result<Self> {
        if let Some(gguf) = &weights.gguf {
            return Self::from_gguf(vb, parts, inputs, bias, gguf);
        }
        let on_cpu = vb.device().is_cpu();
        let format = weights.format;
        let dtype = match format {
            WeightFormat::Bf16 if on_cpu => DType::BF16,
            WeightFormat::F32 if on_cpu => DType::F32,
            _ if on_cpu => weights.stored,
            _ => vb.dtype(),
        };
        let weights = parts
            .iter()
            .map(|(name, out)| {
                vb.pp(name).get_with_hints_dtype(
                    (*out, inputs),
                    "weight",
                    Default::default(),
                    dtype,
                )
            })
            .collect::<Result<Vec<_>>>()?;
        let bias = stacked_bias(vb, parts, bias)?;
        let refs: Vec<&Tensor> = weights.iter().collect();
        Self::from_parts(&refs, bias, format, on_cpu)
    }

    /// [`Proj::load`] from a GGUF file: each part in the blocks the file stores it in;
    /// parts stored as floats are packed as f32 (bf16 when all are bf16) like a
    /// safetensors checkpoint's.
    fn from_gguf(
        vb: &VarBuilder,
        parts: &[(&str, usize)],
        inputs: usize,
        bias: bool,
        gguf: &GgufModel,
    ) -> Result<Self> {
        let found = parts
            .iter()
            .map(|(name, out)| {
                let hf = format!("{}.weight", vb.pp(name).prefix());
                let Some((name, t)) = gguf.by_hf_name(&hf) else {
                    candle_core::bail!("{} has no tensor for {hf}", gguf.path().display());
                };
                if t.shape().dims() != [*out, inputs] {
                    candle_core::bail!(
                        "tensor {name} has shape {:?}, the architecture expects [{out}, {inputs}]",
                        t.shape().dims()
                    );
                }
                Ok((*out, t.clone()))
            })
            .collect::<Result<Vec<_>>>()?;
        let bias = stacked_bias(vb, parts, bias)?;
        let on_cpu = vb.device().is_cpu();
        let is_float =
            |t: GgmlDType| matches!(t, GgmlDType::F32 | GgmlDType::F16 | GgmlDType::BF16);
        if found.iter().all(|(_, t)| is_float(t.dtype())) {
            let all_bf16 = found.iter().all(|(_, t)| t.dtype() == GgmlDType::BF16);
            let (format, dtype) = if all_bf16 && on_cpu {
                (WeightFormat::Bf16, DType::BF16)
            } else {
                (WeightFormat::F32, DType::F32)
            };
            let dense = found
                .iter()
                .map(|(_, t)| t.dequantize(vb.device())?.to_dtype(dtype))
                .collect::<Result<Vec<_>>>()?;
            let refs: Vec<&Tensor> = dense.iter().collect();
            return Self::from_parts(&refs, bias, format, on_cpu);
        }
        if on_cpu && found.iter().any(|(_, t)| !has_cpu_kernel(t.dtype())) {
            // candle multiplies these block types with scalar code, about 30 times slower
            // than its vectorised kernels (SmolLM2's Q4_1: 31 prompt tokens/s against
            // 1,051 as q8_0 panels). Widened exactly to f32, the weights are held as
            // q8_0 panels instead: one more rounding, at 8 bits, of 4- or 5-bit values.
            let dense = found
                .iter()
                .map(|(_, t)| t.dequantize(vb.device()))
                .collect::<Result<Vec<_>>>()?;
            let refs: Vec<&Tensor> = dense.iter().collect();
            return Self::from_parts(&refs, bias, WeightFormat::Q8_0, on_cpu);
        }
        if on_cpu {
            // The blocks are copied out of candle's tensor to be multiplied by its
            // row-by-row dot products, whose results do not depend on the rows beside
            // (QMatMul's repacked kernels on the CPU choose by the batch's size).
            let blocks = found
                .iter()
                .map(|(out, t)| {
                    let data = t.data()?;
                    let b: Arc<dyn QuantizedType> = Arc::from(t.dtype().from_data(data));
                    Ok((*out, b))
                })
                .collect::<Result<Vec<_>>>()?;
            return Ok(Proj::Quantized {
                weight: QuantWeight::from_blocks(inputs, blocks),
                bias,
            });
        }
        let parts = found
            .into_iter()
            .map(|(_, t)| QMatMul::from_arc(t))
            .collect::<Result<Vec<_>>>()?;
        Ok(Proj::Device { parts, bias })
    }

    /// A layer over an existing (outputs, inputs) weight (a tied output head).
    pub fn from_weight(weight: &Tensor, weights: &Weights) -> Result<Self> {
        Self::from_parts(&[weight], None, weights.format, weight.device().is_cpu())
    }

    fn from_parts(
        parts: &[&Tensor],
        bias: Option<Tensor>,
        format: WeightFormat,
        on_cpu: bool,
    ) -> Result<Self> {
        if !on_cpu {
            let weight = if parts.len() == 1 {
                parts[0].clone()
            } else {
                Tensor::cat(parts, 0)?
            };
            return Ok(Proj::Dense(Linear::new(weight, bias)));
        }
        let inputs = parts[0].dim(1)?;
        let packing = match format {
            // A GGUF file's float tensors come here widened to f32 (Proj::from_gguf).
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

    /// `x W^T + b` over the last dimension.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let y = self.forward_t(x)?;
        match self.bias() {
            Some(b) if !matches!(self, Proj::Dense(_)) => y.broadcast_add(b),
            _ => Ok(y),
        }
    }

    /// `x W^T` without the bias (a caller that adds it in a pass of its own); for
    /// a dense layer, with it.
    pub fn forward_t(&self, x: &Tensor) -> Result<Tensor> {
        match self {
            Proj::Dense(l) => l.forward(x),
            Proj::Packed { weight, .. } => weight.forward(x),
            Proj::Quantized { weight, .. } => weight.forward(x),
            Proj::Device { parts, .. } => {
                let x = x.contiguous()?;
                let ys = parts
                    .iter()
                    .map(|p| p.forward(&x))
                    .collect::<Result<Vec<_>>>()?;
                Tensor::cat(&ys, x.rank() - 1)
            }
        }
    }

    pub fn bias(&self) -> Option<&Tensor> {
        match self {
            Proj::Dense(l) => l.bias(),
            Proj::Packed { bias, .. }
            | Proj::Quantized { bias, .. }
            | Proj::Device { bias, .. } => bias.as_ref(),
        }
    }

    /// candle's layer, where the product is candle's (GPUs).
    pub fn dense(&self) -> Option<&Linear> {
        match self {
            Proj::Dense(l) => Some(l),
            _ => None,
        }
    }
}

/// The parts' biases stacked in the order of their outputs, when the layer has them.
fn stacked_bias(vb: &VarBuilder, parts: &[(&str, usize)], bias: bool) -> Result<Option<Tensor>> {
    if !bias {
        return Ok(None);
    }
    let b = parts
        .iter()
        .map(|(name, out)| vb.pp(name).get(*out, "bias"))
        .collect::<Result<Vec<_>>>()?;
    Ok(Some(Tensor::cat(&b, 0)?))
}

#[cfg(test)]
mod tests;
