//! Weights in GGML's blocks, multiplied by candle's quantized dot products: quantized
//! at load to q4_K, or as a GGUF file stores them (any of candle's block types). (q8_0
//! quantized at load has panels of its own, [`crate::candle::cpu::packed`].)
//!
//! The blocks are held here and handed to `k_quants::matmul` directly rather than
//! through `QMatMul`: on CPUs with VNNI, `QMatMul` repacks a weight into a second layout
//! at its first product and keeps both, which doubles the memory quantization was
//! meant to halve (a q8_0 7B model peaked at 15.8 GB instead of 8). `k_quants::matmul`
//! quantizes each input row on its own and takes one dot product per (row, output), so
//! a row's bits do not depend on the rows beside it.

use crate::candle::cpu::{product_input, with_slice};
use candle_core::quantized::k_quants::{BlockQ4K, GgmlType};
use candle_core::quantized::{GgmlDType, QTensor, QuantizedType};
use candle_core::{CpuStorage, DType, Device, Result, Tensor};
use rayon::prelude::*;
use std::borrow::Cow;
use std::sync::Arc;

/// Inputs per q4_K block: a layer must be a whole number of them.
pub const Q4K_BLOCK: usize = BlockQ4K::BLCK_SIZE;

/// A (n, k) weight in blocks of GGML types, for `x W^T`: parts stacked along n, each
/// of one block type (a GGUF file may store q, k and v in three).
#[derive(Clone)]
pub struct QuantWeight {
    n: usize,
    k: usize,
    parts: Vec<Part>,
}

#[derive(Clone)]
struct Part {
    n: usize,
    blocks: Arc<dyn QuantizedType>,
}

impl std::fmt::Debug for QuantWeight {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let types: Vec<_> = self.parts.iter().map(|p| p.blocks.dtype()).collect();
        f.debug_struct("QuantWeight")
            .field("n", &self.n)
            .field("k", &self.k)
            .field("types", &types)
            .finish()
    }
}

impl QuantWeight {
    /// Quantizes `parts` (each (n_i, k), stacked along n in order); rows in parallel,
    /// each widened to f32 on its own, so no f32 copy of a whole weight is made.
    pub fn quantize_q4k(parts: &[&Tensor]) -> Result<Self> {
        let k = parts.first().map_or(Ok(0), |p| p.dim(1))?;
        if !k.is_multiple_of(Q4K_BLOCK) {
            candle_core::bail!("q4_K needs inputs in blocks of {Q4K_BLOCK}, not {k}");
        }
        let n: usize = parts.iter().map(|p| p.dim(0)).sum::<Result<usize>>()?;
        let per_row = k / Q4K_BLOCK;
        let mut blocks = vec![BlockQ4K::zeros(); n * per_row];
        let mut first = 0;
        for part in parts {
            let rows = part.dim(0)?;
            fill(
                &mut blocks[first * per_row..(first + rows) * per_row],
                part,
                k,
            )?;
            first += rows;
        }
        let blocks: Arc<dyn QuantizedType> = Arc::new(blocks);
        Ok(QuantWeight {
            n,
            k,
            parts: vec![Part { n, blocks }],
        })
    }

    /// A weight from blocks as stored: `(rows, blocks)` per part, each `k` wide.
    pub fn from_blocks(k: usize, parts: Vec<(usize, Arc<dyn QuantizedType>)>) -> Self {
        let parts: Vec<Part> = parts
            .into_iter()
            .map(|(n, blocks)| Part { n, blocks })
            .collect();
        QuantWeight {
            n: parts.iter().map(|p| p.n).sum(),
            k,
            parts,
        }
    }

    /// `x W^T` over the last dimension of `x`: (.., k) -> (.., n), f32.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let (x, rows, mut dims) = product_input(x, self.k)?;
        let mut out = vec![0f32; rows * self.n];
        if rows > 0 {
            with_slice::<f32, _>(&x, |xs| match self.parts.as_slice() {
                [one] => one.blocks.matmul_t((rows, self.k, self.n), xs, &mut out),
                parts => {
                    // Each part's product, then its columns into place.
                    let mut first = 0;
                    for p in parts {
                        let mut part = vec![0f32; rows * p.n];
                        p.blocks.matmul_t((rows, self.k, p.n), xs, &mut part)?;
                        for (r, row) in part.chunks_exact(p.n).enumerate() {
                            let at = r * self.n + first;
                            out[at..at + p.n].copy_from_slice(row);
                        }
                        first += p.n;
                    }
                    Ok(())
                }
            })?;
        }
        dims.push(self.n);
        Tensor::from_vec(out, dims, &Device::Cpu)
    }
}

/// Quantizes the rows of `part` (on the CPU, any float dtype) into `dst`.
fn fill<T: GgmlType>(dst: &mut [T], part: &Tensor, k: usize) -> Result<()> {
    let per_row = k / T::BLCK_SIZE;
    with_rows_f32(Rows::Float(part), k, |row_of| {
        dst.par_chunks_mut(per_row).enumerate().try_for_each_init(
            || vec![0f32; k],
            |row, (r, out)| {
                row_of(r, row)?;
                T::from_float(row, out);
                Ok(())
            },
        )
    })
}

/// Rows that are read one at a time, widened to f32 (a GGUF file's tensor read from
/// the file itself, so that packing it holds no copy of its blocks).
pub trait RowSource: Sync {
    /// (rows, k).
    fn dims(&self) -> (usize, usize);
    /// Row `r` into `out` (k values).
    fn row_f32(&self, r: usize, out: &mut [f32]) -> Result<()>;
}

/// A weight's rows as a packer reads them: a float tensor's, the blocks of a GGUF
/// tensor in memory, or a [`RowSource`]'s.
#[derive(Clone, Copy)]
pub(crate) enum Rows<'a> {
    Float(&'a Tensor),
    Blocks(&'a QTensor),
    Source(&'a dyn RowSource),
}

impl Rows<'_> {
    pub(crate) fn dims(&self) -> Result<(usize, usize)> {
        match self {
            Rows::Float(t) => t.dims2(),
            Rows::Blocks(t) => t.shape().dims2(),
            Rows::Source(s) => Ok(s.dims()),
        }
    }
}

/// Reads row `r` of a weight into an f32 buffer of its width.
pub(crate) type RowReader<'a> = dyn Fn(usize, &mut [f32]) -> Result<()> + Sync + 'a;

/// Runs `f` with a reader that widens row `r` of the (rows, k) weight `part` (a float
/// tensor on the CPU, f32, bf16 or f16, GGUF blocks, or a row source) into an f32
/// buffer, so that quantizing rows in parallel never makes an f32 copy of the whole
/// weight.
pub(crate) fn with_rows_f32(
    part: Rows,
    k: usize,
    f: impl FnOnce(&RowReader) -> Result<()>,
) -> Result<()> {
    let part = match part {
        Rows::Float(t) => t,
        Rows::Blocks(t) => return with_block_rows_f32(t, k, f),
        Rows::Source(s) => {
            if s.dims().1 != k {
                candle_core::bail!("rows of {} cannot be read as rows of {k}", s.dims().1);
            }
            return f(&|r, row| s.row_f32(r, row));
        }
    };
    let part = part.to_device(&Device::Cpu)?.contiguous()?;
    match part.dtype() {
        DType::F32 => with_slice::<f32, _>(&part, |s| {
            f(&|r, row| {
                row.copy_from_slice(&s[r * k..(r + 1) * k]);
                Ok(())
            })
        }),
        DType::BF16 => with_slice::<half::bf16, _>(&part, |s| {
            f(&|r, row| {
                widen(&s[r * k..(r + 1) * k], row);
                Ok(())
            })
        }),
        DType::F16 => with_slice::<half::f16, _>(&part, |s| {
            f(&|r, row| {
                widen(&s[r * k..(r + 1) * k], row);
                Ok(())
            })
        }),
        other => candle_core::bail!("cannot quantize weights of dtype {other:?}"),
    }
}

/// Dequantizes one row's blocks, `bytes` of GGML type `dtype`, into `out`.
pub fn dequantize_row(dtype: GgmlDType, bytes: &[u8], out: &mut [f32]) -> Result<()> {
    match dtype
        .from_data(Cow::Borrowed(bytes))
        .dequantize(out.len())?
    {
        CpuStorage::F32(v) if v.len() == out.len() => {
            out.copy_from_slice(&v);
            Ok(())
        }
        _ => candle_core::bail!(
            "{dtype:?} blocks of {} bytes are not a row of {}",
            bytes.len(),
            out.len()
        ),
    }
}

/// [`with_rows_f32`] over GGUF blocks: each row's blocks dequantized when it is read.
fn with_block_rows_f32(
    t: &QTensor,
    k: usize,
    f: impl FnOnce(&RowReader) -> Result<()>,
) -> Result<()> {
    let dtype = t.dtype();
    let (rows, width) = t.shape().dims2()?;
    if width != k || !k.is_multiple_of(dtype.block_size()) {
        candle_core::bail!("{dtype:?} rows of {width} cannot be read as rows of {k}");
    }
    let row_bytes = k / dtype.block_size() * dtype.type_size();
    let data = t.data()?;
    if data.len() != rows * row_bytes {
        candle_core::bail!(
            "{dtype:?} blocks of {} bytes for {rows} rows of {row_bytes}",
            data.len()
        );
    }
    f(&|r, row| dequantize_row(dtype, &data[r * row_bytes..(r + 1) * row_bytes], row))
}

fn widen<T: Copy + Into<f32>>(src: &[T], dst: &mut [f32]) {
    for (d, &v) in dst.iter_mut().zip(src) {
        *d = v.into();
    }
}
