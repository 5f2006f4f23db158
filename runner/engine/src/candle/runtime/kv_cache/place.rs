//! Copies of slot ranges between cache buffers, in either order a buffer holds its
//! slots in.

use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, CudaStorage, InplaceOp2, Layout, Result, Tensor};

/// Slots per key panel: one vector of 16 f32 lanes of the CPU's attention products.
pub const PANEL: usize = 16;

/// How a (rows, heads, capacity, d) buffer lays out one head's slots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotOrder {
    /// Slot after slot, each slot's `d` values together.
    Rows,
    /// In panels of [`PANEL`] slots, depth-major: value `c` of slot `s` at `(s / 16) *
    /// 16 * d + c * 16 + s % 16` from the head's start. The CPU's attention reads a
    /// decode step's keys this way, as one stream per head and without packing them
    /// first; a panel never straddles two heads (the capacity is whole panels).
    Panels,
}

impl SlotOrder {
    /// Where value `c` of slot `s` is, from its head's start.
    #[inline(always)]
    fn at(self, s: usize, c: usize, d: usize) -> usize {
        match self {
            SlotOrder::Rows => s * d + c,
            SlotOrder::Panels => (s / PANEL) * PANEL * d + c * PANEL + s % PANEL,
        }
    }

    /// `slots` rounded up to what a buffer in this order holds: whole panels.
    pub fn capacity(self, slots: usize) -> usize {
        match self {
            SlotOrder::Rows => slots,
            SlotOrder::Panels => slots.next_multiple_of(PANEL),
        }
    }
}

/// Copies slots `first..first + len` of the chosen rows of a (rows, heads, capacity, d)
/// buffer into rows `at..` of another such buffer, from slot `to` on, from slots in
/// `from` order into slots in `into` order. Between buffers of rows, a run of
/// consecutive source rows is one 2-D copy (heads x run lines), so dropping finished
/// rows costs a copy per run of survivors, a fork one per row. Panels are copied whole
/// where the two ranges start at the same place in a panel; the slots a whole first or
/// last panel carries along lie before `to` (padding of the row written) or after the
/// range (not yet in use), which no query reads.
pub(super) struct PlaceSlots {
    pub rows: Vec<usize>,
    pub first: usize,
    pub len: usize,
    pub to: usize,
    pub at: usize,
    pub from: SlotOrder,
    pub into: SlotOrder,
}

impl PlaceSlots {
    /// Every row of a buffer, slots `first..first + len`, to slot `to` of the same rows.
    pub fn all_rows(t: &Tensor, first: usize, len: usize, to: usize, order: SlotOrder) -> Self {
        PlaceSlots {
            rows: (0..t.dims().first().copied().unwrap_or(0)).collect(),
            first,
            len,
            to,
            at: 0,
            from: order,
            into: order,
        }
    }

    /// The same copy between buffers whose slots are in `order`.
    pub fn in_order(&self, order: SlotOrder) -> Self {
        PlaceSlots {
            rows: self.rows.clone(),
            from: order,
            into: order,
            ..*self
        }
    }

    /// A new zeroed buffer of `shape` with the chosen slots placed in it.
    pub fn onto_zeros(&self, src: &Tensor, shape: (usize, usize, usize, usize)) -> Result<Tensor> {
        let dst = Tensor::zeros(shape, src.dtype(), src.device())?;
        dst.inplace_op2(src, self)?;
        Ok(dst)
    }

    /// The buffers' shapes checked: (heads, d, source capacity, destination capacity).
    fn check(&self, dst_l: &Layout, src_l: &Layout) -> Result<(usize, usize, usize, usize)> {
        let (src_rows, heads, src_cap, d) = src_l.shape().dims4()?;
        let (dst_rows, dst_heads, cap, dst_d) = dst_l.shape().dims4()?;
        let whole = |order: SlotOrder, cap: usize| order.capacity(cap) == cap;
        let fits = self.first + self.len <= src_cap
            && self.to + self.len <= cap
            && self.at + self.rows.len() <= dst_rows
            && self.rows.iter().all(|&r| r < src_rows)
            && (heads, d) == (dst_heads, dst_d)
            && whole(self.from, src_cap)
            && whole(self.into, cap);
        if !src_l.is_contiguous() || !dst_l.is_contiguous() || !fits {
            candle_core::bail!("place-slots: contiguous buffers with the rows and slots asked for")
        }
        Ok((heads, d, src_cap, cap))
    }

    fn copy_rows<S: BackendStorage>(
        &self,
        dst: &mut S,
        dst_l: &Layout,
        src: &S,
        src_l: &Layout,
    ) -> Result<()> {
        let (heads, d, src_cap, cap) = self.check(dst_l, src_l)?;
        let mut i = 0;
        while i < self.rows.len() {
            let mut run = 1;
            while i + run < self.rows.len() && self.rows[i + run] == self.rows[i] + run {
                run += 1;
            }
            src.copy2d(
                dst,
                run * heads,
                self.len * d,
                src_cap * d,
                cap * d,
                src_l.start_offset() + (self.rows[i] * heads * src_cap + self.first) * d,
                dst_l.start_offset() + ((self.at + i) * heads * cap + self.to) * d,
            )?;
            i += run;
        }
        Ok(())
    }

    /// The copy where either side is in panels: value by value, or panel by panel
    /// where both are in panels at the same place in a panel.
    fn copy_slots<T: Copy>(
        &self,
        dst: &mut [T],
        dst_l: &Layout,
        src: &[T],
        src_l: &Layout,
    ) -> Result<()> {
        let (heads, d, src_cap, cap) = self.check(dst_l, src_l)?;
        if self.len == 0 {
            return Ok(());
        }
        let whole_panels = self.from == SlotOrder::Panels
            && self.into == SlotOrder::Panels
            && self.first % PANEL == self.to % PANEL;
        for (i, &r) in self.rows.iter().enumerate() {
            for h in 0..heads {
                let src =
                    &src[src_l.start_offset() + (r * heads + h) * src_cap * d..][..src_cap * d];
                let dst = &mut dst[dst_l.start_offset() + ((self.at + i) * heads + h) * cap * d..]
                    [..cap * d];
                if whole_panels {
                    let (p0, p1) = (self.first / PANEL, (self.first + self.len).div_ceil(PANEL));
                    let n = (p1 - p0) * PANEL * d;
                    let q0 = self.to / PANEL * PANEL * d;
                    dst[q0..q0 + n].copy_from_slice(&src[p0 * PANEL * d..][..n]);
                    continue;
                }
                for s in 0..self.len {
                    for c in 0..d {
                        dst[self.into.at(self.to + s, c, d)] =
                            src[self.from.at(self.first + s, c, d)];
                    }
                }
            }
        }
        Ok(())
    }
}

impl InplaceOp2 for PlaceSlots {
    fn name(&self) -> &'static str {
        "place-slots"
    }

    fn cpu_fwd(
        &self,
        dst: &mut CpuStorage,
        dst_l: &Layout,
        src: &CpuStorage,
        src_l: &Layout,
    ) -> Result<()> {
        if (self.from, self.into) == (SlotOrder::Rows, SlotOrder::Rows) {
            return self.copy_rows(dst, dst_l, src, src_l);
        }
        match (dst, src) {
            (CpuStorage::F32(d), CpuStorage::F32(s)) => self.copy_slots(d, dst_l, s, src_l),
            (CpuStorage::F16(d), CpuStorage::F16(s)) => self.copy_slots(d, dst_l, s, src_l),
            (CpuStorage::BF16(d), CpuStorage::BF16(s)) => self.copy_slots(d, dst_l, s, src_l),
            (d, s) => candle_core::bail!(
                "place-slots: keys in panels of {:?} into {:?}",
                s.dtype(),
                d.dtype()
            ),
        }
    }

    fn cuda_fwd(
        &self,
        dst: &mut CudaStorage,
        dst_l: &Layout,
        src: &CudaStorage,
        src_l: &Layout,
    ) -> Result<()> {
        if (self.from, self.into) != (SlotOrder::Rows, SlotOrder::Rows) {
            candle_core::bail!("place-slots: keys in panels are the CPU's attention's alone")
        }
        self.copy_rows(dst, dst_l, src, src_l)
    }
}
