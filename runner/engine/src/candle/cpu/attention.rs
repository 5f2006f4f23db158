//! Attention on the CPU in f32, fused into one pass per block of queries.
//!
//! Built from candle ops, attention on the CPU materialises an additive mask of
//! rows x new x slots floats (hundreds of MB for a batch of long prompts), adds it to
//! the scores, and runs a scalar `exp` over every score, masked or not. Every query
//! here sees one contiguous span of keys (from its first real or in-window slot up
//! to itself), so this kernel computes the scores of a block of queries against the
//! span their keys cover with one small matrix product, takes the softmax of each
//! query over its own span only (with a vectorised `exp`), and multiplies by the
//! values with a second product, writing straight into the output.
//!
//! Batch invariance: a real query's result depends only on its own row. Query blocks
//! are aligned on the row's real token positions, not on slots, so left padding (which
//! depends on what else shares the batch) never moves a block boundary, and no key
//! span starts on a padding slot.

use crate::candle::cpu::vectorised::exp_shifted;
use crate::candle::runtime::kv_cache::StepLayout;
use candle_core::{bail, Result, Storage, Tensor};
use rayon::prelude::*;
use std::cell::RefCell;

/// Stacked query rows (query heads of one key head x queries) per block in a prefill.
/// Their scores (rows x span floats) stay in a thread's cache while the softmax and
/// the value product read them back.
const STACKED_ROWS: usize = 128;

/// Queries per prefill block for a model whose key heads serve `group` query heads: a
/// power of two no larger than 128, so that prefill chunks of whole multiples of 128
/// tokens (continuous batching) end on block boundaries and run exactly the blocks of
/// an unchunked prefill.
fn block_len(group: usize) -> usize {
    let len = (STACKED_ROWS / group).max(8);
    1 << (usize::BITS - 1 - len.leading_zeros())
}

/// A tensor's f32 data on the CPU with its element offset and strides.
struct View<'a> {
    data: &'a [f32],
    offset: usize,
    stride: [usize; 4],
}

/// Reads (rows, heads, slots, d) through any strides whose last one is 1.
fn view<'a>(storage: &'a Storage, t: &Tensor, name: &str) -> Result<View<'a>> {
    let Storage::Cpu(cpu) = storage else {
        bail!("cpu attention: {name} is not on the CPU")
    };
    let data = cpu.as_slice::<f32>()?;
    let layout = t.layout();
    let s = layout.stride();
    if s.len() != 4 || s[3] != 1 {
        bail!("cpu attention: {name} must be 4-d with contiguous head vectors");
    }
    Ok(View {
        data,
        offset: layout.start_offset(),
        stride: [s[0], s[1], s[2], s[3]],
    })
}

impl View<'_> {
    fn at(&self, row: usize, head: usize, slot: usize) -> usize {
        self.offset + row * self.stride[0] + head * self.stride[1] + slot * self.stride[2]
    }
}

/// The keys (slots, inclusive range) that the query in new slot `i` of row `b` sees.
fn span(layout: &StepLayout, window: Option<usize>, b: usize, i: usize) -> (usize, usize) {
    let q = layout.past + i;
    let pad = layout.pad[b];
    if q < pad {
        // A padding query sees itself, so its softmax is defined; nothing reads it.
        return (q, q);
    }
    let first = match window {
        Some(w) => (q + 1).saturating_sub(w).max(pad),
        None => pad,
    };
    (first, q)
}

/// Scaled dot-product attention with grouped key/value heads, each query attending to
/// the span [`span`] gives it. q: (rows, heads, new, d); k, v: (rows, kv_heads, slots,
/// d), possibly strided views into cache buffers. Returns (rows, new, heads * d).
pub fn attention(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    layout: &StepLayout,
    window: Option<usize>,
    scale: f32,
) -> Result<Tensor> {
    let (rows, heads, new, d) = q.dims4()?;
    let (k_rows, kv_heads, slots, k_d) = k.dims4()?;
    // The products below read raw memory by these dimensions: check them all.
    let grouped = kv_heads > 0 && heads % kv_heads == 0;
    if k_rows != rows || k_d != d || v.dims() != k.dims() || !grouped {
        bail!(
            "cpu attention: shapes do not fit: q {:?}, k {:?}, v {:?}",
            q.dims(),
            k.dims(),
            v.dims()
        );
    }
    if rows != layout.rows() || new != layout.new || slots != layout.past + layout.new {
        bail!("cpu attention: tensors do not match the step layout");
    }
    let q = q.contiguous()?;
    let (qs, _) = q.storage_and_layout();
    let (ks, _) = k.storage_and_layout();
    let (vs, _) = v.storage_and_layout();
    let shape = Shape {
        heads,
        kv_heads,
        d,
        scale,
    };
    let (qv, kv, vv) = (
        view(&qs, &q, "queries")?,
        view(&ks, k, "keys")?,
        view(&vs, v, "values")?,
    );
    let mut out = vec![0f32; rows * new * heads * d];
    if new == 1 {
        // Decoding: one query per row; each task is one row's group of query heads
        // sharing one key head, a contiguous piece of the output.
        let group = heads / kv_heads;
        out.par_chunks_mut(group * d)
            .enumerate()
            .for_each(|(t, dst)| {
                let (b, h) = (t / kv_heads, t % kv_heads);
                decode_group(&shape, &qv, &kv, &vv, layout, window, b, h, dst)
            });
    } else {
        let block = block_len(heads / kv_heads);
        let tasks = prefill_tasks(layout, &mut out, heads * d, block);
        tasks.into_par_iter().for_each(|(b, i0, i1, dst)| {
            prefill_block(&shape, &qv, &kv, &vv, layout, window, b, i0, i1, dst)
        });
    }
    drop((qs, ks, vs));
    Tensor::from_vec(out, (rows, new, heads * d), q.device())
}

struct Shape {
    heads: usize,
    kv_heads: usize,
    d: usize,
    scale: f32,
}

/// Splits each row's output into blocks of queries: its padding queries, then real
/// queries in blocks whose boundaries fall on multiples of `block` real positions.
fn prefill_tasks<'a>(
    layout: &StepLayout,
    out: &'a mut [f32],
    per_query: usize,
    block: usize,
) -> Vec<(usize, usize, usize, &'a mut [f32])> {
    let new = layout.new;
    let mut tasks = Vec::new();
    for (b, mut rest) in out.chunks_mut(new * per_query).enumerate() {
        let first_real = layout.pad[b].saturating_sub(layout.past).min(new);
        let mut i0 = 0;
        while i0 < new {
            let i1 = if i0 < first_real {
                first_real
            } else {
                let real = layout.past + i0 - layout.pad[b];
                (i0 + block - real % block).min(new)
            };
            let (head, tail) = rest.split_at_mut((i1 - i0) * per_query);
            tasks.push((b, i0, i1, head));
            rest = tail;
            i0 = i1;
        }
    }
    tasks
}

/// Per-thread buffers, reused across blocks so that no block touches fresh memory.
#[derive(Default)]
struct Scratch {
    queries: Vec<f32>,
    scores: Vec<f32>,
    out: Vec<f32>,
    sums: Vec<f32>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// One row's decode step for the query heads of key head `h`: scores (group x span),
/// softmax, values. Every query of the group sees the same span.
#[allow(clippy::too_many_arguments)]
fn decode_group(
    s: &Shape,
    q: &View,
    k: &View,
    v: &View,
    layout: &StepLayout,
    window: Option<usize>,
    b: usize,
    h: usize,
    dst: &mut [f32],
) {
    let group = s.heads / s.kv_heads;
    let (lo, hi) = span(layout, window, b, 0);
    let n = hi - lo + 1;
    SCRATCH.with_borrow_mut(|x| {
        x.scores.resize(group * n, 0.0);
        // SAFETY: the query rows are heads h*group.. of row b; the keys and values are
        // slots lo..=hi of key head h, inside the viewed tensors; `scores` holds
        // group x n and `dst` group x d floats.
        unsafe {
            product_qk(
                group,
                n,
                s.d,
                q.data.as_ptr().add(q.at(b, h * group, 0)),
                q.stride[1] as isize,
                k.data.as_ptr().add(k.at(b, h, lo)),
                k.stride[2] as isize,
                x.scores.as_mut_ptr(),
            );
        }
        x.sums.clear();
        for row in x.scores.chunks_mut(n) {
            x.sums.push(exp_shifted(row, s.scale));
        }
        unsafe {
            product_pv(
                group,
                n,
                s.d,
                x.scores.as_ptr(),
                v.data.as_ptr().add(v.at(b, h, lo)),
                v.stride[2] as isize,
                dst.as_mut_ptr(),
                s.d as isize,
            );
        }
        for (o, sum) in dst.chunks_mut(s.d).zip(&x.sums) {
            let inv = 1.0 / sum;
            o.iter_mut().for_each(|e| *e *= inv);
        }
    });
}

/// Queries i0..i1 of row b, every head. Padding queries copy their own value. The
/// query heads that share a key head are stacked into one product, so each key and
/// value span is read once per block rather than once per query head.
#[allow(clippy::too_many_arguments)]
fn prefill_block(
    s: &Shape,
    q: &View,
    k: &View,
    v: &View,
    layout: &StepLayout,
    window: Option<usize>,
    b: usize,
    i0: usize,
    i1: usize,
    dst: &mut [f32],
) {
    let group = s.heads / s.kv_heads;
    let per_query = s.heads * s.d;
    if layout.past + i0 < layout.pad[b] {
        for i in i0..i1 {
            for hq in 0..s.heads {
                let from = v.at(b, hq / group, layout.past + i);
                dst[(i - i0) * per_query + hq * s.d..][..s.d]
                    .copy_from_slice(&v.data[from..from + s.d]);
            }
        }
        return;
    }
    let m = i1 - i0;
    let lo = span(layout, window, b, i0).0;
    let hi = span(layout, window, b, i1 - 1).1;
    let n = hi - lo + 1;
    let d = s.d;
    SCRATCH.with_borrow_mut(|x| {
        x.queries.resize(group * m * d, 0.0);
        x.scores.resize(group * m * n, 0.0);
        x.out.resize(group * m * d, 0.0);
        for h in 0..s.kv_heads {
            // Stacked queries: row g * m + j is query i0 + j of head h * group + g.
            for g in 0..group {
                for j in 0..m {
                    let from = q.at(b, h * group + g, i0 + j);
                    x.queries[(g * m + j) * d..][..d].copy_from_slice(&q.data[from..from + d]);
                }
            }
            // SAFETY: `queries` holds group*m x d floats, `scores` group*m x n and
            // `out` group*m x d; the keys and values are slots lo..=hi of key head h
            // in row b, inside the viewed tensors.
            unsafe {
                product_qk(
                    group * m,
                    n,
                    d,
                    x.queries.as_ptr(),
                    d as isize,
                    k.data.as_ptr().add(k.at(b, h, lo)),
                    k.stride[2] as isize,
                    x.scores.as_mut_ptr(),
                );
            }
            x.sums.clear();
            for (r, row) in x.scores.chunks_mut(n).enumerate() {
                let (a, z) = span(layout, window, b, i0 + r % m);
                row[..a - lo].fill(0.0);
                row[z - lo + 1..].fill(0.0);
                x.sums.push(exp_shifted(&mut row[a - lo..=z - lo], s.scale));
            }
            unsafe {
                product_pv(
                    group * m,
                    n,
                    d,
                    x.scores.as_ptr(),
                    v.data.as_ptr().add(v.at(b, h, lo)),
                    v.stride[2] as isize,
                    x.out.as_mut_ptr(),
                    d as isize,
                );
            }
            for (r, (o, sum)) in x.out.chunks(d).zip(&x.sums).enumerate() {
                let (g, j) = (r / m, r % m);
                let inv = 1.0 / sum;
                let to = &mut dst[j * per_query + (h * group + g) * d..][..d];
                for (t, e) in to.iter_mut().zip(o) {
                    *t = e * inv;
                }
            }
        }
    });
}

/// scores (m x n, dense) = queries (m x d, rows `q_rs` apart) . keys (n x d, rows
/// `k_rs` apart)^T.
///
/// # Safety
/// Every pointer must be valid for the extents described.
#[allow(clippy::too_many_arguments)]
unsafe fn product_qk(
    m: usize,
    n: usize,
    d: usize,
    q: *const f32,
    q_rs: isize,
    k: *const f32,
    k_rs: isize,
    scores: *mut f32,
) {
    gemm::gemm(
        m,
        n,
        d,
        scores,
        1,
        n as isize,
        false,
        q,
        1,
        q_rs,
        k,
        k_rs,
        1,
        0.0,
        1.0,
        false,
        false,
        false,
        gemm::Parallelism::None,
    )
}

/// out (m x d, rows `o_rs` apart) = probs (m x n, dense) . values (n x d, rows `v_rs`
/// apart).
///
/// # Safety
/// Every pointer must be valid for the extents described.
#[allow(clippy::too_many_arguments)]
unsafe fn product_pv(
    m: usize,
    n: usize,
    d: usize,
    probs: *const f32,
    v: *const f32,
    v_rs: isize,
    out: *mut f32,
    o_rs: isize,
) {
    gemm::gemm(
        m,
        d,
        n,
        out,
        1,
        o_rs,
        false,
        probs,
        1,
        n as isize,
        v,
        1,
        v_rs,
        0.0,
        1.0,
        false,
        false,
        false,
        gemm::Parallelism::None,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{DType, Device};

    #[test]
    fn query_blocks_divide_the_prefill_chunk_alignment() {
        // Chunked prefill is bit-identical to whole prefill only if every chunk ends on
        // a block boundary.
        let align = crate::candle::runtime::continuous::PREFILL_ALIGN;
        for group in 1..=64 {
            let b = block_len(group);
            assert!(
                b >= 1 && align.is_multiple_of(b),
                "group {group}: block {b}"
            );
        }
        assert_eq!(
            block_len(7),
            16,
            "Qwen2.5-7B: 28 query heads on 4 key heads"
        );
    }

    /// Reference: dense scores, the layout's additive mask, softmax, all with candle.
    fn reference(
        q: &Tensor,
        k: &Tensor,
        v: &Tensor,
        layout: &StepLayout,
        window: Option<usize>,
        scale: f64,
    ) -> Result<Tensor> {
        let (rows, heads, new, d) = q.dims4()?;
        let (_, kv, slots, _) = k.dims4()?;
        let group = heads / kv;
        let k = k
            .unsqueeze(2)?
            .expand((rows, kv, group, slots, d))?
            .reshape((rows, heads, slots, d))?;
        let v = v
            .unsqueeze(2)?
            .expand((rows, kv, group, slots, d))?
            .reshape((rows, heads, slots, d))?;
        let mask = Tensor::from_vec(layout.mask(window), (rows, 1, new, slots), q.device())?;
        let scores = (q.matmul(&k.t()?)? * scale)?.broadcast_add(&mask)?;
        let probs = candle_nn::ops::softmax_last_dim(&scores)?;
        probs
            .matmul(&v)?
            .transpose(1, 2)?
            .reshape((rows, new, heads * d))
    }

    fn max_diff(a: &Tensor, b: &Tensor) -> Result<f32> {
        (a - b)?
            .abs()?
            .flatten_all()?
            .max(0)?
            .to_dtype(DType::F32)?
            .to_scalar::<f32>()
    }

    #[test]
    fn fused_attention_matches_masked_dense_attention() -> Result<()> {
        let dev = Device::Cpu;
        // (past, new, pads, window): a prefill longer than a block with padding, a
        // continued prefill, a decode step, and sliding windows.
        let cases: [(usize, usize, Vec<usize>, Option<usize>); 5] = [
            (0, 150, vec![0, 37, 149], None),
            (0, 150, vec![0, 70], Some(20)),
            (40, 90, vec![0, 100], None),
            (129, 1, vec![0, 5, 129], None),
            (129, 1, vec![0, 100], Some(16)),
        ];
        for (past, new, pad, window) in cases {
            let (rows, heads, kv, d) = (pad.len(), 6, 2, 16);
            let slots = past + new;
            let q = Tensor::randn(0f32, 1.0, (rows, heads, new, d), &dev)?;
            // Keys and values as views into a wider cache buffer, as the engine has them.
            let kbuf = Tensor::randn(0f32, 1.0, (rows, kv, slots + 7, d), &dev)?;
            let vbuf = Tensor::randn(0f32, 1.0, (rows, kv, slots + 7, d), &dev)?;
            let (k, v) = (kbuf.narrow(2, 0, slots)?, vbuf.narrow(2, 0, slots)?);
            let layout = StepLayout { past, new, pad };
            let got = attention(&q, &k, &v, &layout, window, 0.25)?;
            let want = reference(&q, &k, &v, &layout, window, 0.25)?;
            let diff = max_diff(&got, &want)?;
            assert!(
                diff < 1e-5,
                "past {past} new {new} window {window:?}: {diff}"
            );
        }
        Ok(())
    }

    #[test]
    fn shapes_that_do_not_fit_are_refused_before_any_read() -> Result<()> {
        let dev = Device::Cpu;
        let layout = StepLayout {
            past: 0,
            new: 4,
            pad: vec![0],
        };
        let q = Tensor::zeros((1, 4, 4, 8), DType::F32, &dev)?;
        let k = Tensor::zeros((1, 2, 4, 8), DType::F32, &dev)?;
        let short_v = Tensor::zeros((1, 2, 3, 8), DType::F32, &dev)?;
        let odd_k = Tensor::zeros((1, 3, 4, 8), DType::F32, &dev)?;
        for (k, v) in [(&k, &short_v), (&odd_k, &odd_k)] {
            let err = attention(&q, k, v, &layout, None, 1.0).unwrap_err();
            assert!(err.to_string().contains("shapes do not fit"), "{err}");
        }
        Ok(())
    }

    #[test]
    fn a_rows_result_does_not_depend_on_the_padding_its_batch_gives_it() -> Result<()> {
        let dev = Device::Cpu;
        let (heads, kv, d, len) = (4, 2, 16, 140);
        let q = Tensor::randn(0f32, 1.0, (1, heads, len, d), &dev)?;
        let k = Tensor::randn(0f32, 1.0, (1, kv, len, d), &dev)?;
        let v = Tensor::randn(0f32, 1.0, (1, kv, len, d), &dev)?;
        let alone = StepLayout {
            past: 0,
            new: len,
            pad: vec![0],
        };
        let want = attention(&q, &k, &v, &alone, None, 0.25)?;
        for extra in [1, 5, 63, 64, 100] {
            let padded = |t: &Tensor| -> Result<Tensor> {
                let z = Tensor::zeros((1, t.dim(1)?, extra, d), DType::F32, &dev)?;
                Tensor::cat(&[&z, t], 2)
            };
            let layout = StepLayout {
                past: 0,
                new: len + extra,
                pad: vec![extra],
            };
            let got = attention(
                &padded(&q)?,
                &padded(&k)?,
                &padded(&v)?,
                &layout,
                None,
                0.25,
            )?;
            let got = got.narrow(1, extra, len)?;
            assert_eq!(max_diff(&got, &want)?, 0.0, "padding {extra}");
        }
        Ok(())
    }
}
