//! Keys held in a cache's panels (`SlotOrder::Panels`): the bits of keys held slot by
//! slot, on every instruction set, through the cache's writes and the model's views.

use super::tests::{attend_stacked, block_spans, four_tokens, noise, operands};
use super::*;
use crate::candle::cpu::isa::available_isas;
use crate::candle::runtime::kv_cache::KvCache;
use candle_core::{DType, Device};

/// Keys `s * rs..` of `slots` slots, laid out in panels by the rule the products read
/// (value `c` of slot `s` at `(s / 16) * 16 * d + c * 16 + s % 16`), written out here
/// rather than by the cache, so that the two are checked against each other.
fn in_panels<E: Copy + Default>(keys: &[E], rs: usize, d: usize, slots: usize) -> Vec<E> {
    let mut out = vec![E::default(); slots.div_ceil(PANEL) * PANEL * d];
    for s in 0..slots {
        for c in 0..d {
            out[(s / PANEL) * PANEL * d + c * PANEL + s % PANEL] = keys[s * rs + c];
        }
    }
    out
}

fn attend_keys<E: CacheElem>(
    isa: Isa,
    (q, keys, values, v_rs): (&[f32], Keys<E>, &[E], usize),
    d: usize,
    spans: &[(usize, usize)],
    (lo, hi): (usize, usize),
) -> Vec<u32> {
    let (out, sums) = attend_stacked(isa, (q, keys, values, v_rs), d, spans, (lo, hi));
    out.iter().chain(&sums).map(|x| x.to_bits()).collect()
}

#[test]
fn keys_read_from_panels_give_the_bits_of_keys_read_by_slot_on_every_instruction_set() {
    // Decode groups and prefill tiles, spans starting and ending inside panels, more
    // panels than the prefetches look ahead, and Gemma 3's head size.
    for (n, &(d, group, m, first, q0, window)) in [
        (16, 4, 1, 0, 40, None),
        (64, 3, 1, 5, 200, Some(50)),
        (256, 4, 1, 17, 130, None),
        (32, 7, 13, 3, 60, None),
        (256, 2, 9, 0, 33, Some(20)),
    ]
    .iter()
    .enumerate()
    {
        let spans = block_spans(first, q0, m, group, window);
        let (lo, hi) = (spans[0].0, q0 + m - 1);
        let o = operands(spans.len(), hi + 1, d, 70 + n as u64);
        let panels = in_panels(&o.k, o.rs, d, hi + 1);
        let half = |v: &[f32]| {
            v.iter()
                .map(|&x| half::f16::from_f32(x))
                .collect::<Vec<_>>()
        };
        let (k16, v16, p16) = (half(&o.k), half(&o.v), half(&panels));
        for isa in available_isas() {
            let (q, ctx) = (&o.q[..], format!("{isa:?}, case {n}"));
            let rows = Keys::Rows {
                keys: &o.k[..],
                k_rs: o.rs,
            };
            let want = attend_keys(isa, (q, rows, &o.v, o.rs), d, &spans, (lo, hi));
            let got = attend_keys(
                isa,
                (q, Keys::Panels(&panels), &o.v, o.rs),
                d,
                &spans,
                (lo, hi),
            );
            assert_eq!(got, want, "{ctx}: f32");
            let rows = Keys::Rows {
                keys: &k16[..],
                k_rs: o.rs,
            };
            let want = attend_keys(isa, (q, rows, &v16, o.rs), d, &spans, (lo, hi));
            let got = attend_keys(
                isa,
                (q, Keys::Panels(&p16), &v16, o.rs),
                d,
                &spans,
                (lo, hi),
            );
            assert_eq!(got, want, "{ctx}: f16");
        }
    }
}

#[test]
fn a_cache_holding_keys_in_panels_gives_the_bits_of_one_holding_them_by_slot() -> Result<()> {
    // A prefill of left-padded rows, then decode steps, each appended to two caches
    // (keys in panels, keys by slot) and attended over through the views the appends
    // return: a model's path, in f32 and f16, with and without a window.
    let dev = Device::Cpu;
    for (d, heads, kv, window, store) in [
        (64, 4, 2, None, DType::F32),
        (256, 4, 1, Some(24), DType::F16),
        (16, 3, 1, Some(7), DType::F32),
    ] {
        let pad = vec![0, 13, 21];
        let rows = pad.len();
        let mut caches = [SlotOrder::Rows, SlotOrder::Panels]
            .map(|order| (order, KvCache::new(1, pad.clone()).storing(store)));
        let t = |seed: u64, h: usize, n: usize| {
            Tensor::from_vec(noise(seed, rows * h * n * d), (rows, h, n, d), &dev)
        };
        let mut slots = 0;
        for (step, new) in [45, 1, 1, 1, 1, 1].into_iter().enumerate() {
            let seed = 10 * step as u64;
            let (q, k, v) = (
                (t(seed, heads, new)? * 3.0)?,
                t(seed + 1, kv, new)?,
                t(seed + 2, kv, new)?,
            );
            let mut outs = Vec::new();
            for (order, cache) in caches.iter_mut() {
                let layout = cache.layout(new);
                let (kc, vc) = cache.append_in(0, &k, &v, *order)?;
                cache.advance(new);
                let out = attention_in(&q, (&kc, *order), &vc, &layout, window, 0.2)?;
                outs.push(out.flatten_all()?.to_vec1::<f32>()?);
            }
            slots += new;
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(
                bits(&outs[1]),
                bits(&outs[0]),
                "d {d}, {store:?}, {slots} slots"
            );
        }
        assert_eq!(caches[1].1.capacity() % PANEL, 0, "whole panels");
    }
    Ok(())
}

#[test]
fn keys_in_panels_that_do_not_start_on_a_panel_are_refused() -> Result<()> {
    let dev = Device::Cpu;
    let q = Tensor::zeros((1, 2, 4, 16), DType::F32, &dev)?;
    let k = Tensor::zeros((1, 1, 32, 16), DType::F32, &dev)?;
    // Four slots of the buffer from slot `first`, read as keys in panels.
    let from = |first: usize| -> Result<Tensor> {
        let kv = k.narrow(2, first, 4)?;
        attention_in(&q, (&kv, SlotOrder::Panels), &kv, &four_tokens(), None, 1.0)
    };
    let err = from(3).unwrap_err();
    assert!(err.to_string().contains("whole panels"), "{err}");
    // The same keys from the buffer's first slot are read.
    from(0)?;
    Ok(())
}
