//! Matrix products of the linear layers, computed so that a row of the input gets the
//! same bits whatever other rows share the product (batch invariance on the CPU).
//!
//! candle's CPU matmul hands (rows, k) x (k, n) to the `gemm` crate. `gemm` blocks the
//! reduction dimension with a depth `kc` chosen from k, its micro-kernel shape and the
//! cache sizes (`gemm_common::cache::kernel_params`): never from the number of rows. Each
//! output element is then one fused multiply-add chain per depth block, in the same
//! order for every row, whatever its position or the thread that runs its tile. The
//! exception is a product with a single row: `gemm` sends it to a matrix-vector kernel
//! that sums in another order, and so do two more shapes: a product of at most 16 x 16
//! outputs (m x n <= 256) goes to a "horizontal" kernel of dot products, and one with
//! m, n <= 64 blocks its depth at 512 rather than by `kernel_params`. Whether a row
//! falls into these depends on how many rows share the product. So a product is padded
//! with zero rows up to a floor that keeps it out of all three, whatever its own rows:
//! 2 rows, more than 256 / n rows, and 65 rows where n <= 64 (layers that narrow occur
//! in small models only: Qwen2.5-0.5B's key and value projections are 128 wide). Every
//! row then goes through the same blocked kernel. (One more shape leaves it, k <= 2; no
//! layer has it.)
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
    let floor = min_rows(w.dim(1)?);
    let y = if rows < floor {
        let pad = Tensor::zeros((floor - rows, k), x2.dtype(), x2.device())?;
        Tensor::cat(&[&x2, &pad], 0)?
            .matmul(&w)?
            .narrow(0, 0, rows)?
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

/// The fewest rows a product with `n` outputs per row is computed with, so that `gemm`
/// takes its blocked kernel with depth blocks from `kernel_params` (see the module doc).
fn min_rows(n: usize) -> usize {
    if n <= 64 {
        65
    } else {
        (256 / n + 1).max(2)
    }
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
        // And the narrow layers of small models and of the tiny fixtures, where m x n
        // <= 256 or m, n <= 64 would leave the blocked kernel.
        for (k, n) in [
            (256, 704),
            (704, 256),
            (1536, 2048),
            (64, 32),
            (64, 64),
            (128, 64),
            (64, 128),
            (896, 128),
            (1024, 48),
        ] {
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
