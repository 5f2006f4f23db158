use crate::candle::runtime::kv_cache::place::PlaceSlots;
use crate::candle::runtime::kv_cache::*;
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
    let c = KvCache::join(
        vec![filled(vec![0], 3, 1.0)?, filled(vec![0, 1], 5, 2.0)?],
        0,
    )?;
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
    let c = KvCache::join_rows(
        vec![
            (JoinPart::Shared(&running), &[0, 2]),
            (JoinPart::Shared(&newcomer), &[0, 0]),
        ],
        8,
    )?;
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
    assert!(KvCache::join_rows(vec![(JoinPart::Shared(&running), &[3])], 8).is_err());
    // A part with no rows chosen (a running batch whose rows all finished) adds no
    // padding: the newcomer keeps its own 3 slots.
    let alone = KvCache::join_rows(
        vec![
            (JoinPart::Shared(&running), &[]),
            (JoinPart::Shared(&newcomer), &[0]),
        ],
        8,
    )?;
    assert_eq!((alone.slots(), alone.pad()), (3, &[0usize][..]));
    assert!(KvCache::join_rows(vec![(JoinPart::Shared(&running), &[])], 8).is_err());
    Ok(())
}

#[test]
fn place_writes_a_newcomer_over_one_finished_row_and_nothing_else() -> Result<()> {
    // A batch of three rows (6 slots of 9) and a newcomer of 3 slots after 1 of padding.
    let mut batch = numbered(vec![1, 4, 0], 6, 9, 0.0)?;
    let newcomer = numbered(vec![1], 4, 4, 1000.0)?;
    batch.place(1, &newcomer, 0)?;
    assert_eq!(batch.pad(), &[1, 3, 0]);
    assert_eq!(batch.lengths(), vec![5, 3, 6]);
    assert_eq!(
        batch.selected_bytes(),
        2 * 3 * 4,
        "one row's 3 slots, keys and values"
    );
    let (k, v) = batch.layers[0].clone().unwrap();
    assert_eq!(
        k.dims4()?,
        (3, 1, 9, 1),
        "the buffers are kept, not reallocated"
    );
    let want = |row: usize, s: usize| -> f32 {
        match (row, s) {
            (_, 6..) => 0.0,
            // The newcomer's real slots 1..4 end at the batch's last slot.
            (1, 3..) => (1000 + s - 3 + 1) as f32,
            // Before them, the finished row's values stay as its padding.
            _ => (100 * row + s) as f32,
        }
    };
    for t in [&k, &v] {
        let got: Vec<f32> = t.flatten_all()?.to_vec1()?;
        for (i, x) in got.iter().enumerate() {
            assert_eq!(*x, want(i / 9, i % 9), "row {} slot {}", i / 9, i % 9);
        }
    }
    let long = numbered(vec![0], 7, 7, 0.0)?;
    assert!(batch.place(0, &long, 0).is_err(), "longer than the batch");
    assert!(batch.place(3, &newcomer, 0).is_err(), "no such row");
    Ok(())
}

/// Heap bytes alive on the current thread, and the most since the last reset: the
/// engine's unit tests run on a counting allocator so that a test can measure the peak
/// of work done on its own thread (candle's CPU `zeros` and copies run on the caller's).
mod peak {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    thread_local! {
        static LIVE: Cell<isize> = const { Cell::new(0) };
        static PEAK: Cell<isize> = const { Cell::new(0) };
    }

    fn add(bytes: isize) {
        // try_with: a thread being torn down has no counters left to update.
        let _ = LIVE.try_with(|live| {
            let now = live.get() + bytes;
            live.set(now);
            let _ = PEAK.try_with(|p| p.set(p.get().max(now)));
        });
    }

    struct Counting;

    // Safety: forwards every call to the system allocator unchanged.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            add(layout.size() as isize);
            System.alloc(layout)
        }
        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            add(layout.size() as isize);
            System.alloc_zeroed(layout)
        }
        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            add(-(layout.size() as isize));
            System.dealloc(ptr, layout)
        }
        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            add(new_size as isize - layout.size() as isize);
            System.realloc(ptr, layout, new_size)
        }
    }

    #[global_allocator]
    static COUNTING: Counting = Counting;

    /// Runs `f`; returns its result and the most bytes it held beyond what was alive
    /// when it started.
    pub fn measure<T>(f: impl FnOnce() -> T) -> (T, usize) {
        let base = LIVE.with(Cell::get);
        PEAK.with(|p| p.set(base));
        let out = f();
        let peak = PEAK.with(Cell::get) - base;
        (out, peak.max(0) as usize)
    }
}

/// A cache of `layers` layers of `rows` rows, `slots` slots each, with room for `cap`.
fn sized(layers: usize, rows: usize, slots: usize, cap: usize) -> Result<KvCache> {
    let mut c = KvCache::new(layers, vec![0; rows]);
    c.reserve(cap)?;
    let kv = Tensor::ones((rows, 2, slots, 16), candle_core::DType::F32, &Device::Cpu)?;
    for l in 0..layers {
        c.append(l, &kv, &kv)?;
    }
    c.advance(slots);
    Ok(c)
}

#[test]
fn a_join_frees_each_part_as_it_copies_so_its_peak_is_the_plans() -> Result<()> {
    // Prefill groups of 3, 5 and 8 rows joined into one cache of 16 rows, 12 layers:
    // the parts and the result are never all alive at once.
    let layers = 12;
    let parts = vec![
        sized(layers, 3, 40, 40)?,
        sized(layers, 5, 64, 64)?,
        sized(layers, 8, 50, 50)?,
    ];
    let owned: usize = parts.iter().map(KvCache::bytes).sum();
    let (joined, above) = peak::measure(|| KvCache::join(parts, 0));
    let joined = joined?;
    // The parts were alive when the join began.
    let peak = owned + above;
    let plan = join_peak_bytes(owned, 0, joined.bytes(), layers);
    // The plan counts the buffers; the join's own bookkeeping (row lists, padding) is
    // a few hundred bytes beside them.
    assert!(
        peak <= plan + 4096,
        "peak {peak} bytes, plan {plan}: the parts and the result are alive together \
         ({} bytes)",
        owned + joined.bytes()
    );
    assert!(
        plan < owned + joined.bytes(),
        "the plan is below keeping both"
    );
    assert!(
        peak * 101 / 100 >= plan,
        "the plan overstates the peak by over 1%: {peak} vs {plan}"
    );

    // A running batch owned by the join and a newcomer it only reads: the newcomer's
    // buffers stay alive throughout.
    let running = sized(layers, 6, 64, 96)?;
    let newcomer = sized(layers, 1, 30, 30)?;
    let (owned, shared) = (running.bytes(), newcomer.bytes());
    let keep: Vec<usize> = (0..6).step_by(2).collect();
    let (joined, above) = peak::measure(|| {
        KvCache::join_rows(
            vec![
                (JoinPart::Owned(running), keep.as_slice()),
                (JoinPart::Shared(&newcomer), &[0, 0, 0]),
            ],
            96,
        )
    });
    let joined = joined?;
    let peak = owned + shared + above;
    let plan = join_peak_bytes(owned, shared, joined.bytes(), layers);
    assert!(peak <= plan + 4096, "peak {peak} bytes, plan {plan}");
    Ok(())
}

#[test]
fn a_cache_storing_f16_rounds_what_is_appended_and_keeps_f16_through_its_copies() -> Result<()> {
    use candle_core::DType;
    let dev = Device::Cpu;
    // 1/3 is not an f16: the buffers hold its rounding, whatever the model appended.
    let third = (1.0f32 / 3.0, half::f16::from_f32(1.0 / 3.0).to_f32());
    assert_ne!(third.0, third.1);
    let part = |pad: Vec<usize>, slots: usize| -> Result<KvCache> {
        let mut c = KvCache::new(2, pad.clone()).storing(DType::F16);
        let k = Tensor::full(third.0, (pad.len(), 1, slots, 2), &dev)?;
        for layer in 0..2 {
            let (kv, _) = c.append(layer, &k, &k)?;
            assert_eq!(kv.dtype(), DType::F16);
        }
        c.advance(slots);
        Ok(c)
    };
    let bytes_f16 = part(vec![0], 4)?.bytes();
    assert_eq!(
        bytes_f16,
        2 * 2 * 4 * 2 * 2,
        "two layers of keys and values, 2 bytes each"
    );
    let mut joined = KvCache::join(vec![part(vec![0, 1], 3)?, part(vec![0], 5)?], 8)?;
    joined.select(&[2, 0, 0])?;
    let newcomer = part(vec![0], 2)?;
    joined.place(1, &newcomer, 0)?;
    // A later step appends f32 entries after the copies: they are rounded too.
    let step = Tensor::full(third.0, (3, 1, 1, 2), &dev)?;
    for layer in 0..2 {
        let (k, v) = joined.append(layer, &step, &step)?;
        for t in [&k, &v] {
            assert_eq!(t.dtype(), DType::F16, "layer {layer}");
            let last = t.narrow(2, t.dim(2)? - 1, 1)?.to_dtype(DType::F32)?;
            assert!(last
                .flatten_all()?
                .to_vec1::<f32>()?
                .iter()
                .all(|&x| x == third.1));
        }
    }
    Ok(())
}

/// Each row's real slots of layer `l` (keys, then values), whatever order the cache
/// holds its keys in.
fn real_slots(c: &KvCache, l: usize) -> Result<Vec<Vec<f32>>> {
    let (k, v) = c.layers[l].clone().expect("a filled layer");
    let (rows, heads, cap, d) = k.dims4()?;
    let k = PlaceSlots {
        into: SlotOrder::Rows,
        ..PlaceSlots::all_rows(&k, 0, c.slots(), 0, c.key_order())
    }
    .onto_zeros(&k, (rows, heads, cap, d))?;
    let mut out = Vec::new();
    for (b, &pad) in c.pad().iter().enumerate() {
        let real = |t: &Tensor| -> Result<Vec<f32>> {
            t.narrow(0, b, 1)?
                .narrow(2, pad, c.slots() - pad)?
                .flatten_all()?
                .to_vec1::<f32>()
        };
        out.push([real(&k)?, real(&v)?].concat());
    }
    Ok(out)
}

#[test]
fn a_cache_holding_keys_in_panels_keeps_the_same_keys_through_every_copy() -> Result<()> {
    // Two caches, keys in panels and by slot, through the same appends, growth beyond
    // the reservation, a fork, drops of padding shared by every row (a whole panel and
    // less), a join of parts of different lengths and a newcomer placed into a row:
    // every row's real slots stay the same in both.
    let (heads, d, layers) = (2, 16, 2);
    let kv = |rows: usize, slots: usize, seed: f32| -> Result<Tensor> {
        let n = rows * heads * slots * d;
        let data: Vec<f32> = (0..n).map(|i| seed + i as f32).collect();
        Tensor::from_vec(data, (rows, heads, slots, d), &Device::Cpu)
    };
    let fill = |order: SlotOrder, pad: Vec<usize>, slots: usize, seed: f32| -> Result<KvCache> {
        let rows = pad.len();
        let mut c = KvCache::new(layers, pad);
        c.reserve(slots + 2)?;
        for l in 0..layers {
            let t = kv(rows, slots, seed + 1e5 * l as f32)?;
            c.append_in(l, &t, &(&t * -1.0)?, order)?;
        }
        c.advance(slots);
        // Decode steps, past the reservation.
        for step in 0..5 {
            for l in 0..layers {
                let t = kv(rows, 1, seed - 1e4 * (step + 1) as f32)?;
                c.append_in(l, &t, &(&t * 2.0)?, order)?;
            }
            c.advance(1);
        }
        Ok(c)
    };
    let same = |a: &KvCache, b: &KvCache, what: &str| -> Result<()> {
        assert_eq!(b.key_order(), SlotOrder::Panels);
        assert_eq!(b.capacity() % PANEL, 0, "{what}: whole panels");
        assert_eq!(a.lengths(), b.lengths(), "{what}: lengths");
        for l in 0..layers {
            assert_eq!(real_slots(a, l)?, real_slots(b, l)?, "{what}: layer {l}");
        }
        Ok(())
    };
    let [mut rows, mut panels] = [SlotOrder::Rows, SlotOrder::Panels]
        .map(|o| fill(o, vec![0, 21, 37, 18], 40, 0.0).expect("filled"));
    same(&rows, &panels, "appended")?;
    rows.select(&[2, 1, 1, 3])?;
    panels.select(&[2, 1, 1, 3])?;
    same(&rows, &panels, "forked, 18 slots of padding dropped")?;
    assert_eq!(panels.pad(), &[21, 5, 5, 2], "a whole panel dropped");
    rows.select(&[0])?;
    panels.select(&[0])?;
    same(&rows, &panels, "one row kept")?;
    let other = |o| fill(o, vec![0, 3], 23, 5e5);
    let newcomer = |o| fill(o, vec![2], 9, 7e5);
    let rows = KvCache::join(vec![rows, other(SlotOrder::Rows)?], 50)?;
    let panels = KvCache::join(vec![panels, other(SlotOrder::Panels)?], 50)?;
    same(&rows, &panels, "joined")?;
    let (mut rows, mut panels) = (rows, panels);
    rows.place(1, &newcomer(SlotOrder::Rows)?, 0)?;
    panels.place(1, &newcomer(SlotOrder::Panels)?, 0)?;
    same(&rows, &panels, "placed")?;
    // Caches holding their keys in different orders are not mixed.
    assert!(panels.place(0, &newcomer(SlotOrder::Rows)?, 0).is_err());
    assert!(panels
        .append_in(0, &kv(3, 1, 0.0)?, &kv(3, 1, 0.0)?, SlotOrder::Rows)
        .is_err());
    Ok(())
}
