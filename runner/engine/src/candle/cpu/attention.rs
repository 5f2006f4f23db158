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
//! Keys and values are read where the cache holds them, in f32 or f16 (`--kv-cache
//! f16`, widened exactly as they are loaded); the model's cache holds its keys in the
//! fused products' panels (`SlotOrder::Panels`, the CPU kernels' `key_order`).
//!
//! The products are `products`' fused AVX-512 / AVX2 / scalar kernels (QK^T, the
//! softmax and PV per tile of stacked query rows) when the head dimension is a whole
//! number of 16-float vectors, and the `gemm` crate's (`gemm`) otherwise.
//!
//! Batch invariance: a real query's result depends only on its own row. Query blocks
//! are aligned on the row's real token positions, not on slots, so left padding (which
//! depends on what else shares the batch) never moves a block boundary, and no key
//! span starts on a padding slot. With the fused kernels the bits do not depend on the
//! blocks at all: every score, exponential and output is one fixed chain over the
//! query's own span, whatever tile, thread or instruction set computes it, and a
//! decode step gives a query the bits a prefill gives it.

use crate::candle::cpu::vectorised::exp_shifted;
use crate::candle::runtime::kv_cache::{SlotOrder, StepLayout};
use candle_core::{bail, DType, Result, Storage, Tensor};
use gemm::{product_pv, product_qk};
use half::f16;
use products::{CacheElem, Isa, Keys, Stacked, PANEL};
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

/// A tensor's data on the CPU (f32, or a cache's f16) with its element offset and
/// strides.
struct View<'a, E = f32> {
    data: &'a [E],
    offset: usize,
    stride: [usize; 4],
}

/// Reads (rows, heads, slots, d) through any strides whose last one is 1.
fn view<'a, E: CacheElem + candle_core::WithDType>(
    storage: &'a Storage,
    t: &Tensor,
    name: &str,
) -> Result<View<'a, E>> {
    let Storage::Cpu(cpu) = storage else {
        bail!("cpu attention: {name} is not on the CPU")
    };
    let data = cpu.as_slice::<E>()?;
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

impl<E: CacheElem> View<'_, E> {
    /// The same view as f32, where its data is.
    fn as_f32(&self) -> Option<View<'_>> {
        Some(View {
            data: E::as_f32(self.data)?,
            offset: self.offset,
            stride: self.stride,
        })
    }

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
    attention_in(q, (k, SlotOrder::Rows), v, layout, window, scale)
}

/// [`attention`] over keys whose slots are in `order`: in panels, `k` is a view of the
/// first slots of a cache buffer holding them so (`KvCache::append_in`).
pub fn attention_in(
    q: &Tensor,
    (k, order): (&Tensor, SlotOrder),
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
    let fused = d.is_multiple_of(PANEL);
    if order == SlotOrder::Panels {
        // Each head's panels start at a panel's place in the buffer and run whole to
        // the head's capacity.
        let (s, at) = (k.stride(), k.layout().start_offset());
        let whole = s[2] == d && s[1].is_multiple_of(PANEL * d) && at.is_multiple_of(PANEL * d);
        if !fused || !whole || (k_rows > 1 && !s[0].is_multiple_of(PANEL * d)) {
            bail!("cpu attention: keys in panels must be a cache's whole panels of heads of 16k values");
        }
    }
    let how = (fused, order);
    match (k.dtype(), v.dtype()) {
        (DType::F32, DType::F32) => attend_all::<f32>(q, k, v, layout, window, scale, how),
        // The `gemm` crate's products read f32: an f16 cache is widened for them.
        (DType::F16, DType::F16) if !fused => {
            let (k, v) = (k.to_dtype(DType::F32)?, v.to_dtype(DType::F32)?);
            attend_all::<f32>(q, &k, &v, layout, window, scale, how)
        }
        (DType::F16, DType::F16) => attend_all::<f16>(q, k, v, layout, window, scale, how),
        (kt, vt) => bail!("cpu attention: a key/value cache of {kt:?}/{vt:?}"),
    }
}

/// [`attention`] over a cache of `E`, its shapes checked.
fn attend_all<E: CacheElem + candle_core::WithDType>(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    layout: &StepLayout,
    window: Option<usize>,
    scale: f32,
    (fused, keys): (bool, SlotOrder),
) -> Result<Tensor> {
    let (rows, heads, new, d) = q.dims4()?;
    let kv_heads = k.dim(1)?;
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
        view::<f32>(&qs, &q, "queries")?,
        view::<E>(&ks, k, "keys")?,
        view::<E>(&vs, v, "values")?,
    );
    let mut out = vec![0f32; rows * new * heads * d];
    let at = Step {
        layout,
        window,
        isa: products::best_isa(),
        fused,
        keys,
    };
    if new == 1 {
        // Decoding: one query per row; each task is one row's group of query heads
        // sharing one key head, a contiguous piece of the output.
        let group = heads / kv_heads;
        out.par_chunks_mut(group * d)
            .enumerate()
            .for_each(|(t, dst)| {
                let (b, h) = (t / kv_heads, t % kv_heads);
                decode_group(&shape, &qv, &kv, &vv, &at, b, h, dst)
            });
    } else {
        let block = block_len(heads / kv_heads);
        let tasks = prefill_tasks(layout, &mut out, heads * d, block);
        tasks
            .into_par_iter()
            .for_each(|(b, i0, i1, dst)| prefill_block(&shape, &qv, &kv, &vv, &at, b, i0, i1, dst));
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

/// What a task needs to know of the step beyond its own queries.
struct Step<'a> {
    layout: &'a StepLayout,
    window: Option<usize>,
    isa: Isa,
    /// Whether the products are the fused kernels' (`products`), for head dimensions of
    /// whole vectors; the `gemm` crate's otherwise.
    fused: bool,
    /// How the keys' slots are held (panels only for the fused products).
    keys: SlotOrder,
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
    /// The span of each stacked query row.
    spans: Vec<(usize, usize)>,
    /// The keys of one span, packed for the fused products.
    keys: Vec<f32>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// One row's decode step for the query heads of key head `h`: scores (group x span),
/// softmax, values. Every query of the group sees the same span. With the fused
/// products, each output's bits are those a prefill gives the same query (the
/// scheduler may prefill a prompt's last token as a decode step).
#[allow(clippy::too_many_arguments)]
fn decode_group<E: CacheElem>(
    s: &Shape,
    q: &View,
    k: &View<E>,
    v: &View<E>,
    at: &Step,
    b: usize,
    h: usize,
    dst: &mut [f32],
) {
    let group = s.heads / s.kv_heads;
    let (lo, hi) = span(at.layout, at.window, b, 0);
    let n = hi - lo + 1;
    SCRATCH.with_borrow_mut(|x| {
        x.sums.clear();
        if at.fused {
            // One query per row: the group's query heads are consecutive rows of d.
            debug_assert_eq!(q.stride[1], s.d, "decoding reads contiguous queries");
            let queries = &q.data[q.at(b, h * group, 0)..][..group * s.d];
            x.spans.clear();
            x.spans.resize(group, (lo, hi));
            x.sums.resize(group, 0.0);
            let stacked = Stacked {
                queries,
                keys: match at.keys {
                    SlotOrder::Panels => Keys::Panels(&k.data[k.at(b, h, 0)..]),
                    SlotOrder::Rows => Keys::Rows {
                        keys: &k.data[k.at(b, h, 0)..],
                        k_rs: k.stride[2],
                    },
                },
                values: &v.data[v.at(b, h, 0)..],
                v_rs: v.stride[2],
                d: s.d,
                scale: s.scale,
                spans: &x.spans,
                lo,
                hi,
            };
            products::attend(at.isa, &stacked, &mut x.scores, dst, &mut x.sums);
        } else {
            let (Some(k), Some(v)) = (k.as_f32(), v.as_f32()) else {
                unreachable!("`attention` widens an f16 cache for the gemm crate's products")
            };
            x.scores.resize(group * n, 0.0);
            // SAFETY: the query rows are heads h*group.. of row b; the keys and values
            // are slots lo..=hi of key head h, inside the viewed tensors; `scores`
            // holds group x n and `dst` group x d floats.
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
        }
        for (o, sum) in dst.chunks_mut(s.d).zip(&x.sums) {
            let inv = 1.0 / sum;
            o.iter_mut().for_each(|e| *e = normalised(*e, inv));
        }
    });
}

/// An output divided by its softmax sum (`inv` = 1 / sum), with -0 made +0: adding
/// +0 leaves every other value as it is, so an output of the fused products does not
/// depend on which zero probabilities followed its span in its tile.
#[inline(always)]
fn normalised(e: f32, inv: f32) -> f32 {
    e * inv + 0.0
}

/// Queries i0..i1 of row b, every head. Padding queries copy their own value. The
/// query heads that share a key head are stacked into one product (query-major: row
/// `j * group + g` is query i0 + j of the group's head g, so that a tile of rows sees
/// nearly the same span), and each key and value span is read once per block rather
/// than once per query head.
#[allow(clippy::too_many_arguments)]
fn prefill_block<E: CacheElem>(
    s: &Shape,
    q: &View,
    k: &View<E>,
    v: &View<E>,
    at: &Step,
    b: usize,
    i0: usize,
    i1: usize,
    dst: &mut [f32],
) {
    let (layout, window) = (at.layout, at.window);
    if layout.past + i0 < layout.pad[b] {
        copy_own_values(s, v, layout, b, i0..i1, dst);
        return;
    }
    let (lo, hi) = (
        span(layout, window, b, i0).0,
        span(layout, window, b, i1 - 1).1,
    );
    let blk = QueryBlock {
        b,
        i0,
        m: i1 - i0,
        lo,
        n: hi - lo + 1,
    };
    let (group, m, d) = (s.heads / s.kv_heads, blk.m, s.d);
    SCRATCH.with_borrow_mut(|x| {
        x.queries.resize(group * m * d, 0.0);
        x.out.resize(group * m * d, 0.0);
        x.sums.resize(group * m, 0.0);
        x.spans.clear();
        x.spans
            .extend((0..group * m).map(|r| span(layout, window, b, i0 + r / group)));
        for h in 0..s.kv_heads {
            stack_queries(&mut x.queries, q, &blk, h, group, d);
            if at.fused {
                let keys = &k.data[k.at(b, h, 0)..];
                let keys = match at.keys {
                    SlotOrder::Panels => Keys::Panels(keys),
                    SlotOrder::Rows => {
                        products::pack_keys(at.isa, &mut x.keys, keys, k.stride[2], d, (lo, hi));
                        Keys::Packed(&x.keys)
                    }
                };
                let stacked = Stacked {
                    queries: &x.queries,
                    keys,
                    values: &v.data[v.at(b, h, 0)..],
                    v_rs: v.stride[2],
                    d,
                    scale: s.scale,
                    spans: &x.spans,
                    lo,
                    hi,
                };
                products::attend(at.isa, &stacked, &mut x.scores, &mut x.out, &mut x.sums);
            } else {
                let (Some(k), Some(v)) = (k.as_f32(), v.as_f32()) else {
                    unreachable!("`attention` widens an f16 cache for the gemm crate's products")
                };
                gemm_block(x, s, &k, &v, &blk, h);
            }
            write_normalised(x, &blk, h, group, s, dst);
        }
    });
}

/// The block's products through the `gemm` crate, for a head dimension that the
/// packed kernels do not take.
fn gemm_block(x: &mut Scratch, s: &Shape, k: &View, v: &View, blk: &QueryBlock, h: usize) {
    let (rows, n, d) = (x.spans.len(), blk.n, s.d);
    x.scores.resize(rows * n, 0.0);
    // SAFETY: `queries` holds rows x d floats, `scores` rows x n and `out` rows x d;
    // the keys and values are slots lo..lo + n of key head h in row b, inside the
    // viewed tensors.
    unsafe {
        product_qk(
            rows,
            n,
            d,
            x.queries.as_ptr(),
            d as isize,
            k.data.as_ptr().add(k.at(blk.b, h, blk.lo)),
            k.stride[2] as isize,
            x.scores.as_mut_ptr(),
        );
    }
    masked_softmax(x, blk, s.scale);
    unsafe {
        product_pv(
            rows,
            n,
            d,
            x.scores.as_ptr(),
            v.data.as_ptr().add(v.at(blk.b, h, blk.lo)),
            v.stride[2] as isize,
            x.out.as_mut_ptr(),
            d as isize,
        );
    }
}

/// Queries i0..i0 + m of row b in a prefill, whose keys all lie in slots lo..lo + n.
struct QueryBlock {
    b: usize,
    i0: usize,
    m: usize,
    lo: usize,
    n: usize,
}

/// Padding queries `queries` of row b: each head's output is its own value, so that
/// nothing undefined is written (nothing reads it).
fn copy_own_values<E: CacheElem>(
    s: &Shape,
    v: &View<E>,
    layout: &StepLayout,
    b: usize,
    queries: std::ops::Range<usize>,
    dst: &mut [f32],
) {
    let group = s.heads / s.kv_heads;
    let per_query = s.heads * s.d;
    let i0 = queries.start;
    for i in queries {
        for hq in 0..s.heads {
            let from = v.at(b, hq / group, layout.past + i);
            let to = &mut dst[(i - i0) * per_query + hq * s.d..][..s.d];
            for (t, e) in to.iter_mut().zip(&v.data[from..from + s.d]) {
                *t = e.to_f32();
            }
        }
    }
}

/// Copies the block's queries of the `group` query heads of key head `h` into
/// `stacked`: row j * group + g is query i0 + j of head h * group + g.
fn stack_queries(
    stacked: &mut [f32],
    q: &View,
    blk: &QueryBlock,
    h: usize,
    group: usize,
    d: usize,
) {
    for j in 0..blk.m {
        for g in 0..group {
            let from = q.at(blk.b, h * group + g, blk.i0 + j);
            stacked[(j * group + g) * d..][..d].copy_from_slice(&q.data[from..from + d]);
        }
    }
}

/// Each stacked query's scores over its own span, exponentiated (zero outside the
/// span), with their sums in `x.sums`.
fn masked_softmax(x: &mut Scratch, blk: &QueryBlock, scale: f32) {
    let lo = blk.lo;
    for ((row, &(a, z)), sum) in x.scores.chunks_mut(blk.n).zip(&x.spans).zip(&mut x.sums) {
        row[..a - lo].fill(0.0);
        row[z - lo + 1..].fill(0.0);
        *sum = exp_shifted(&mut row[a - lo..=z - lo], scale);
    }
}

/// Writes the stacked outputs of key head `h`, each divided by its softmax sum, to
/// their queries' places in the block's output `dst`.
fn write_normalised(
    x: &Scratch,
    blk: &QueryBlock,
    h: usize,
    group: usize,
    s: &Shape,
    dst: &mut [f32],
) {
    let (d, per_query) = (s.d, s.heads * s.d);
    let rows = blk.m * group;
    for (r, (o, sum)) in x.out[..rows * d].chunks(d).zip(&x.sums).enumerate() {
        let (j, g) = (r / group, r % group);
        let inv = 1.0 / sum;
        let to = &mut dst[j * per_query + (h * group + g) * d..][..d];
        for (t, &e) in to.iter_mut().zip(o) {
            *t = normalised(e, inv);
        }
    }
}

mod gemm;
mod products;

#[cfg(test)]
mod f16_cache_tests;
#[cfg(test)]
mod key_panel_tests;
#[cfg(test)]
mod tests;
