//! Kernels for f32 on the CPU, gathered as the CPU's kernel set
//! (`layers/kernels/cpu.rs`), which the layers of every model loaded on the CPU hold. Nothing here is needed for
//! (or tested against) other devices. The linear layers' products take packed weights
//! (`packed`): f32, bf16 or q8_0 blocks.

pub mod attention;
pub mod isa;
pub mod kernels;
pub mod lanes;
pub mod packed;
pub(crate) mod prefetch;
pub mod quantized;
pub mod vectorised;

pub use kernels::{gated, rms_norm, split_rotate};
pub use vectorised::GatedAct;

use candle_core::{DType, Result, Storage, Tensor};

/// Runs `f` on the values of a contiguous CPU tensor, without copying them.
pub(crate) fn with_slice<T: candle_core::WithDType, R>(
    t: &Tensor,
    f: impl FnOnce(&[T]) -> Result<R>,
) -> Result<R> {
    let t = t.contiguous()?;
    let (storage, layout) = t.storage_and_layout();
    let Storage::Cpu(cpu) = &*storage else {
        candle_core::bail!("CPU kernels read tensors on the CPU");
    };
    let all = cpu.as_slice::<T>()?;
    let start = layout.start_offset();
    f(&all[start..start + t.elem_count()])
}

/// The input of a product `x W^T` with weights of depth `k`: `x` as contiguous f32, its
/// rows, and the output's dimensions but the last.
pub(crate) fn product_input(x: &Tensor, k: usize) -> Result<(Tensor, usize, Vec<usize>)> {
    let mut dims = x.dims().to_vec();
    let depth = dims.pop().unwrap_or(0);
    if depth != k {
        candle_core::bail!("product: input depth {depth}, weight depth {k}");
    }
    let rows = dims.iter().product();
    Ok((x.to_dtype(DType::F32)?.contiguous()?, rows, dims))
}
