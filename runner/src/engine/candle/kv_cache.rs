//! The batched key/value cache, owned by the engine rather than by the model.
//!
//! Rows are sequences; columns are slots. Sequences of different lengths are
//! left-padded: row `b` holds `pad[b]` padding slots before its first real token, so
//! every row's newest token sits in the last column and a decode step appends one
//! column for all rows. Rows can be selected (to drop finished sequences) or repeated
//! (to fork one prefill into several seeds), and caches of separately prefilled groups
//! can be joined.

use candle_core::{Result, Tensor};

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

    /// Keeps the given rows, in the given order; an index may repeat (fork).
    pub fn select(&mut self, rows: &[usize]) -> Result<()> {
        if rows.is_empty() {
            self.layers.iter_mut().for_each(|l| *l = None);
            self.pad.clear();
            self.slots = 0;
            return Ok(());
        }
        let device = self.device();
        if let Some(device) = device {
            let idx: Vec<u32> = rows.iter().map(|&r| r as u32).collect();
            let idx = Tensor::new(idx.as_slice(), &device)?;
            for (k, v) in self.layers.iter_mut().flatten() {
                *k = k.index_select(&idx, 0)?;
                *v = v.index_select(&idx, 0)?;
            }
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
        let slots = parts.iter().map(|c| c.slots).max().unwrap_or(0);
        let layers = parts.first().map(|c| c.layers.len()).unwrap_or(0);
        let mut pad = Vec::new();
        let mut per_layer: Vec<(Vec<Tensor>, Vec<Tensor>)> = vec![(vec![], vec![]); layers];
        for part in &parts {
            let extra = slots - part.slots;
            pad.extend(part.pad.iter().map(|p| p + extra));
            for (l, entry) in part.layers.iter().enumerate() {
                let Some((k, v)) = entry else {
                    candle_core::bail!("joining a cache that was never filled")
                };
                per_layer[l]
                    .0
                    .push(left_pad(&k.narrow(2, 0, part.slots)?, extra)?);
                per_layer[l]
                    .1
                    .push(left_pad(&v.narrow(2, 0, part.slots)?, extra)?);
            }
        }
        let layers = per_layer
            .into_iter()
            .map(|(ks, vs)| Ok(Some((Tensor::cat(&ks, 0)?, Tensor::cat(&vs, 0)?))))
            .collect::<Result<Vec<_>>>()?;
        let wanted = parts.iter().map(|c| c.wanted).max().unwrap_or(0);
        let mut joined = KvCache {
            layers,
            pad,
            slots,
            wanted,
        };
        joined.reserve(wanted)?;
        joined.trim()?;
        Ok(joined)
    }

    fn device(&self) -> Option<candle_core::Device> {
        self.layers
            .iter()
            .flatten()
            .next()
            .map(|(k, _)| k.device().clone())
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

/// A new buffer of `cap` slots holding the first `used` slots of `t`.
fn regrow(t: &Tensor, used: usize, cap: usize) -> Result<Tensor> {
    let (rows, heads, _, d) = t.dims4()?;
    let out = Tensor::zeros((rows, heads, cap, d), t.dtype(), t.device())?;
    if used > 0 {
        out.slice_set(&t.narrow(2, 0, used)?.contiguous()?, 2, 0)?;
    }
    Ok(out)
}

fn left_pad(t: &Tensor, extra: usize) -> Result<Tensor> {
    if extra == 0 {
        return Ok(t.clone());
    }
    let (b, h, _, d) = t.dims4()?;
    let zeros = Tensor::zeros((b, h, extra, d), t.dtype(), t.device())?;
    Tensor::cat(&[&zeros, t], 2)
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
}
