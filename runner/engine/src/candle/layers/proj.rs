//! A linear layer in the weight format the model was loaded in: candle's product on a
//! GPU; on the CPU, packed panels for f32, bf16 and q8_0, and candle's quantized dot
//! products for q4_K.

use crate::candle::cpu::packed::{PackedWeight, Packing, Q8_BLOCK};
use crate::candle::cpu::quantized::{QuantWeight, Q4K_BLOCK};
use crate::candle::weights::{WeightFormat, Weights};
use candle_core::{DType, Module, Result, Tensor};
use candle_nn::{Linear, VarBuilder};

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
        let bias = if bias {
            let b = parts
                .iter()
                .map(|(name, out)| vb.pp(name).get(*out, "bias"))
                .collect::<Result<Vec<_>>>()?;
            Some(Tensor::cat(&b, 0)?)
        } else {
            None
        };
        let refs: Vec<&Tensor> = weights.iter().collect();
        Self::from_parts(&refs, bias, format, on_cpu)
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
            WeightFormat::F32 => Packing::F32,
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
        }
    }

    pub fn bias(&self) -> Option<&Tensor> {
        match self {
            Proj::Dense(l) => l.bias(),
            Proj::Packed { bias, .. } | Proj::Quantized { bias, .. } => bias.as_ref(),
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

#[cfg(test)]
mod tests;
