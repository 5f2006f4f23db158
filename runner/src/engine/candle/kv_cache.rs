//! The batched key/value cache, owned by the engine rather than by the model.
//!
//! Rows are sequences; columns are slots. Sequences of different lengths are
//! left-padded: row `b` holds `pad[b]` padding slots before its first real token, so
//! every row's newest token sits in the last column and a decode step appends one
//! column for all rows. Rows can be selected (to drop finished sequences) or repeated
//! (to fork one prefill into several seeds), and caches of separately prefilled groups
//! can be joined.

use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, CudaStorage, InplaceOp2, Layout, Result, Tensor};

/// Keys and values live in buffers with room for more slots than they hold, written in
/// place: appending by concatenation would copy the whole cache at every decode step.
#[derive(Debug, Clone)]
pub struct KvCache {
    /// Per layer: key and value buffers, each (rows, kv_heads, capacity, head_dim); the
    /// first `slots` columns are in use.
    layers: Vec<Option<(Tensor, Tensor)>>,
    pad: Vec<usize>,
    slots: usize,
    /// Slots the next allocation should make room for (see [`KvCache::reserve`]).
    wanted: usize,
    /// Bytes copied by [`KvCache::select`] so far (benchmarks report it).
    selected_bytes: usize,
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

    /// Additive attention mask (rows, new, past + new) in row-major order: 0 where the
    /// query may attend, -inf elsewhere. A query sees real slots up to its own; with a
    /// `window` it sees only the last `window` positions. A padding query sees itself,
    /// so that its softmax row is never all -inf (which would give NaN); its output is
    /// never read.
    pub fn mask(&self, window: Option<usize>) -> Vec<f32> {
        let total = self.past + self.new;
        let mut out = vec![f32::NEG_INFINITY; self.rows() * self.new * total];
        for b in 0..self.rows() {
            let pad = self.pad[b];
            for i in 0..self.new {
                let q = self.past + i;
                let row = &mut out[(b * self.new + i) * total..][..total];
                if q < pad {
                    row[q] = 0.0;
                    continue;
                }
                let first = match window {
                    Some(w) => (q + 1).saturating_sub(w).max(pad),
                    None => pad,
                };
                for slot in &mut row[first..=q] {
                    *slot = 0.0;
                }
            }
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
        }
    }

    /// Makes room for `total` slots, so that decoding up to there never reallocates.
    pub fn reserve(&mut self, total: usize) -> Result<()> {
        self.wanted = total;
        for entry in self.layers.iter_mut().flatten() {
            if entry.0.dim(2)? < total {
                let k = regrow(&entry.0, self.slots, total)?;
                let v = regrow(&entry.1, self.slots, total)?;
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
        let need = self.slots + k.dim(2)?;
        // Growth beyond the reservation: geometric, so appends stay amortised O(1).
        let grown = need.max(self.wanted).max(need + need / 2);
        let (bk, bv) = match self.layers[layer].take() {
            Some((bk, bv)) if bk.dim(2)? >= need => (bk, bv),
            Some((bk, bv)) => (
                regrow(&bk, self.slots, grown)?,
                regrow(&bv, self.slots, grown)?,
            ),
            None => {
                let cap = need.max(self.wanted);
                let (rows, heads, _, d) = k.dims4()?;
                (
                    Tensor::zeros((rows, heads, cap, d), k.dtype(), k.device())?,
                    Tensor::zeros((rows, heads, cap, d), v.dtype(), v.device())?,
                )
            }
        };
        bk.slice_set(&k.contiguous()?, 2, self.slots)?;
        bv.slice_set(&v.contiguous()?, 2, self.slots)?;
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
        let drop = pad.iter().copied().min().unwrap_or(0);
        for (k, v) in self.layers.iter_mut().flatten() {
            let (_, heads, cap, d) = k.dims4()?;
            let place = PlaceSlots {
                rows: rows.to_vec(),
                first: drop,
                len: self.slots - drop,
                to: 0,
                at: 0,
            };
            let shape = (rows.len(), heads, cap - drop, d);
            *k = place.onto_zeros(k, shape)?;
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
        let drop = self.pad.iter().copied().min().unwrap_or(0);
        if drop == 0 {
            return Ok(());
        }
        let keep = self.slots - drop;
        for (k, v) in self.layers.iter_mut().flatten() {
            let cap = k.dim(2)? - drop;
            *k = regrow(&k.narrow(2, drop, keep)?, keep, cap)?;
            *v = regrow(&v.narrow(2, drop, keep)?, keep, cap)?;
        }
        self.pad.iter_mut().for_each(|p| *p -= drop);
        self.slots = keep;
        Ok(())
    }

    /// Stacks the rows of several caches of the same model into one, left-padding the
    /// shorter ones with zero slots.
    pub fn join(parts: Vec<KvCache>) -> Result<KvCache> {
        let wanted = parts.iter().map(|c| c.wanted).max().unwrap_or(0);
        let all: Vec<Vec<usize>> = parts.iter().map(|c| (0..c.rows()).collect()).collect();
        let refs: Vec<(&KvCache, &[usize])> = parts
            .iter()
            .zip(&all)
            .map(|(c, r)| (c, r.as_slice()))
            .collect();
        let mut joined = KvCache::join_rows(&refs, wanted)?;
        joined.wanted = wanted;
        Ok(joined)
    }

    /// Stacks the chosen rows of several caches (an index may repeat: a fork) into one
    /// with room for `capacity` slots (more if the rows need it). Slots that are padding
    /// in every row are dropped, shorter rows are left-padded with zeros, and every slot
    /// in use is copied once: admitting newcomers to a running batch costs one copy of
    /// the batch's cache, fork and padding included.
    pub fn join_rows(parts: &[(&KvCache, &[usize])], capacity: usize) -> Result<KvCache> {
        let Some(first) = parts.first() else {
            candle_core::bail!("joining no caches")
        };
        let layers = first.0.layers.len();
        // Per part: the slots in use after its own shared padding.
        let mut lens = Vec::with_capacity(parts.len());
        for (c, rows) in parts {
            if c.layers.len() != layers {
                candle_core::bail!("joining caches of different models")
            }
            if let Some(&bad) = rows.iter().find(|&&r| r >= c.rows()) {
                candle_core::bail!("joining row {bad} of a cache of {} rows", c.rows())
            }
            let drop = rows.iter().map(|&r| c.pad[r]).min().unwrap_or(0);
            lens.push((drop, c.slots - drop));
        }
        let slots = lens.iter().map(|l| l.1).max().unwrap_or(0);
        let cap = capacity.max(slots);
        let mut pad = Vec::new();
        for ((c, rows), &(drop, len)) in parts.iter().zip(&lens) {
            pad.extend(rows.iter().map(|&r| c.pad[r] - drop + (slots - len)));
        }
        let total: usize = parts.iter().map(|(_, rows)| rows.len()).sum();
        let mut out = Vec::with_capacity(layers);
        for l in 0..layers {
            // One buffer per layer that every part is copied into: one copy of each row.
            let mut joined: Option<(Tensor, Tensor)> = None;
            let mut at = 0;
            for ((c, rows), &(drop, len)) in parts.iter().zip(&lens) {
                if rows.is_empty() {
                    continue;
                }
                let Some((k, v)) = &c.layers[l] else {
                    candle_core::bail!("joining a cache that was never filled")
                };
                let (jk, jv) = match &joined {
                    Some(j) => j.clone(),
                    None => {
                        let (_, heads, _, d) = k.dims4()?;
                        let zeros = || Tensor::zeros((total, heads, cap, d), k.dtype(), k.device());
                        joined.insert((zeros()?, zeros()?)).clone()
                    }
                };
                let place = PlaceSlots {
                    rows: rows.to_vec(),
                    first: drop,
                    len,
                    to: slots - len,
                    at,
                };
                jk.inplace_op2(k, &place)?;
                jv.inplace_op2(v, &place)?;
                at += rows.len();
            }
            out.push(joined);
        }
        Ok(KvCache {
            layers: out,
            pad,
            slots,
            wanted: 0,
            selected_bytes: 0,
        })
    }

    /// Bytes [`KvCache::select`] has copied since the cache was made.
    pub fn selected_bytes(&self) -> usize {
        self.selected_bytes
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

/// Copies slots `first..first + len` of the chosen rows of a (rows, heads, capacity, d)
/// buffer into rows `at..` of another such buffer, from slot `to` on. A run of
/// consecutive source rows is one 2-D copy (heads x run lines), so dropping finished
/// rows costs a copy per run of survivors, a fork one per row.
struct PlaceSlots {
    rows: Vec<usize>,
    first: usize,
    len: usize,
    to: usize,
    at: usize,
}

impl PlaceSlots {
    /// A new zeroed buffer of `shape` with the chosen slots placed in it.
    fn onto_zeros(&self, src: &Tensor, shape: (usize, usize, usize, usize)) -> Result<Tensor> {
        let dst = Tensor::zeros(shape, src.dtype(), src.device())?;
        dst.inplace_op2(src, self)?;
        Ok(dst)
    }

    fn run<S: BackendStorage>(
        &self,
        dst: &mut S,
        dst_l: &Layout,
        src: &S,
        src_l: &Layout,
    ) -> Result<()> {
        let (src_rows, heads, src_cap, d) = src_l.shape().dims4()?;
        let (dst_rows, dst_heads, cap, dst_d) = dst_l.shape().dims4()?;
        let fits = self.first + self.len <= src_cap
            && self.to + self.len <= cap
            && self.at + self.rows.len() <= dst_rows
            && self.rows.iter().all(|&r| r < src_rows)
            && (heads, d) == (dst_heads, dst_d);
        if !src_l.is_contiguous() || !dst_l.is_contiguous() || !fits {
            candle_core::bail!("place-slots: contiguous buffers with the rows and slots asked for")
        }
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
        self.run(dst, dst_l, src, src_l)
    }

    fn cuda_fwd(
        &self,
        dst: &mut CudaStorage,
        dst_l: &Layout,
        src: &CudaStorage,
        src_l: &Layout,
    ) -> Result<()> {
        self.run(dst, dst_l, src, src_l)
    }
}

/// A new buffer of `cap` slots holding the first `used` slots of `t`.
fn regrow(t: &Tensor, used: usize, cap: usize) -> Result<Tensor> {
    let (rows, heads, _, d) = t.dims4()?;
    let out = Tensor::zeros((rows, heads, cap, d), t.dtype(), t.device())?;
    if used > 0 {
        out.slice_set(&t.narrow(2, 0, used)?.contiguous()?, 2, 0)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    #[test]
    fn padded_queries_always_see_one_slot_and_real_queries_never_see_padding() {
        let layout = StepLayout {
            past: 0,
            new: 4,
            pad: vec![0, 2],
        };
        let m = layout.mask(None);
        let row = |b: usize, i: usize| &m[(b * 4 + i) * 4..][..4];
        for b in 0..2 {
            for i in 0..4 {
                assert!(row(b, i).contains(&0.0), "row {b} query {i}");
            }
        }
        assert_eq!(
            row(1, 2),
            &[f32::NEG_INFINITY, f32::NEG_INFINITY, 0.0, f32::NEG_INFINITY]
        );
        assert_eq!(row(1, 3), &[f32::NEG_INFINITY, f32::NEG_INFINITY, 0.0, 0.0]);
        assert_eq!(layout.positions(), vec![0, 1, 2, 3, 0, 0, 0, 1]);
    }

    #[test]
    fn sliding_window_keeps_the_last_positions_only() {
        let layout = StepLayout {
            past: 5,
            new: 1,
            pad: vec![1],
        };
        assert_eq!(
            layout.mask(Some(2)),
            vec![
                f32::NEG_INFINITY,
                f32::NEG_INFINITY,
                f32::NEG_INFINITY,
                f32::NEG_INFINITY,
                0.0,
                0.0
            ]
        );
    }

    fn filled(pad: Vec<usize>, slots: usize, fill: f32) -> Result<KvCache> {
        let mut c = KvCache::new(1, pad.clone());
        let k = Tensor::full(fill, (pad.len(), 1, slots, 2), &Device::Cpu)?;
        c.append(0, &k, &k)?;
        c.advance(slots);
        Ok(c)
    }

    #[test]
    fn appends_within_and_beyond_the_reservation_keep_every_slot() -> Result<()> {
        let mut c = KvCache::new(1, vec![0]);
        c.reserve(2)?;
        let mut last = None;
        for step in 0..5 {
            let t = Tensor::full(step as f32, (1, 1, 1, 2), &Device::Cpu)?;
            let (k, _) = c.append(0, &t, &t)?;
            c.advance(1);
            assert_eq!(k.dim(2)?, step + 1);
            last = Some(k);
        }
        let got: Vec<f32> = last.unwrap().flatten_all()?.to_vec1()?;
        assert_eq!(got, vec![0., 0., 1., 1., 2., 2., 3., 3., 4., 4.]);
        Ok(())
    }

    #[test]
    fn select_forks_and_trims_shared_padding() -> Result<()> {
        let mut c = filled(vec![2, 0], 4, 1.0)?;
        c.select(&[0, 0, 0])?;
        assert_eq!(c.pad(), &[0, 0, 0]);
        assert_eq!(c.slots(), 2);
        assert_eq!(c.lengths(), vec![2, 2, 2]);
        assert_eq!(c.layers[0].as_ref().unwrap().0.dims4()?, (3, 1, 2, 2));
        Ok(())
    }

    #[test]
    fn select_copies_the_used_slots_of_the_chosen_rows_in_order() -> Result<()> {
        // Five rows whose every slot holds 100 * row + slot, with room for 12 slots.
        let (rows, heads, slots, d) = (5, 2, 7, 3);
        let mut c = KvCache::new(1, vec![3, 1, 4, 2, 0]);
        c.reserve(12)?;
        let mut data = Vec::new();
        for r in 0..rows {
            for _ in 0..heads {
                for s in 0..slots {
                    data.extend(std::iter::repeat_n((100 * r + s) as f32, d));
                }
            }
        }
        let kv = Tensor::from_vec(data, (rows, heads, slots, d), &Device::Cpu)?;
        c.append(0, &kv, &kv)?;
        c.advance(slots);
        // Rows 2, 3 and 0 (a run and a single row), then a fork of row 3.
        c.select(&[2, 3, 0, 3])?;
        assert_eq!(c.pad(), &[2, 0, 1, 0]);
        assert_eq!(c.slots(), 5);
        let (k, v) = c.layers[0].clone().unwrap();
        assert_eq!(k.dims4()?, (4, heads, 10, d));
        for (i, src) in [2usize, 3, 0, 3].into_iter().enumerate() {
            for t in [&k, &v] {
                let row: Vec<Vec<f32>> = t.get(i)?.get(1)?.to_vec2()?;
                for (s, slot) in row.iter().enumerate() {
                    let want = if s < 5 {
                        (100 * src + s + 2) as f32
                    } else {
                        0.0
                    };
                    assert_eq!(slot, &vec![want; d], "row {i} slot {s}");
                }
            }
        }
        assert!(c.select(&[4]).is_err(), "a row that is no longer there");
        Ok(())
    }

    #[test]
    fn join_left_pads_the_shorter_group() -> Result<()> {
        let c = KvCache::join(vec![filled(vec![0], 3, 1.0)?, filled(vec![0, 1], 5, 2.0)?])?;
        assert_eq!(c.pad(), &[2, 0, 1]);
        assert_eq!(c.lengths(), vec![3, 5, 4]);
        let k = c.layers[0]
            .as_ref()
            .unwrap()
            .0
            .to_dtype(candle_core::DType::F32)?;
        let first: Vec<f32> = k.get(0)?.flatten_all()?.to_vec1()?;
        assert_eq!(&first[..4], &[0.0; 4]);
        assert_eq!(&first[4..], &[1.0; 6]);
        Ok(())
    }

    /// A one-layer cache whose slot `s` of row `r` holds `base + 100 * r + s` (padding
    /// included), with room for `cap` slots.
    fn numbered(pad: Vec<usize>, slots: usize, cap: usize, base: f32) -> Result<KvCache> {
        let rows = pad.len();
        let mut c = KvCache::new(1, pad);
        c.reserve(cap)?;
        let data: Vec<f32> = (0..rows)
            .flat_map(|r| (0..slots).map(move |s| base + (100 * r + s) as f32))
            .collect();
        let kv = Tensor::from_vec(data, (rows, 1, slots, 1), &Device::Cpu)?;
        c.append(0, &kv, &kv)?;
        c.advance(slots);
        Ok(c)
    }

    #[test]
    fn join_rows_copies_chosen_rows_of_each_part_once_into_one_padded_buffer() -> Result<()> {
        // A running batch of three rows (6 slots, row 1 padded by 4) and a newcomer of
        // one row (3 slots) forked twice.
        let running = numbered(vec![1, 4, 0], 6, 9, 0.0)?;
        let newcomer = numbered(vec![0], 3, 3, 1000.0)?;
        let c = KvCache::join_rows(&[(&running, &[0, 2]), (&newcomer, &[0, 0])], 8)?;
        // Row 1 left: the shared padding of the rows kept is 0, so 6 slots stay.
        assert_eq!(c.slots(), 6);
        assert_eq!(c.pad(), &[1, 0, 3, 3]);
        let (k, v) = c.layers[0].clone().unwrap();
        assert_eq!(k.dims4()?, (4, 1, 8, 1));
        let want = |row: usize, s: usize| -> f32 {
            match row {
                0 if s < 6 => s as f32,
                1 if s < 6 => (200 + s) as f32,
                2 | 3 if (3..6).contains(&s) => (1000 + s - 3) as f32,
                _ => 0.0,
            }
        };
        for t in [&k, &v] {
            let got: Vec<f32> = t.flatten_all()?.to_vec1()?;
            for (i, x) in got.iter().enumerate() {
                assert_eq!(*x, want(i / 8, i % 8), "row {} slot {}", i / 8, i % 8);
            }
        }
        assert!(KvCache::join_rows(&[(&running, &[3])], 8).is_err());
        Ok(())
    }
}
