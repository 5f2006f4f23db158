//! Weights quantized at load (GGML's q8_0 and q4_K blocks), multiplied by candle's
//! quantized dot products.
//!
//! The blocks are held here and handed to `k_quants::matmul` directly rather than
//! through `QMatMul`: on CPUs with VNNI, `QMatMul` repacks a weight into a second layout
//! at its first product and keeps both, which doubles the memory quantization was
//! meant to halve (a q8_0 7B model peaked at 15.8 GB instead of 8). `k_quants::matmul`
//! quantizes each input row on its own and takes one dot product per (row, output), so
//! a row's bits do not depend on the rows beside it.

use crate::candle::cpu::{product_input, with_slice};
use candle_core::quantized::k_quants::{self, BlockQ4K, BlockQ8_0, GgmlType};
use candle_core::{DType, Device, Result, Tensor};
use rayon::prelude::*;

#[derive(Debug, Clone)]
enum Blocks {
    Q8_0(Vec<BlockQ8_0>),
    Q4K(Vec<BlockQ4K>),
}

/// Which blocks to quantize to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quant {
    Q8_0,
    Q4K,
}

impl Quant {
    pub fn block(self) -> usize {
        match self {
            Quant::Q8_0 => BlockQ8_0::BLCK_SIZE,
            Quant::Q4K => BlockQ4K::BLCK_SIZE,
        }
    }
}

/// A (n, k) weight quantized row by row, for `x W^T`.
#[derive(Debug, Clone)]
pub struct QuantWeight {
    n: usize,
    k: usize,
    blocks: Blocks,
}

impl QuantWeight {
    /// Quantizes `parts` (each (n_i, k), stacked along n in order); rows in parallel,
    /// each widened to f32 on its own, so no f32 copy of a whole weight is made.
    pub fn quantize(parts: &[&Tensor], quant: Quant) -> Result<Self> {
        let k = parts.first().map_or(Ok(0), |p| p.dim(1))?;
        if k % quant.block() != 0 {
            candle_core::bail!(
                "{quant:?} needs inputs in blocks of {}, not {k}",
                quant.block()
            );
        }
        let n: usize = parts.iter().map(|p| p.dim(0)).sum::<Result<usize>>()?;
        let per_row = k / quant.block();
        let mut blocks = match quant {
            Quant::Q8_0 => Blocks::Q8_0(vec![BlockQ8_0::zeros(); n * per_row]),
            Quant::Q4K => Blocks::Q4K(vec![BlockQ4K::zeros(); n * per_row]),
        };
        let mut first = 0;
        for part in parts {
            let rows = part.dim(0)?;
            let range = first * per_row..(first + rows) * per_row;
            match &mut blocks {
                Blocks::Q8_0(b) => fill(&mut b[range], part, k)?,
                Blocks::Q4K(b) => fill(&mut b[range], part, k)?,
            }
            first += rows;
        }
        Ok(QuantWeight { n, k, blocks })
    }

    /// `x W^T` over the last dimension of `x`: (.., k) -> (.., n), f32.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let (x, rows, mut dims) = product_input(x, self.k)?;
        let mut out = vec![0f32; rows * self.n];
        if rows > 0 {
            with_slice::<f32, _>(&x, |xs| {
                let mkn = (rows, self.k, self.n);
                match &self.blocks {
                    Blocks::Q8_0(b) => k_quants::matmul(mkn, xs, b, &mut out),
                    Blocks::Q4K(b) => k_quants::matmul(mkn, xs, b, &mut out),
                }
            })?;
        }
        dims.push(self.n);
        Tensor::from_vec(out, dims, &Device::Cpu)
    }
}

/// Quantizes the rows of `part` (on the CPU, any float dtype) into `dst`.
fn fill<T: GgmlType>(dst: &mut [T], part: &Tensor, k: usize) -> Result<()> {
    let part = part.to_device(&Device::Cpu)?.contiguous()?;
    let per_row = k / T::BLCK_SIZE;
    let mut quantize_rows = |src: &(dyn Fn(usize, &mut [f32]) + Sync)| {
        dst.par_chunks_mut(per_row).enumerate().for_each_init(
            || vec![0f32; k],
            |row, (r, out)| {
                src(r, row);
                T::from_float(row, out);
            },
        );
    };
    match part.dtype() {
        DType::F32 => with_slice::<f32, _>(&part, |s| {
            quantize_rows(&|r, row| row.copy_from_slice(&s[r * k..(r + 1) * k]));
            Ok(())
        })?,
        DType::BF16 => with_slice::<half::bf16, _>(&part, |s| {
            quantize_rows(&|r, row| widen(&s[r * k..(r + 1) * k], row));
            Ok(())
        })?,
        DType::F16 => with_slice::<half::f16, _>(&part, |s| {
            quantize_rows(&|r, row| widen(&s[r * k..(r + 1) * k], row));
            Ok(())
        })?,
        other => candle_core::bail!("cannot quantize weights of dtype {other:?}"),
    }
    Ok(())
}

fn widen<T: Copy + Into<f32>>(src: &[T], dst: &mut [f32]) {
    for (d, &v) in dst.iter_mut().zip(src) {
        *d = v.into();
    }
}
