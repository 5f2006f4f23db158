//! Attention's two products in a prefill, QK^T and PV, with the softmax between them,
//! fused per tile of stacked query rows.
//!
//! Batch invariance is built into the reduction order, as in the linear layers'
//! products (`cpu/packed.rs`): a SIMD lane holds one output element, and
//! - every score is one fused multiply-add chain over the head dimension, `0..d` in
//!   order, starting from zero;
//! - every output element is one chain over the key slots of its tile, in slot order,
//!   starting from zero, where the probabilities outside the query's own span are
//!   exact zeros. Leading zeros leave the chain at +0, and trailing ones leave it
//!   unchanged except that they may turn a -0 into +0, which the caller's
//!   normalisation undoes (it adds +0 to every output). So an output's bits are those
//!   of the chain over its own span, whichever rows share its tile.
//!
//! So neither the tile a row falls in, nor the thread, nor the instruction set changes
//! a bit: the AVX-512, AVX2 and scalar kernels give the same results (the tests compare
//! them). Tiles skip what every row of theirs masks, to the nearest 16 keys: most of
//! the upper triangle of a block's diagonal.
//!
//! The keys are read in panels of [`PANEL`] slots, depth-major (`[panel][d][16]`), so
//! that a step of the QK chain is one vector load; the values are read in place, 16
//! columns of a slot's row being one vector. The model's cache holds its keys in those
//! panels (`SlotOrder::Panels`), so that a decode step reads each head's keys as one
//! stream; keys held slot by slot are packed first. Decoding runs the same kernels on
//! its group of query heads, so a query gets the same bits whether its token is decoded
//! or prefilled, and whichever order its keys were held in (widening is exact).

use crate::candle::cpu::lanes::{Lanes, Scalar};
use crate::candle::cpu::prefetch::into_l2;
use crate::candle::cpu::vectorised::exp_shifted;

/// Key slots per panel, and the columns of one value vector: one AVX-512 vector of f32.
pub use crate::candle::runtime::kv_cache::PANEL;

pub use crate::candle::cpu::isa::{best_isa, Isa};

/// What a key/value cache holds its keys and values in: f32, or f16 (`--kv-cache
/// f16`), which halves the bytes a decode step reads. The products widen each value
/// to f32 exactly as they load it, so attention over an f16 cache gives the bits it
/// gives over an f32 cache holding the same, rounded, values.
pub trait CacheElem: Copy + Send + Sync + 'static {
    fn to_f32(self) -> f32;
    /// 16 values from `p`, widened.
    ///
    /// # Safety
    /// `p` must be valid for 16 values, and the CPU have `L`'s instruction set.
    unsafe fn lanes<L: Lanes>(p: *const Self) -> L;
    /// The values themselves where they are f32 (the `gemm` crate's products take
    /// only those).
    fn as_f32(s: &[Self]) -> Option<&[f32]>;
}

impl CacheElem for f32 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }
    #[inline(always)]
    unsafe fn lanes<L: Lanes>(p: *const f32) -> L {
        L::load(p)
    }
    fn as_f32(s: &[f32]) -> Option<&[f32]> {
        Some(s)
    }
}

impl CacheElem for half::f16 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        half::f16::to_f32(self)
    }
    #[inline(always)]
    unsafe fn lanes<L: Lanes>(p: *const half::f16) -> L {
        L::load_f16(p.cast())
    }
    fn as_f32(_: &[half::f16]) -> Option<&[f32]> {
        None
    }
}

/// Packs the keys of slots `lo..=hi` of one key head (slot `s` at `s * k_rs` in
/// `keys`) into `dst`, in the panels that hold them: panel 0 of `dst` holds slots
/// `(lo / 16) * 16..`. The first panel's slots before `lo` are copied too (nothing
/// reads their scores); the last one's after `hi` are zeros.
pub fn pack_keys<E: CacheElem>(
    isa: Isa,
    dst: &mut Vec<f32>,
    keys: &[E],
    k_rs: usize,
    d: usize,
    (lo, hi): (usize, usize),
) {
    let (p0, p1) = (lo / PANEL, hi / PANEL + 1);
    assert!(lo <= hi && keys.len() >= hi * k_rs + d, "pack_keys: keys");
    dst.resize((p1 - p0) * PANEL * d, 0.0);
    for (p, panel) in (p0..p1).zip(dst.chunks_exact_mut(PANEL * d)) {
        pack_panel(isa, panel, keys, k_rs, d, p * PANEL, hi);
    }
}

/// Packs the 16 slots from `first` (those after `hi` as zeros) into `panel`.
#[inline(always)]
fn pack_panel<E: CacheElem>(
    isa: Isa,
    panel: &mut [f32],
    keys: &[E],
    k_rs: usize,
    d: usize,
    first: usize,
    hi: usize,
) {
    let whole = first + PANEL <= hi + 1;
    #[cfg(target_arch = "x86_64")]
    if whole && matches!(isa, Isa::Avx512 | Isa::Avx512Vnni | Isa::Amx) && d.is_multiple_of(PANEL) {
        assert!(panel.len() >= PANEL * d && keys.len() >= hi * k_rs + d);
        // SAFETY: the CPU has AVX-512F (the caller's `isa`); the panel's 16 keys end at
        // slot hi at most, inside `keys`, and `panel` holds 16 x d floats.
        unsafe { x86::transpose_panel(panel, keys.as_ptr().add(first * k_rs), k_rs, d) };
        return;
    }
    let _ = (isa, whole);
    for lane in 0..PANEL {
        let s = first + lane;
        if s <= hi {
            let key = &keys[s * k_rs..][..d];
            for (kk, &v) in key.iter().enumerate() {
                panel[kk * PANEL + lane] = v.to_f32();
            }
        } else {
            for kk in 0..d {
                panel[kk * PANEL + lane] = 0.0;
            }
        }
    }
}

/// Where the fused products read a span's keys from.
#[derive(Clone, Copy)]
pub enum Keys<'a, E> {
    /// Packed beforehand ([`pack_keys`]): read by every tile of a prefill block.
    Packed(&'a [f32]),
    /// In the cache's own rows, slot `s` at `s * k_rs`: each tile packs the panels it
    /// reads as it goes, into a few panels of scratch that stay in the first-level
    /// cache. A decode step's group of query heads is one tile, which would read a
    /// packed copy of the span once: packing the whole span first wrote and read that
    /// copy for nothing. The panels are the same, so the bits are too.
    Rows { keys: &'a [E], k_rs: usize },
    /// In panels in the cache itself (`SlotOrder::Panels`): panel `p` of slots `16p..`
    /// at `p * 16 * d`, whole up to `hi`'s.
    Panels(&'a [E]),
}

/// One key head's stacked queries of a block, and what they attend to.
pub struct Stacked<'a, E> {
    /// Stacked query rows, `d` floats each.
    pub queries: &'a [f32],
    /// The head's keys of slots `lo..=hi`.
    pub keys: Keys<'a, E>,
    /// The head's values: slot `s` at `s * v_rs`.
    pub values: &'a [E],
    pub v_rs: usize,
    pub d: usize,
    pub scale: f32,
    /// Each stacked row's span of slots (inclusive); all within `lo..=hi`.
    pub spans: &'a [(usize, usize)],
    pub lo: usize,
    pub hi: usize,
}

/// `out` (rows x d) = each stacked row's softmax-weighted sum of the values over its
/// span, not yet divided by the softmax sum, which goes to `sums`. `scores` is scratch.
/// `d` must be a multiple of [`PANEL`].
pub fn attend<E: CacheElem>(
    isa: Isa,
    s: &Stacked<E>,
    scores: &mut Vec<f32>,
    out: &mut [f32],
    sums: &mut [f32],
) {
    let rows = s.spans.len();
    let (d, slots) = (s.d, s.hi + 1);
    assert!(d.is_multiple_of(PANEL) && s.lo <= s.hi, "attend: shape");
    assert!(s.queries.len() >= rows * d && out.len() >= rows * d && sums.len() >= rows);
    let stride = (s.hi / PANEL - s.lo / PANEL + 1) * PANEL;
    match s.keys {
        Keys::Packed(keys) => assert!(keys.len() >= stride * d, "attend: packed keys"),
        Keys::Rows { keys, k_rs } => assert!(keys.len() >= s.hi * k_rs + d, "attend: keys"),
        Keys::Panels(keys) => assert!(
            keys.len() >= (s.hi / PANEL + 1) * PANEL * d,
            "attend: panels"
        ),
    }
    assert!(s.values.len() >= (slots - 1) * s.v_rs + d, "attend: values");
    assert!(s
        .spans
        .iter()
        .all(|&(a, z)| s.lo <= a && a <= z && z <= s.hi));
    let stride = (s.hi / PANEL - s.lo / PANEL + 1) * PANEL;
    // The scores, then room for the panels a tile packs from `Keys::Rows`.
    scores.resize(MAX_ROWS * stride + MAX_NV * PANEL * d, 0.0);
    let (scores, panels) = scores.split_at_mut(MAX_ROWS * stride);
    let job = Job {
        s,
        isa,
        panels: panels.as_mut_ptr(),
        scores: scores.as_mut_ptr(),
        stride,
        out: out.as_mut_ptr(),
        sums: sums.as_mut_ptr(),
    };
    // SAFETY: the assertions above bound every access the kernels make: rows of
    // queries, outputs and sums below `rows`, the packed keys of the panels from
    // `lo`'s to `hi`'s, values of slots at most `hi`, and scores within MAX_ROWS x
    // stride.
    unsafe {
        match isa {
            Isa::Scalar => run::<Scalar, E, 4, 1>(&job),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => x86::avx2(&job),
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 | Isa::Avx512Vnni | Isa::Amx => x86::avx512(&job),
        }
    }
}

/// The most rows a tile of any instruction set has.
const MAX_ROWS: usize = 12;

/// The most panels a step of any instruction set's products reads at once.
const MAX_NV: usize = 2;

struct Job<'a, E> {
    s: &'a Stacked<'a, E>,
    isa: Isa,
    /// Scratch for `MAX_NV` packed panels.
    panels: *mut f32,
    /// Scratch of MAX_ROWS rows of `stride` floats: column c of a row is slot
    /// `(lo / PANEL) * PANEL + c`.
    scores: *mut f32,
    stride: usize,
    out: *mut f32,
    sums: *mut f32,
}

/// Every tile of up to `MR` rows; `NV` vectors of columns per step of a product.
/// Inlined into each instruction set's entry point, so that it is compiled with its
/// features.
#[inline(always)]
unsafe fn run<L: Lanes, E: CacheElem, const MR: usize, const NV: usize>(job: &Job<E>) {
    let rows = job.s.spans.len();
    let mut r = 0;
    while r < rows {
        let mr = MR.min(rows - r);
        match mr {
            1 => tile::<L, E, 1, NV>(job, r),
            2 => tile::<L, E, 2, NV>(job, r),
            3 => tile::<L, E, 3, NV>(job, r),
            4 => tile::<L, E, 4, NV>(job, r),
            5 => tile::<L, E, 5, NV>(job, r),
            6 => tile::<L, E, 6, NV>(job, r),
            7 => tile::<L, E, 7, NV>(job, r),
            8 => tile::<L, E, 8, NV>(job, r),
            9 => tile::<L, E, 9, NV>(job, r),
            10 => tile::<L, E, 10, NV>(job, r),
            11 => tile::<L, E, 11, NV>(job, r),
            _ => tile::<L, E, 12, NV>(job, r),
        }
        r += mr;
    }
}

/// Stacked rows `r..r + MR`: their scores over the union of their spans, the softmax
/// of each over its own span (zeros elsewhere in the union), and the value product.
#[inline(always)]
unsafe fn tile<L: Lanes, E: CacheElem, const MR: usize, const NV: usize>(job: &Job<E>, r: usize) {
    let s = job.s;
    let d = s.d;
    let spans = &s.spans[r..r + MR];
    let first = spans.iter().map(|x| x.0).min().unwrap_or(s.lo);
    let last = spans.iter().map(|x| x.1).max().unwrap_or(s.lo);
    let base = s.lo / PANEL;
    let (p0, p1) = (first / PANEL, last / PANEL + 1);
    // Scores: panels p0..p1 of keys, NV at a time.
    let q = s.queries.as_ptr().add(r * d);
    let mut p = p0;
    while p < p1 {
        let nv = if p + NV <= p1 { NV } else { 1 };
        let dst = job.scores.add((p - base) * PANEL);
        if let Keys::Panels(keys) = s.keys {
            // The keys are one stream per head, which the hardware follows (asking for
            // them ahead measured no faster). An f16 cache's values are asked for
            // while their panels are scored (10-30% faster steps); an f32 cache's
            // steps measured faster without (the hardware keeps up with twice the
            // bytes only with nothing else asked of it).
            if std::mem::size_of::<E>() < 4 {
                let values = s.values.as_ptr().wrapping_add(p * PANEL * s.v_rs);
                for j in 0..nv {
                    prefetch(values.wrapping_add(j * PANEL * s.v_rs), s.v_rs, d);
                }
            }
            let keys = keys.as_ptr().add(p * PANEL * d);
            scores::<L, E, MR, NV>(q, d, keys, nv == NV, dst, job.stride);
            p += nv;
            continue;
        }
        let keys = match s.keys {
            Keys::Packed(keys) => keys.as_ptr().add((p - base) * PANEL * d),
            Keys::Panels(_) => unreachable!("read in place above"),
            Keys::Rows { keys, k_rs } => {
                for j in 0..nv {
                    // A decode step streams the cache from memory, and the hardware
                    // does not see the panels' strided reads as one stream: ask for the
                    // keys a few panels ahead, and for this panel's values, which the
                    // value product reads once the scores are done.
                    let ahead = (p + j + AHEAD) * PANEL;
                    if ahead <= s.hi {
                        prefetch(keys.as_ptr().wrapping_add(ahead * k_rs), k_rs, d);
                    }
                    let here = (p + j) * PANEL;
                    prefetch(s.values.as_ptr().wrapping_add(here * s.v_rs), s.v_rs, d);
                    let panel = job.panels.add(j * PANEL * d);
                    let panel = std::slice::from_raw_parts_mut(panel, PANEL * d);
                    pack_panel(job.isa, panel, keys, k_rs, d, (p + j) * PANEL, s.hi);
                }
                job.panels.cast_const()
            }
        };
        scores::<L, f32, MR, NV>(q, d, keys, nv == NV, dst, job.stride);
        p += nv;
    }
    // Softmax of each row over its own span.
    let col = |slot: usize| slot - base * PANEL;
    for (i, &(a, z)) in spans.iter().enumerate() {
        let row = std::slice::from_raw_parts_mut(job.scores.add(i * job.stride), job.stride);
        row[col(first)..col(a)].fill(0.0);
        row[col(z) + 1..=col(last)].fill(0.0);
        *job.sums.add(r + i) = exp_shifted(&mut row[col(a)..=col(z)], s.scale);
    }
    // Values: slots first..=last, NV vectors of columns at a time.
    let probs = job.scores.add(col(first));
    let values = s.values.as_ptr().add(first * s.v_rs);
    let steps = last - first + 1;
    let out = job.out.add(r * d);
    let mut c = 0;
    // Tiles of few rows (a decode step's group) have the registers for twice the
    // columns: half the passes over the values.
    let wide = MR * NV * 2 <= 16;
    while c < d {
        if wide && c + 2 * NV * PANEL <= d {
            let v = values.add(c);
            if NV == 2 {
                product::<L, E, MR, 4>(probs, job.stride, v, s.v_rs, PANEL, steps, out.add(c), d);
            } else {
                product::<L, E, MR, 2>(probs, job.stride, v, s.v_rs, PANEL, steps, out.add(c), d);
            }
            c += 2 * NV * PANEL;
        } else if c + NV * PANEL <= d {
            let v = values.add(c);
            product::<L, E, MR, NV>(probs, job.stride, v, s.v_rs, PANEL, steps, out.add(c), d);
            c += NV * PANEL;
        } else {
            let v = values.add(c);
            product::<L, E, MR, 1>(probs, job.stride, v, s.v_rs, PANEL, steps, out.add(c), d);
            c += PANEL;
        }
    }
}

/// The scores of `MR` query rows (`q`, `d` apart) against `NV` panels of keys from
/// `keys` (`wide`) or one, into `dst` (rows `stride` apart).
#[inline(always)]
unsafe fn scores<L: Lanes, B: CacheElem, const MR: usize, const NV: usize>(
    q: *const f32,
    d: usize,
    keys: *const B,
    wide: bool,
    dst: *mut f32,
    stride: usize,
) {
    if wide {
        product::<L, B, MR, NV>(q, d, keys, PANEL, PANEL * d, d, dst, stride);
    } else {
        product::<L, B, MR, 1>(q, d, keys, PANEL, PANEL * d, d, dst, stride);
    }
}

/// Panels ahead of the one being packed whose keys are asked for.
const AHEAD: usize = 4;

/// Asks for the `d` values of each of the 16 slots from `first` (rows `rs` apart) to be
/// brought into the second-level cache; the slots may run past the data.
#[inline(always)]
fn prefetch<E>(first: *const E, rs: usize, d: usize) {
    let size = std::mem::size_of::<E>();
    if rs == d {
        // Contiguous slots are one run of lines.
        into_l2(first, PANEL * d * size);
    } else {
        for r in 0..PANEL {
            into_l2(first.wrapping_add(r * rs), d * size);
        }
    }
}

/// `out[i][j]` (vector j of row i, at `out + i * o_rs + j * 16`) = the chain over
/// t in 0..steps of `a[i * a_rs + t] * b[t * b_ts + j * b_vs ..][..16]`, from zero.
#[allow(clippy::too_many_arguments)]
#[inline(always)]
unsafe fn product<L: Lanes, B: CacheElem, const MR: usize, const NV: usize>(
    a: *const f32,
    a_rs: usize,
    b: *const B,
    b_ts: usize,
    b_vs: usize,
    steps: usize,
    out: *mut f32,
    o_rs: usize,
) {
    let mut acc = [[L::zero(); NV]; MR];
    for t in 0..steps {
        let mut bv = [L::zero(); NV];
        for (j, v) in bv.iter_mut().enumerate() {
            *v = B::lanes::<L>(b.add(t * b_ts + j * b_vs));
        }
        for (i, row) in acc.iter_mut().enumerate() {
            let x = *a.add(i * a_rs + t);
            for (v, w) in row.iter_mut().zip(&bv) {
                *v = v.fma(x, *w);
            }
        }
    }
    for (i, row) in acc.iter().enumerate() {
        for (j, v) in row.iter().enumerate() {
            v.store(out.add(i * o_rs + j * PANEL));
        }
    }
}

#[cfg(target_arch = "x86_64")]
mod x86;
