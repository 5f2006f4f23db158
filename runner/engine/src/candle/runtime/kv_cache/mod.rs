//! The batched key/value cache, owned by the engine rather than by the model.
//!
//! Rows are sequences; columns are slots. Sequences of different lengths are
//! left-padded: row `b` holds `pad[b]` padding slots before its first real token, so
//! every row's newest token sits in the last column and a decode step appends one
//! column for all rows. Rows can be selected (to drop finished sequences) or repeated
//! (to fork one prefill into several seeds), and caches of separately prefilled groups
//! can be joined.

mod place;

use candle_core::{DType, Result, Tensor};
use place::PlaceSlots;
pub use place::{SlotOrder, PANEL};

/// Keys and values live in buffers with room for more slots than they hold, written in
/// place: appending by concatenation would copy the whole cache at every decode step.
#[derive(Debug, Clone)]
pub struct KvCache {
    /// Per layer: key and value buffers, each (rows, kv_heads, capacity, head_dim); the
    /// first `slots` columns are in use.
    layers: Vec<Option<(Tensor, Tensor)>>,
    /// How every layer's key buffer orders its slots (the values' are always rows),
    /// as the first append asked for.
    keys: SlotOrder,
    pad: Vec<usize>,
    slots: usize,
    /// Slots the next allocation should make room for (see [`KvCache::reserve`]).
    wanted: usize,
    /// Bytes copied by [`KvCache::select`] so far (benchmarks report it).
    selected_bytes: usize,
    /// The dtype the buffers hold, where it is not the appended keys' and values' own
    /// (`--kv-cache f16`): each step's entries are rounded to it as they are written.
    store: Option<DType>,
}

/// Where the tokens of one forward step land, as the attention mask and RoPE see them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepLayout {
    /// Slots already in the cache before this step.
    pub past: usize,
    /// New tokens per row in this step (the same for every row).
    pub new: usize,
    /// Left padding per row, counted over past and new slots together.
    pub pad: Vec<usize>,
}

impl StepLayout {
    pub fn rows(&self) -> usize {
        self.pad.len()
    }

    /// Position of the token in new slot `i` of row `b`; padding slots get 0.
    pub fn position(&self, b: usize, i: usize) -> usize {
        (self.past + i).saturating_sub(self.pad[b])
    }

    /// Positions of all new tokens, row-major (rows, new).
    pub fn positions(&self) -> Vec<u32> {
        let mut out = Vec::with_capacity(self.rows() * self.new);
        for b in 0..self.rows() {
            for i in 0..self.new {
                out.push(self.position(b, i) as u32);
            }
        }
        out
    }

    /// The slots each new query sees, row-major (rows, new): one contiguous span, from
    /// its first real or in-window slot to itself. With a `window` a query sees only the
    /// last `window` positions. A padding query sees itself alone, so that its softmax
    /// row is never all -inf (which would give NaN); its output is never read.
    pub fn spans(&self, window: Option<usize>) -> Vec<(usize, usize)> {
        let mut out = Vec::with_capacity(self.rows() * self.new);
        for &pad in &self.pad {
            for i in 0..self.new {
                let q = self.past + i;
                let first = match window {
                    _ if q < pad => q,
                    Some(w) => (q + 1).saturating_sub(w).max(pad),
                    None => pad,
                };
                out.push((first, q));
            }
        }
        out
    }

    /// Additive attention mask (rows, new, past + new) in row-major order: 0 over each
    /// query's span (see [`StepLayout::spans`]), -inf elsewhere.
    pub fn mask(&self, window: Option<usize>) -> Vec<f32> {
        let total = self.past + self.new;
        let mut out = vec![f32::NEG_INFINITY; self.rows() * self.new * total];
        for (row, (first, last)) in out.chunks_mut(total).zip(self.spans(window)) {
            row[first..=last].fill(0.0);
        }
        out
    }
}

impl KvCache {
    /// An empty cache for rows that will be prefilled with the given left padding.
    pub fn new(layers: usize, pad: Vec<usize>) -> Self {
        KvCache {
            layers: vec![None; layers],
            pad,
            slots: 0,
            wanted: 0,
            selected_bytes: 0,
            store: None,
            keys: SlotOrder::Rows,
        }
    }

    /// The cache holding its keys and values in `dtype`, whatever the model appends.
    pub fn storing(mut self, dtype: DType) -> Self {
        self.store = Some(dtype);
        self
    }

    /// Makes room for `total` slots, so that decoding up to there never reallocates.
    pub fn reserve(&mut self, total: usize) -> Result<()> {
        self.wanted = total;
        let (order, cap) = (self.keys, self.keys.capacity(total));
        for entry in self.layers.iter_mut().flatten() {
            if entry.0.dim(2)? < total {
                let k = regrow(&entry.0, self.slots, cap, order)?;
                let v = regrow(&entry.1, self.slots, cap, SlotOrder::Rows)?;
                *entry = (k, v);
            }
        }
        Ok(())
    }

    pub fn rows(&self) -> usize {
        self.pad.len()
    }

    pub fn slots(&self) -> usize {
        self.slots
    }

    /// Slots the buffers hold before an append must reallocate them.
    pub fn capacity(&self) -> usize {
        self.layers
            .iter()
            .flatten()
            .next()
            .map_or(0, |(k, _)| k.dims()[2])
    }

    pub fn pad(&self) -> &[usize] {
        &self.pad
    }

    /// Number of real tokens of each row.
    pub fn lengths(&self) -> Vec<usize> {
        self.pad.iter().map(|p| self.slots - p).collect()
    }

    /// The layout of a step that adds `new` tokens to every row.
    pub fn layout(&self, new: usize) -> StepLayout {
        StepLayout {
            past: self.slots,
            new,
            pad: self.pad.clone(),
        }
    }

    /// Appends the step's keys and values of one layer; returns views of the layer's
    /// keys and values so far. Call once per layer, then [`KvCache::advance`].
    pub fn append(&mut self, layer: usize, k: &Tensor, v: &Tensor) -> Result<(Tensor, Tensor)> {
        self.append_in(layer, k, v, SlotOrder::Rows)
    }

    /// [`KvCache::append`], the keys held in `keys` order: that of the kernels that
    /// read them (`Kernels::key_order`). A cache holds all its keys in one order.
    pub fn append_in(
        &mut self,
        layer: usize,
        k: &Tensor,
        v: &Tensor,
        keys: SlotOrder,
    ) -> Result<(Tensor, Tensor)> {
        if keys != self.keys && self.layers.iter().any(Option::is_some) {
            candle_core::bail!(
                "appending keys in {keys:?} order to a cache holding them in {:?}",
                self.keys
            )
        }
        self.keys = keys;
        let new = k.dim(2)?;
        let need = self.slots + new;
        // Growth beyond the reservation: geometric, so appends stay amortised O(1).
        let grown = keys.capacity(need.max(self.wanted).max(need + need / 2));
        let (bk, bv) = match self.layers[layer].take() {
            Some((bk, bv)) if bk.dim(2)? >= need => (bk, bv),
            Some((bk, bv)) => (
                regrow(&bk, self.slots, grown, keys)?,
                regrow(&bv, self.slots, grown, SlotOrder::Rows)?,
            ),
            None => {
                let cap = keys.capacity(need.max(self.wanted));
                let (rows, heads, _, d) = k.dims4()?;
                let dtype = self.store.unwrap_or(k.dtype());
                (
                    Tensor::zeros((rows, heads, cap, d), dtype, k.device())?,
                    Tensor::zeros((rows, heads, cap, d), dtype, v.device())?,
                )
            }
        };
        let k = k.to_dtype(bk.dtype())?.contiguous()?;
        match keys {
            SlotOrder::Rows => bk.slice_set(&k, 2, self.slots)?,
            SlotOrder::Panels => bk.inplace_op2(
                &k,
                &PlaceSlots {
                    into: SlotOrder::Panels,
                    ..PlaceSlots::all_rows(&k, 0, new, self.slots, SlotOrder::Rows)
                },
            )?,
        }
        bv.slice_set(&v.to_dtype(bv.dtype())?.contiguous()?, 2, self.slots)?;
        let views = (bk.narrow(2, 0, need)?, bv.narrow(2, 0, need)?);
        self.layers[layer] = Some((bk, bv));
        Ok(views)
    }

    /// Marks the step's `new` slots as written in every layer.
    pub fn advance(&mut self, new: usize) {
        self.slots += new;
    }

    /// Keeps the given rows, in the given order; an index may repeat (fork). Leading
    /// slots that are padding in every kept row are dropped on the way. Only the slots
    /// in use are copied, once: not the reserved tail, and not a second time to trim.
    pub fn select(&mut self, rows: &[usize]) -> Result<()> {
        if rows.is_empty() {
            self.layers.iter_mut().for_each(|l| *l = None);
            self.pad.clear();
            self.slots = 0;
            return Ok(());
        }
        if let Some(&bad) = rows.iter().find(|&&r| r >= self.rows()) {
            candle_core::bail!("selecting row {bad} of a cache of {} rows", self.rows())
        }
        let pad: Vec<usize> = rows.iter().map(|&r| self.pad[r]).collect();
        let drop = self.droppable(pad.iter().copied().min().unwrap_or(0));
        for (k, v) in self.layers.iter_mut().flatten() {
            let (_, heads, cap, d) = k.dims4()?;
            let place = PlaceSlots {
                rows: rows.to_vec(),
                first: drop,
                len: self.slots - drop,
                to: 0,
                at: 0,
                from: SlotOrder::Rows,
                into: SlotOrder::Rows,
            };
            let shape = (rows.len(), heads, cap - drop, d);
            *k = place.in_order(self.keys).onto_zeros(k, shape)?;
            *v = place.onto_zeros(v, shape)?;
            self.selected_bytes +=
                2 * rows.len() * heads * place.len * d * k.dtype().size_in_bytes();
        }
        self.pad = pad.iter().map(|p| p - drop).collect();
        self.slots -= drop;
        Ok(())
    }

    /// [`KvCache::select`] as it was before the used-slot gather: every buffer copied
    /// whole (reserved tail included), then copied again to drop shared padding. Kept
    /// so that `runner bench` can measure the two side by side.
    pub fn select_copying_whole_buffers(&mut self, rows: &[usize]) -> Result<()> {
        if let Some(&bad) = rows.iter().find(|&&r| r >= self.rows()) {
            candle_core::bail!("selecting row {bad} of a cache of {} rows", self.rows())
        }
        for (k, v) in self.layers.iter_mut().flatten() {
            let idx: Vec<u32> = rows.iter().map(|&r| r as u32).collect();
            let idx = Tensor::new(idx.as_slice(), k.device())?;
            *k = k.index_select(&idx, 0)?;
            *v = v.index_select(&idx, 0)?;
        }
        self.pad = rows.iter().map(|&r| self.pad[r]).collect();
        self.trim()
    }

    /// Drops leading columns that are padding in every row: after long sequences leave
    /// the batch, the others no longer pay attention over their padding.
    fn trim(&mut self) -> Result<()> {
        let drop = self.droppable(self.pad.iter().copied().min().unwrap_or(0));
        if drop == 0 {
            return Ok(());
        }
        let keep = self.slots - drop;
        for (k, v) in self.layers.iter_mut().flatten() {
            let (rows, heads, cap, d) = k.dims4()?;
            let cap = cap - drop;
            *k = match self.keys {
                SlotOrder::Rows => regrow(&k.narrow(2, drop, keep)?, keep, cap, self.keys)?,
                SlotOrder::Panels => PlaceSlots::all_rows(k, drop, keep, 0, self.keys)
                    .onto_zeros(k, (rows, heads, cap, d))?,
            };
            *v = regrow(&v.narrow(2, drop, keep)?, keep, cap, SlotOrder::Rows)?;
        }
        self.pad.iter_mut().for_each(|p| *p -= drop);
        self.slots = keep;
        Ok(())
    }

    /// Stacks the rows of several caches of the same model into one with room for
    /// `room` slots (or what the parts reserved, if more), left-padding the shorter ones
    /// with zero slots; each part's buffers are freed as soon as they are copied (see
    /// [`KvCache::join_rows`]).
    pub fn join(parts: Vec<KvCache>, room: usize) -> Result<KvCache> {
        let wanted = parts.iter().map(|c| c.wanted).fold(room, usize::max);
        let store = parts.first().and_then(|c| c.store);
        let all: Vec<Vec<usize>> = parts.iter().map(|c| (0..c.rows()).collect()).collect();
        let parts: Vec<(JoinPart, &[usize])> = parts
            .into_iter()
            .zip(&all)
            .map(|(c, r)| (JoinPart::Owned(c), r.as_slice()))
            .collect();
        let mut joined = KvCache::join_rows(parts, wanted)?;
        joined.wanted = wanted;
        joined.store = store;
        Ok(joined)
    }

    /// Stacks the chosen rows of several caches (an index may repeat: a fork) into one
    /// with room for `capacity` slots (more if the rows need it). Slots that are padding
    /// in every row are dropped, shorter rows are left-padded with zeros, and every slot
    /// in use is copied once: admitting newcomers to a running batch costs one copy of
    /// the batch's cache, fork and padding included.
    ///
    /// The join goes layer by layer, and an owned part's layer is freed once copied, so
    /// the parts and the result are never alive whole at once: the peak is
    /// [`join_peak_bytes`], not the parts' bytes plus the result's.
    pub fn join_rows(mut parts: Vec<(JoinPart<'_>, &[usize])>, capacity: usize) -> Result<KvCache> {
        // A part with no rows chosen contributes nothing, not even its length.
        parts.retain(|p| !p.1.is_empty());
        let Some(first) = parts.first() else {
            candle_core::bail!("joining no rows")
        };
        let layers = first.0.cache().layers.len();
        let first_store = first.0.cache().store;
        // The order of the parts' keys (a part never filled has none yet).
        let filled = |c: &KvCache| c.layers.iter().any(Option::is_some);
        let order = parts
            .iter()
            .map(|p| p.0.cache())
            .find(|&c| filled(c))
            .map_or(SlotOrder::Rows, |c| c.keys);
        // Per part: the slots in use after its own shared padding.
        let mut lens = Vec::with_capacity(parts.len());
        for (c, rows) in &parts {
            let c = c.cache();
            if c.layers.len() != layers || (filled(c) && c.keys != order) {
                candle_core::bail!("joining caches of different models")
            }
            if let Some(&bad) = rows.iter().find(|&&r| r >= c.rows()) {
                candle_core::bail!("joining row {bad} of a cache of {} rows", c.rows())
            }
            let drop = rows.iter().map(|&r| c.pad[r]).min().unwrap_or(0);
            lens.push((drop, c.slots - drop));
        }
        let slots = lens.iter().map(|l| l.1).max().unwrap_or(0);
        let cap = order.capacity(capacity.max(slots));
        let mut pad = Vec::new();
        for ((c, rows), &(drop, len)) in parts.iter().zip(&lens) {
            let c = c.cache();
            pad.extend(rows.iter().map(|&r| c.pad[r] - drop + (slots - len)));
        }
        let total = pad.len();
        let mut out = Vec::with_capacity(layers);
        for l in 0..layers {
            // One buffer per layer that every part is copied into: one copy of each row.
            let mut at = 0;
            let mut joined: Option<(Tensor, Tensor)> = None;
            for ((c, rows), &(drop, len)) in parts.iter().zip(&lens) {
                let Some((k, v)) = &c.cache().layers[l] else {
                    candle_core::bail!("joining a cache that was never filled")
                };
                let (jk, jv) = match &joined {
                    Some(j) => j,
                    None => {
                        let (_, heads, _, d) = k.dims4()?;
                        let zeros = || Tensor::zeros((total, heads, cap, d), k.dtype(), k.device());
                        joined.insert((zeros()?, zeros()?))
                    }
                };
                let place = PlaceSlots {
                    rows: rows.to_vec(),
                    first: drop,
                    len,
                    to: slots - len,
                    at,
                    from: SlotOrder::Rows,
                    into: SlotOrder::Rows,
                };
                jk.inplace_op2(k, &place.in_order(order))?;
                jv.inplace_op2(v, &place)?;
                at += rows.len();
            }
            let freed: usize = parts.iter_mut().map(|(c, _)| c.release(l)).sum();
            // The allocator keeps freed blocks resident for reuse (process.rs), and a
            // prefill group's buffers sit in its heap: unless handed back now, the parts
            // and the result would be resident whole at once after all.
            if freed >= RETURN_FREED_BYTES {
                crate::process::return_freed_memory();
            }
            out.push(joined);
        }
        Ok(KvCache {
            layers: out,
            pad,
            slots,
            wanted: 0,
            selected_bytes: 0,
            store: first_store,
            keys: order,
        })
    }

    /// Writes row `src_row` of `src` (a newcomer's prefilled cache) over row `at` of
    /// this one, whose row has finished: the newcomer's real slots end at this cache's
    /// last slot, as every row's do, so the next step appends to it with the others.
    /// Only that row's real slots are copied. The slots before them become its padding
    /// and keep the finished row's values: no query reads them on the CPU, and on a GPU
    /// the mask weighs their finite scores zero.
    pub fn place(&mut self, at: usize, src: &KvCache, src_row: usize) -> Result<()> {
        if at >= self.rows() || src_row >= src.rows() {
            candle_core::bail!(
                "placing row {src_row} of {} into row {at} of {}",
                src.rows(),
                self.rows()
            )
        }
        let first = src.pad[src_row];
        let len = src.slots - first;
        if len > self.slots || src.layers.len() != self.layers.len() || src.keys != self.keys {
            candle_core::bail!(
                "placing a row of {len} slots into a cache of {} slots",
                self.slots
            )
        }
        let place = PlaceSlots {
            rows: vec![src_row],
            first,
            len,
            to: self.slots - len,
            at,
            from: SlotOrder::Rows,
            into: SlotOrder::Rows,
        };
        for (dst, from) in self.layers.iter().zip(&src.layers) {
            let (Some((dk, dv)), Some((sk, sv))) = (dst, from) else {
                candle_core::bail!("placing into or from a cache that was never filled")
            };
            dk.inplace_op2(sk, &place.in_order(self.keys))?;
            dv.inplace_op2(sv, &place)?;
            let (_, heads, _, d) = sk.dims4()?;
            self.selected_bytes += 2 * heads * len * d * sk.dtype().size_in_bytes();
        }
        self.pad[at] = self.slots - len;
        Ok(())
    }

    /// Bytes [`KvCache::select`] and [`KvCache::place`] have copied since the cache was
    /// made.
    pub fn selected_bytes(&self) -> usize {
        self.selected_bytes
    }

    /// How many of `pad` leading slots a copy can drop: with keys in panels, whole
    /// panels only, so that the copy moves them whole and the capacity stays whole
    /// panels (the few slots kept are padding, which no query reads).
    fn droppable(&self, pad: usize) -> usize {
        match self.keys {
            SlotOrder::Rows => pad,
            SlotOrder::Panels => pad / PANEL * PANEL,
        }
    }

    /// How the cache holds its keys' slots.
    pub fn key_order(&self) -> SlotOrder {
        self.keys
    }

    /// Bytes held by key and value buffers (used and reserved).
    pub fn bytes(&self) -> usize {
        self.layers
            .iter()
            .flatten()
            .map(|(k, v)| (k.elem_count() + v.elem_count()) * k.dtype().size_in_bytes())
            .sum()
    }
}

/// Host bytes a join's layer must free before they are handed back to the kernel at
/// once: a prefill group's layer is megabytes, a decode step's allocations fewer.
const RETURN_FREED_BYTES: usize = 16 << 20;

/// A cache a join copies rows from: one it frees layer by layer as it goes (a prefill
/// group's, the running batch's, which the join replaces), or one it only reads (a
/// newcomer's prompt cache, which its owner keeps).
pub enum JoinPart<'c> {
    Owned(KvCache),
    Shared(&'c KvCache),
}

impl JoinPart<'_> {
    fn cache(&self) -> &KvCache {
        match self {
            JoinPart::Owned(c) => c,
            JoinPart::Shared(c) => c,
        }
    }

    /// Frees an owned part's buffers of layer `l` (the last reference to them); returns
    /// the host bytes freed (none for a shared part or device memory).
    fn release(&mut self, l: usize) -> usize {
        let JoinPart::Owned(c) = self else { return 0 };
        match c.layers[l].take() {
            Some((k, v)) if k.device().is_cpu() => {
                (k.elem_count() + v.elem_count()) * k.dtype().size_in_bytes()
            }
            _ => 0,
        }
    }
}

/// Bytes alive at the peak of a join over `layers` layers into a cache of `joined`
/// bytes, from parts of `owned` bytes (freed layer by layer) and `shared` bytes (kept):
/// layer `l` of the result is made before the parts' layer `l` is freed, so after layer
/// `l` the result's first `l + 1` layers and the owned parts' last `layers - l` layers
/// are alive. The most is at one end: the first layer or the last.
pub fn join_peak_bytes(owned: usize, shared: usize, joined: usize, layers: usize) -> usize {
    let layers = layers.max(1);
    let first = joined / layers + owned;
    let last = joined + owned / layers;
    first.max(last) + shared
}

/// A new buffer of `cap` slots holding the first `used` slots of `t`, in `order`.
fn regrow(t: &Tensor, used: usize, cap: usize, order: SlotOrder) -> Result<Tensor> {
    let (rows, heads, _, d) = t.dims4()?;
    if order == SlotOrder::Panels {
        return PlaceSlots::all_rows(t, 0, used, 0, order).onto_zeros(t, (rows, heads, cap, d));
    }
    let out = Tensor::zeros((rows, heads, cap, d), t.dtype(), t.device())?;
    if used > 0 {
        out.slice_set(&t.narrow(2, 0, used)?.contiguous()?, 2, 0)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
