//! The linear layers' products on the CPU, with weights packed once at load.
//!
//! Batch invariance is built into the reduction order rather than obtained by steering
//! a library: every output element `y[r][j]` is one fused multiply-add chain over
//! `k = 0, 1, .., K-1`, starting from zero, whatever the number of rows, the tile a row
//! falls in, the thread that runs it or the instruction set. A SIMD lane holds one
//! output element, so vectors only run 16 chains side by side; a depth block that
//! stops part-way stores its chains to the output and the next block reloads them,
//! which continues the chain exactly. So a row alone gets the bits it gets among 31
//! others, with no padding: a single row streams the weights once, as a
//! matrix-vector product should.
//!
//! The weights are packed into panels of [`PANEL`] outputs, depth-major (`[panel][k][16]`),
//! so that one depth step of a panel is one contiguous vector load. They are kept in
//! the checkpoint's format: f32, or bf16 widened to f32 in registers (exact), so a
//! bf16 model takes half the memory and half the bandwidth of its f32 copy.
//!
//! Or they are quantized at load to GGML's q8_0 (int8 in blocks of 32 depths with an
//! f16 scale, [`q8`]) and multiplied as GGML does, by integer dot products with the
//! activations quantized to int8 per row at each product ([`q8_dot`]): the chains are
//! then over blocks rather than depths, with the same invariance.

pub use crate::candle::cpu::isa::{best_isa, Isa};
use crate::candle::cpu::lanes::{Lanes, Scalar};
use crate::candle::cpu::quantized::Rows;
use crate::candle::cpu::{product_input, with_slice};
use candle_core::{DType, Device, Result, Tensor};
use lines::Lines;
use rayon::prelude::*;
use weight::Weight;

/// Outputs per panel: one AVX-512 vector of f32.
pub const PANEL: usize = 16;

/// Inputs per q8_0 block: a q8_0 layer must be a whole number of them.
pub const Q8_BLOCK: usize = q8::BLOCK;

/// Depth of one block: a group of panels' block (4 x 16 x 512 f32 = 128 KiB) stays in L2
/// while every row tile reads it.
const DEPTH_BLOCK: usize = 512;

/// f32 values per 64-byte cache line.
const LINE_FLOATS: usize = 16;

/// How a packed weight holds its values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Packing {
    F32,
    Bf16,
    Q8_0,
}

#[derive(Debug, Clone)]
enum Store {
    F32(Lines<f32>),
    /// bf16 bit patterns.
    Bf16(Lines<u16>),
    /// q8_0 panels ([`q8`]).
    Q8(q8::Panels),
}

/// A (n, k) weight in panels, for `x W^T`.
#[derive(Debug, Clone)]
pub struct PackedWeight {
    n: usize,
    k: usize,
    store: Store,
}

impl PackedWeight {
    /// Packs `parts` (each (n_i, k), stacked along n in order) as `packing`. Each part
    /// is read in place where it is already in that dtype on the CPU.
    pub fn pack(parts: &[&Tensor], packing: Packing) -> Result<Self> {
        let k = parts.first().map_or(Ok(0), |p| p.dim(1))?;
        let n: usize = parts.iter().map(|p| p.dim(0)).sum::<Result<usize>>()?;
        let panels = n.div_ceil(PANEL);
        let len = panels * k * PANEL;
        let mut store = match packing {
            Packing::F32 => Store::F32(Lines::zeroed(len)),
            Packing::Bf16 => Store::Bf16(Lines::zeroed(len)),
            // Checks the depths itself, and widens each row only as it packs it.
            Packing::Q8_0 => {
                let rows: Vec<Rows> = parts.iter().map(|p| Rows::Float(p)).collect();
                return Self::q8_0_of_rows(&rows);
            }
        };
        for part in parts {
            if part.dim(1)? != k {
                candle_core::bail!("stacked weights differ in depth: {k} and {}", part.dim(1)?);
            }
        }
        let mut first = 0;
        for part in parts {
            let rows = part.dim(0)?;
            match &mut store {
                Store::F32(dst) => {
                    let src = part.to_dtype(DType::F32)?.to_device(&Device::Cpu)?;
                    with_slice::<f32, _>(&src, |s| scatter(dst.as_mut_slice(), s, first, rows, k))?;
                }
                Store::Bf16(dst) => {
                    let src = part.to_dtype(DType::BF16)?.to_device(&Device::Cpu)?;
                    with_slice::<half::bf16, _>(&src, |s| {
                        let bits: &[u16] = bytemuck_bf16(s);
                        scatter(dst.as_mut_slice(), bits, first, rows, k)
                    })?;
                }
                Store::Q8(_) => {}
            }
            first += rows;
        }
        Ok(PackedWeight { n, k, store })
    }

    /// q8_0 panels of weights read row by row (each (n_i, k), stacked along n in
    /// order): each row widened to f32 and quantized as it is packed, so that no f32
    /// copy of a whole weight is made.
    pub(crate) fn q8_0_of_rows(rows: &[Rows]) -> Result<Self> {
        let dims = rows.iter().map(Rows::dims).collect::<Result<Vec<_>>>()?;
        let k = dims.first().map_or(0, |d| d.1);
        if let Some((_, other)) = dims.iter().find(|d| d.1 != k) {
            candle_core::bail!("stacked weights differ in depth: {k} and {other}");
        }
        let n: usize = dims.iter().map(|d| d.0).sum();
        let store = Store::Q8(q8::pack(rows, n.div_ceil(PANEL), k)?);
        Ok(PackedWeight { n, k, store })
    }

    /// `x W^T` over the last dimension of `x` (f32 on the CPU): (.., k) -> (.., n).
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        let (x, rows, mut dims) = product_input(x, self.k)?;
        let len = rows * self.n;
        if rows == 0 || !self.n.is_multiple_of(PANEL) {
            let mut out = vec![0f32; len];
            with_slice::<f32, _>(&x, |xs| {
                self.matmul(xs, rows, &mut out, best_isa());
                Ok(())
            })?;
            dims.push(self.n);
            return Tensor::from_vec(out, dims, x.device());
        }
        // The output starts on a cache line, so that no vector store of the kernel
        // straddles two (a Vec is 16-byte aligned; split stores cost the products about
        // 3% at prefill sizes). The lead is a few floats before the tensor's offset.
        let mut out = Vec::<f32>::with_capacity(len + LINE_FLOATS - 1);
        let lead = out.as_ptr().align_offset(64).min(LINE_FLOATS - 1);
        out.resize(lead, 0.0);
        with_slice::<f32, _>(&x, |xs| {
            // Safety: `out` has room for lead + rows x n floats, and n fills whole
            // panels. Every element is stored by the kernel before anything reads it,
            // so the output is not zeroed first (a pass over it as long as the product's).
            unsafe { self.run(xs, rows, out.as_mut_ptr().add(lead), best_isa()) };
            Ok(())
        })?;
        // Safety: the kernel stored all `len` elements after the lead.
        unsafe { out.set_len(lead + len) };
        dims.push(self.n);
        Tensor::from_vec(out, lead + len, x.device())?
            .narrow(0, lead, len)?
            .reshape(dims)
    }

    /// `out (rows, n) = x (rows, k) W^T` through `isa`'s kernel (all give the same bits).
    pub fn matmul(&self, x: &[f32], rows: usize, out: &mut [f32], isa: Isa) {
        assert_eq!(x.len(), rows * self.k, "packed product: input length");
        assert_eq!(out.len(), rows * self.n, "packed product: output length");
        if rows == 0 || self.n == 0 {
            return;
        }
        let padded = self.n.div_ceil(PANEL) * PANEL;
        if padded == self.n {
            // Safety: `out` holds rows x n = rows x padded floats.
            unsafe { self.run(x, rows, out.as_mut_ptr(), isa) };
        } else {
            let mut wide = vec![0f32; rows * padded];
            // Safety: `wide` holds rows x padded floats.
            unsafe { self.run(x, rows, wide.as_mut_ptr(), isa) };
            for (dst, src) in out.chunks_mut(self.n).zip(wide.chunks(padded)) {
                dst.copy_from_slice(&src[..self.n]);
            }
        }
    }

    /// # Safety
    /// `out` must be valid for writes of `rows` rows of whole panels (a multiple of 16
    /// floats each, at least n); `x` holds `rows` x k floats, and `rows` > 0.
    unsafe fn run(&self, x: &[f32], rows: usize, out: *mut f32, isa: Isa) {
        match &self.store {
            Store::F32(w) => dispatch(isa, &self.job(x, rows, out, w.as_slice())),
            Store::Bf16(w) => dispatch(isa, &self.job(x, rows, out, w.as_slice())),
            Store::Q8(w) => {
                let panels = self.n.div_ceil(PANEL);
                q8_dot::run(w, x, rows, self.k, panels, out, isa)
            }
        }
    }

    fn job<'a, W: Weight>(
        &self,
        x: &'a [f32],
        rows: usize,
        out: *mut f32,
        w: &'a [W],
    ) -> Job<'a, W> {
        let width = self.n.div_ceil(PANEL) * PANEL;
        Job {
            x: x.as_ptr(),
            w: w.as_ptr(),
            out: SendPtr(out),
            rows,
            k: self.k,
            panels: width / PANEL,
            width,
            panel_len: W::panel_len(self.k),
            _life: std::marker::PhantomData,
        }
    }
}

/// Copies a row-major (rows, k) block into panels starting at output `first`.
fn scatter<T: Copy>(dst: &mut [T], src: &[T], first: usize, rows: usize, k: usize) -> Result<()> {
    if src.len() != rows * k {
        candle_core::bail!("packed weight: {} values for ({rows}, {k})", src.len());
    }
    for (r, row) in src.chunks_exact(k).enumerate() {
        let out = first + r;
        let (panel, lane) = (out / PANEL, out % PANEL);
        let base = panel * k * PANEL + lane;
        for (d, &v) in row.iter().enumerate() {
            dst[base + d * PANEL] = v;
        }
    }
    Ok(())
}

fn bytemuck_bf16(s: &[half::bf16]) -> &[u16] {
    // Safety: bf16 is a transparent u16.
    unsafe { std::slice::from_raw_parts(s.as_ptr().cast::<u16>(), s.len()) }
}

/// A product's operands as raw pointers, shared by the threads that split its panels.
struct Job<'a, W> {
    x: *const f32,
    w: *const W,
    out: SendPtr,
    rows: usize,
    k: usize,
    panels: usize,
    /// Floats per output row (panels x 16).
    width: usize,
    /// Units of `w` per panel.
    panel_len: usize,
    _life: std::marker::PhantomData<&'a W>,
}

#[derive(Clone, Copy)]
struct SendPtr(*mut f32);
// Safety: each thread writes the columns of its own panels only.
unsafe impl Send for SendPtr {}
unsafe impl Sync for SendPtr {}
// Safety: the job's pointers are only read, or written at disjoint columns.
unsafe impl<W> Sync for Job<'_, W> {}

fn dispatch<W: Weight>(isa: Isa, job: &Job<W>) {
    match isa {
        Isa::Scalar => split(job, 1, |g| group::<Scalar, W, 4, 1>(job, g)),
        // Safety: `available_isas` checked the features.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 => split(job, x86::AVX2_PANELS, |g| unsafe { x86::avx2(job, g) }),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512 | Isa::Avx512Vnni | Isa::Amx => {
            split(job, x86::AVX512_PANELS, |g| unsafe { x86::avx512(job, g) })
        }
    }
}

/// Runs `group` for every group of `np` panels, across threads unless the product is
/// too small to share.
fn split<W>(job: &Job<W>, np: usize, group: impl Fn(usize) + Sync + Send) {
    split_groups(job.panels, np, job.rows * job.k * job.panels, group)
}

/// Runs `group` for every group of `np` of `panels` panels, across threads unless the
/// product's `work` (rows x depth x panels) is too small to share.
fn split_groups(panels: usize, np: usize, work: usize, group: impl Fn(usize) + Sync + Send) {
    let groups = panels.div_ceil(np);
    if work < 1 << 15 {
        (0..groups).for_each(group);
    } else {
        (0..groups).into_par_iter().for_each(group);
    }
}

/// Group `g` of `NP` panels: walks the depth in blocks and, per block, every tile of
/// up to `MR` rows. Inlined into each instruction set's entry point, so that the
/// kernel is compiled with its features.
#[inline(always)]
fn group<L: Lanes, W: Weight, const MR: usize, const NP: usize>(job: &Job<W>, g: usize) {
    let first = g * NP;
    let count = NP.min(job.panels - first);
    let mut k0 = 0;
    while k0 < job.k {
        let k1 = (k0 + DEPTH_BLOCK).min(job.k);
        row_tiles::<L, W, MR, NP>(job, first, count, k0, k1);
        k0 = k1;
    }
}

/// Every tile of rows over panels `first..first + count`, depths `k0..k1`.
#[inline(always)]
fn row_tiles<L: Lanes, W: Weight, const MR: usize, const NP: usize>(
    job: &Job<W>,
    first: usize,
    count: usize,
    k0: usize,
    k1: usize,
) {
    let mut r = 0;
    while r < job.rows {
        let mr = MR.min(job.rows - r);
        if count == NP {
            rows_tile::<L, W, NP>(job, mr, r, first, k0, k1);
        } else {
            for p in first..first + count {
                rows_tile::<L, W, 1>(job, mr, r, p, k0, k1);
            }
        }
        r += mr;
    }
}

/// A tile of `mr` (at most 6) rows by `NP` panels, with `mr` fixed at compile time.
#[inline(always)]
fn rows_tile<L: Lanes, W: Weight, const NP: usize>(
    job: &Job<W>,
    mr: usize,
    r: usize,
    p: usize,
    k0: usize,
    k1: usize,
) {
    // Safety: r + mr <= rows, p + NP <= panels, k1 <= k: every access is in bounds.
    unsafe {
        match mr {
            1 => tile::<L, W, 1, NP>(job, r, p, k0, k1),
            2 => tile::<L, W, 2, NP>(job, r, p, k0, k1),
            3 => tile::<L, W, 3, NP>(job, r, p, k0, k1),
            4 => tile::<L, W, 4, NP>(job, r, p, k0, k1),
            5 => tile::<L, W, 5, NP>(job, r, p, k0, k1),
            _ => tile::<L, W, 6, NP>(job, r, p, k0, k1),
        }
    }
}

/// Rows `r..r+MR`, panels `p..p+NP`, depth `k0..k1`: each lane one output's chain.
#[inline(always)]
unsafe fn tile<L: Lanes, W: Weight, const MR: usize, const NP: usize>(
    job: &Job<W>,
    r: usize,
    p: usize,
    k0: usize,
    k1: usize,
) {
    let out = |row: usize, panel: usize| job.out.0.add((r + row) * job.width + (p + panel) * PANEL);
    let mut acc = [[L::zero(); NP]; MR];
    if k0 > 0 {
        for (i, a) in acc.iter_mut().enumerate() {
            for (j, v) in a.iter_mut().enumerate() {
                *v = L::load(out(i, j));
            }
        }
    }
    let panel_len = job.panel_len;
    let w = job.w.add(p * panel_len);
    let x = job.x.add(r * job.k);
    for d in k0..k1 {
        let mut ws = [L::zero(); NP];
        for (j, v) in ws.iter_mut().enumerate() {
            *v = W::load::<L>(w.add(j * panel_len), d);
        }
        for (i, a) in acc.iter_mut().enumerate() {
            let xv = *x.add(i * job.k + d);
            for (j, v) in a.iter_mut().enumerate() {
                *v = v.fma(xv, ws[j]);
            }
        }
    }
    for (i, a) in acc.iter().enumerate() {
        for (j, v) in a.iter().enumerate() {
            v.store(out(i, j));
        }
    }
}

mod lines;
mod q8;
mod q8_dot;
mod q8_rows;
mod weight;
#[cfg(target_arch = "x86_64")]
mod x86;

#[cfg(test)]
mod tests;
