//! The integer q8_0 product: int8 weights ([`q8`]) times int8 activations quantized
//! per row ([`q8_rows`]), as GGML's q8_0 product does, for every row (prefill and
//! decode alike, so there is one arithmetic for all rows).
//!
//! Per output element, block `b` of 32 depths gives an integer dot product (exact, so
//! every instruction set gets the same integer) and the element is one fused
//! multiply-add chain over the blocks, `y = fma(dot_b, w_scale_b * x_scale_b, y)` for
//! b = 0, 1, .., starting from zero: the same chain whatever the rows, tile, thread or
//! instruction set, so a row gets the same bits alone as in any batch, and every
//! kernel the bits of the portable one.

use super::q8::{Panels, BLOCK, BLOCK_BYTES, GROUP};
use super::q8_rows::{self, Rows};
use super::{split_groups, Isa, SendPtr, PANEL};

/// One product's operands, shared by the threads that split its panels.
pub(super) struct Job<'a> {
    pub x: &'a Rows,
    pub w: &'a Panels,
    pub out: SendPtr,
    pub rows: usize,
    pub k: usize,
    pub panels: usize,
}

// Safety: the output is written at the disjoint columns of each thread's panels.
unsafe impl Sync for Job<'_> {}

impl Job<'_> {
    /// Output `(row, panel)`'s 16 floats.
    #[inline(always)]
    fn out(&self, row: usize, panel: usize) -> *mut f32 {
        self.out.0.wrapping_add((row * self.panels + panel) * PANEL)
    }

    /// Panel `p`'s values of block `b`.
    #[inline(always)]
    fn values(&self, p: usize, b: usize) -> *const u8 {
        let blocks = self.w.blocks;
        self.w.values.as_slice()[(p * blocks + b) * BLOCK_BYTES..].as_ptr()
    }

    /// Panel `p`'s 16 f16 scales of block `b`.
    #[inline(always)]
    fn scales(&self, p: usize, b: usize) -> *const u16 {
        self.w.scales.as_slice()[(p * self.w.blocks + b) * PANEL..].as_ptr()
    }
}

/// `out (rows, panels x 16) = x (rows, k) W^T` for q8_0 panels.
///
/// # Safety
/// `out` is valid for writes of `rows` rows of `panels` x 16 floats; `x` holds
/// `rows` x k floats, k is the panels' depth and `rows` > 0.
pub(super) unsafe fn run(
    w: &Panels,
    x: &[f32],
    rows: usize,
    k: usize,
    panels: usize,
    out: *mut f32,
    isa: Isa,
) {
    let x = q8_rows::quantize(x, rows, k, isa);
    let job = Job {
        x: &x,
        w,
        out: SendPtr(out),
        rows,
        k,
        panels,
    };
    let work = rows * k * panels;
    match isa {
        Isa::Scalar => split_groups(panels, 1, work, |g| portable(&job, g)),
        // Safety: `available_isas` checked the features.
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2 | Isa::Avx512 => split_groups(panels, 1, work, |g| unsafe { x86::avx2(&job, g) }),
        #[cfg(target_arch = "x86_64")]
        Isa::Avx512Vnni => {
            split_groups(panels, x86::PANELS, work, |g| unsafe { x86::vnni(&job, g) })
        }
        #[cfg(target_arch = "x86_64")]
        Isa::Amx if rows >= amx::ROWS => split_groups(panels, amx::PANELS, work, |g| unsafe {
            amx::panels(&job, g)
        }),
        #[cfg(target_arch = "x86_64")]
        Isa::Amx => split_groups(panels, x86::PANELS, work, |g| unsafe { x86::vnni(&job, g) }),
    }
}

/// The portable kernel: panel `p`, every row.
fn portable(job: &Job, p: usize) {
    let (blocks, k) = (job.w.blocks, job.k);
    for r in 0..job.rows {
        let mut acc = [0f32; PANEL];
        for b in 0..blocks {
            // Safety: block b of panel p and rows' block b are in bounds.
            let (values, scales) = unsafe {
                (
                    std::slice::from_raw_parts(job.values(p, b), BLOCK_BYTES),
                    std::slice::from_raw_parts(job.scales(p, b), PANEL),
                )
            };
            let xq = &job.x.q[r * k + b * BLOCK..][..BLOCK];
            let (xs, offset) = (job.x.scale[r * blocks + b], job.x.offset[r * blocks + b]);
            // The stored bytes times x, less the offset's share: the dot of the int8
            // values, as `vpdpbusd` forms it (in an order that vectorises).
            let mut dots = [0i32; PANEL];
            for (x4, group) in xq
                .chunks_exact(GROUP)
                .zip(values.chunks_exact(GROUP * PANEL))
            {
                for (dot, w4) in dots.iter_mut().zip(group.chunks_exact(GROUP)) {
                    for (&w, &x) in w4.iter().zip(x4) {
                        *dot += w as i32 * x as i32;
                    }
                }
            }
            for ((a, &s), dot) in acc.iter_mut().zip(scales).zip(dots) {
                let scale = half::f16::from_bits(s).to_f32() * xs;
                *a = ((dot - offset) as f32).mul_add(scale, *a);
            }
        }
        // Safety: (r, p) is in the output.
        unsafe { std::ptr::write_unaligned(job.out(r, p).cast::<[f32; PANEL]>(), acc) };
    }
}

#[cfg(target_arch = "x86_64")]
mod amx;
#[cfg(target_arch = "x86_64")]
mod x86;
