//! The GGUF file as the source a `VarBuilder` reads the layers' small tensors from
//! (norms, and the embedding table where it is held whole): dequantized to the asked
//! dtype, under their Hugging Face names.

use crate::candle::gguf::GgufModel;
use candle_core::{DType, Device, Result, Shape, Tensor};
use std::sync::Arc;

pub struct GgufBackend(pub Arc<GgufModel>);

impl candle_nn::var_builder::SimpleBackend for GgufBackend {
    fn get(
        &self,
        s: Shape,
        name: &str,
        _: candle_nn::Init,
        dtype: DType,
        dev: &Device,
    ) -> Result<Tensor> {
        let (gguf, shape) = self.lookup(name)?;
        if shape != &s {
            candle_core::bail!(
                "tensor {gguf} ({name}) has shape {:?}, the architecture expects {s:?}",
                shape.dims()
            );
        }
        self.get_unchecked(name, dtype, dev)
    }

    fn get_unchecked(&self, name: &str, dtype: DType, dev: &Device) -> Result<Tensor> {
        let (gguf, _) = self.lookup(name)?;
        let t = self.0.read(&gguf).map_err(candle_core::Error::wrap)?;
        let mut w = t.dequantize(dev)?;
        // llama.cpp's converter stores Gemma's norm scales as 1 + w, the factor they
        // multiply by; the model adds the 1 itself, as to a Hugging Face checkpoint's.
        if self.0.architecture() == "gemma3" && name.ends_with("norm.weight") {
            w = (w - 1.0)?;
        }
        w.to_dtype(dtype)
    }

    fn contains_tensor(&self, name: &str) -> bool {
        self.0.by_hf_name(name).is_some()
    }
}

impl GgufBackend {
    fn lookup(&self, name: &str) -> Result<(String, &Shape)> {
        match self.0.by_hf_name(name) {
            Some(found) => Ok(found),
            None => candle_core::bail!(
                "no tensor for {name} (GGUF name {})",
                crate::candle::gguf::names::gguf_name(name, self.0.architecture())
                    .unwrap_or_else(|| "unknown".into())
            ),
        }
    }
}
