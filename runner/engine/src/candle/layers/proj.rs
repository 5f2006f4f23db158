//! A linear layer in the form its kernel set multiplies (`kernels.rs`): candle's
//! layer or `QMatMul`s of a GGUF file's blocks (the GPU's set); packed panels for f32,
//! bf16 and q8_0, or candle's quantized blocks for q4_K and GGUF types with vectorised
//! kernels (the CPU's). The variant says how to multiply; the set chose it at load.

use crate::candle::cpu::packed::PackedWeight;
use crate::candle::cpu::quantized::QuantWeight;
use crate::candle::gguf::GgufModel;
use crate::candle::gguf::GgufPart;
use crate::candle::layers::kernels::Kernels;
use crate::candle::layers::Weights;
use candle_core::quantized::QMatMul;
use candle_core::{Module, Result, Tensor};
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
            return Self::from_gguf(vb, parts, inputs, bias, (gguf, weights.kernels));
        }
        let dtype = weights.kernels.weight_dtype(weights, vb.dtype());
        let tensors = parts
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
        let refs: Vec<&Tensor> = tensors.iter().collect();
        weights.kernels.proj(&refs, bias, weights.format)
    }

    /// [`Proj::load`] from a GGUF file: each part as the file stores it, checked
    /// against the architecture's shape, in the form the kernel set multiplies.
    fn from_gguf(
        vb: &VarBuilder,
        parts: &[(&str, usize)],
        inputs: usize,
        bias: bool,
        (gguf, kernels): (&GgufModel, &'static dyn Kernels),
    ) -> Result<Self> {
        let found = parts
            .iter()
            .map(|(name, out)| {
                let hf = format!("{}.weight", vb.pp(name).prefix());
                let Some((name, shape)) = gguf.by_hf_name(&hf) else {
                    candle_core::bail!("{} has no tensor for {hf}", gguf.path().display());
                };
                if shape.dims() != [*out, inputs] {
                    candle_core::bail!(
                        "tensor {name} has shape {:?}, the architecture expects [{out}, {inputs}]",
                        shape.dims()
                    );
                }
                Ok(GgufPart {
                    outputs: *out,
                    model: gguf,
                    name,
                    held: None,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let bias = stacked_bias(vb, parts, bias)?;
        kernels.gguf_proj(&found, inputs, bias, vb.device(), vb.dtype())
    }

    /// A layer over an existing (outputs, inputs) weight (a tied output head).
    pub fn from_weight(weight: &Tensor, weights: &Weights) -> Result<Self> {
        weights.kernels.proj(&[weight], None, weights.format)
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
