//! Matrix products of the linear layers, computed so that a row of the input gets the
//! same bits whatever other rows share the product (batch invariance on the CPU).
//!
//! candle's CPU matmul hands (rows, k) x (k, n) to the `gemm` crate. `gemm` blocks the
//! reduction dimension with a depth `kc` chosen from k, its micro-kernel shape and the
//! cache sizes (`gemm_common::cache::kernel_params`): never from the number of rows. Each
//! output element is then one fused multiply-add chain per depth block, in the same
//! order for every row, whatever its position or the thread that runs its tile. The
//! exception is a product with a single row: `gemm` sends it to a matrix-vector kernel
//! that sums in another order. So a lone row is computed as the first of two identical
//! rows; every row then goes through the same blocked kernel. (Two more shapes leave
//! the blocked kernel, k <= 2 and m, n <= 64 with k > 512; no layer of a supported
//! model has them.)
//!
//! Other devices and dtypes keep candle's `Linear`: cuBLAS chooses kernels by shape, so
//! there a row may differ in its last bits from one batch shape to another.

use candle_core::{DType, Module, Result, Tensor};
use candle_nn::Linear;

/// `x W^T + b` over the last dimension of `x`, batch-invariant for f32 on the CPU.
pub fn linear(layer: &Linear, x: &Tensor) -> Result<Tensor> {
    if !(x.device().is_cpu() && x.dtype() == DType::F32 && layer.weight().dtype() == DType::F32) {
        return layer.forward(x);
    }
    let mut dims = x.dims().to_vec();
    let k = *dims.last().unwrap_or(&0);
    let rows = x.elem_count() / k.max(1);
    let x2 = x.contiguous()?.reshape((rows, k))?;
    let w = layer.weight().t()?;
    let y = if rows == 1 {
        Tensor::cat(&[&x2, &x2], 0)?.matmul(&w)?.narrow(0, 0, 1)?
    } else {
        x2.matmul(&w)?
    };
    let y = match layer.bias() {
        Some(b) => y.broadcast_add(b)?,
        None => y,
    };
    let last = dims.len() - 1;
    dims[last] = y.dim(1)?;
    y.reshape(dims)
}

/// `x W^T` for a 2-d `x` (rows, k), batch-invariant for f32 on the CPU.
pub fn matmul_t(x: &Tensor, weight: &Tensor) -> Result<Tensor> {
    linear(&Linear::new(weight.clone(), None), x)
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    fn bits(t: &Tensor) -> Result<Vec<u32>> {
        Ok(t.flatten_all()?
            .to_vec1::<f32>()?
            .iter()
            .map(|x| x.to_bits())
            .collect())
    }

    #[test]
    fn a_row_has_the_same_bits_alone_and_among_other_rows() -> Result<()> {
        let dev = Device::Cpu;
        // Depths below and above one block, widths of a small and a wide layer.
        for (k, n) in [(256, 704), (704, 256), (1536, 2048)] {
            let w = Tensor::randn(0f32, 1.0, (n, k), &dev)?;
            let b = Tensor::randn(0f32, 1.0, n, &dev)?;
            let layer = Linear::new(w, Some(b));
            let x = Tensor::randn(0f32, 1.0, (67, k), &dev)?;
            let all = bits(&linear(&layer, &x)?)?;
            for (start, len) in [(0, 1), (5, 1), (66, 1), (3, 2), (10, 7), (0, 32), (30, 37)] {
                let part = bits(&linear(&layer, &x.narrow(0, start, len)?)?)?;
                assert_eq!(
                    part,
                    all[start * n..(start + len) * n],
                    "k {k} n {n} rows {start}+{len}"
                );
            }
        }
        Ok(())
    }
}
