use super::*;
use crate::candle::cpu::isa::available_isas;
use candle_core::{DType, Device};

#[test]
fn query_blocks_divide_the_prefill_chunk_alignment() {
    // Chunked prefill is bit-identical to whole prefill only if every chunk ends on
    // a block boundary.
    let align = crate::candle::runtime::scheduler::PREFILL_ALIGN;
    for group in 1..=64 {
        let b = block_len(group);
        assert!(
            b >= 1 && align.is_multiple_of(b),
            "group {group}: block {b}"
        );
    }
    assert_eq!(
        block_len(7),
        16,
        "Qwen2.5-7B: 28 query heads on 4 key heads"
    );
}

/// Reference: dense scores, the layout's additive mask, softmax, all with candle.
fn reference(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    layout: &StepLayout,
    window: Option<usize>,
    scale: f64,
) -> Result<Tensor> {
    let (rows, heads, new, d) = q.dims4()?;
    let (_, kv, slots, _) = k.dims4()?;
    let group = heads / kv;
    let k = k
        .unsqueeze(2)?
        .expand((rows, kv, group, slots, d))?
        .reshape((rows, heads, slots, d))?;
    let v = v
        .unsqueeze(2)?
        .expand((rows, kv, group, slots, d))?
        .reshape((rows, heads, slots, d))?;
    let mask = Tensor::from_vec(layout.mask(window), (rows, 1, new, slots), q.device())?;
    let scores = (q.matmul(&k.t()?)? * scale)?.broadcast_add(&mask)?;
    let probs = candle_nn::ops::softmax_last_dim(&scores)?;
    probs
        .matmul(&v)?
        .transpose(1, 2)?
        .reshape((rows, new, heads * d))
}

pub(super) fn max_diff(a: &Tensor, b: &Tensor) -> Result<f32> {
    (a - b)?
        .abs()?
        .flatten_all()?
        .max(0)?
        .to_dtype(DType::F32)?
        .to_scalar::<f32>()
}

#[test]
fn fused_attention_matches_masked_dense_attention() -> Result<()> {
    let dev = Device::Cpu;
    // (past, new, pads, window): a prefill longer than a block with padding, a
    // continued prefill, a decode step, and sliding windows.
    let cases: [(usize, usize, Vec<usize>, Option<usize>); 5] = [
        (0, 150, vec![0, 37, 149], None),
        (0, 150, vec![0, 70], Some(20)),
        (40, 90, vec![0, 100], None),
        (129, 1, vec![0, 5, 129], None),
        (129, 1, vec![0, 100], Some(16)),
    ];
    // (heads, key heads, d): one vector per head; Gemma 3's decode shape, whose
    // groups of 4 take the value product 4 vectors wide; and 5 vectors, which leave a
    // narrower remainder.
    let shapes = [(6, 2, 16), (4, 1, 256), (8, 2, 80)];
    for ((past, new, pad, window), (heads, kv, d)) in cases
        .into_iter()
        .flat_map(|c| shapes.map(|s| (c.clone(), s)))
    {
        let rows = pad.len();
        let slots = past + new;
        let q = Tensor::randn(0f32, 1.0, (rows, heads, new, d), &dev)?;
        // Keys and values as views into a wider cache buffer, as the engine has them.
        let kbuf = Tensor::randn(0f32, 1.0, (rows, kv, slots + 7, d), &dev)?;
        let vbuf = Tensor::randn(0f32, 1.0, (rows, kv, slots + 7, d), &dev)?;
        let (k, v) = (kbuf.narrow(2, 0, slots)?, vbuf.narrow(2, 0, slots)?);
        let layout = StepLayout { past, new, pad };
        let got = attention(&q, &k, &v, &layout, window, 0.25)?;
        let want = reference(&q, &k, &v, &layout, window, 0.25)?;
        let diff = max_diff(&got, &want)?;
        assert!(
            diff < 1e-5,
            "past {past} new {new} window {window:?} heads {heads}/{kv} d {d}: {diff}"
        );
    }
    Ok(())
}

/// The layout of one unpadded prompt's first four tokens.
pub(super) fn four_tokens() -> StepLayout {
    StepLayout {
        past: 0,
        new: 4,
        pad: vec![0],
    }
}

#[test]
fn shapes_that_do_not_fit_are_refused_before_any_read() -> Result<()> {
    let dev = Device::Cpu;
    let layout = four_tokens();
    let q = Tensor::zeros((1, 4, 4, 8), DType::F32, &dev)?;
    let k = Tensor::zeros((1, 2, 4, 8), DType::F32, &dev)?;
    let short_v = Tensor::zeros((1, 2, 3, 8), DType::F32, &dev)?;
    let odd_k = Tensor::zeros((1, 3, 4, 8), DType::F32, &dev)?;
    for (k, v) in [(&k, &short_v), (&odd_k, &odd_k)] {
        let err = attention(&q, k, v, &layout, None, 1.0).unwrap_err();
        assert!(err.to_string().contains("shapes do not fit"), "{err}");
    }
    Ok(())
}

#[test]
fn a_rows_result_does_not_depend_on_the_padding_its_batch_gives_it() -> Result<()> {
    let dev = Device::Cpu;
    let (heads, kv, d, len) = (4, 2, 16, 140);
    let q = Tensor::randn(0f32, 1.0, (1, heads, len, d), &dev)?;
    let k = Tensor::randn(0f32, 1.0, (1, kv, len, d), &dev)?;
    let v = Tensor::randn(0f32, 1.0, (1, kv, len, d), &dev)?;
    let alone = StepLayout {
        past: 0,
        new: len,
        pad: vec![0],
    };
    let want = attention(&q, &k, &v, &alone, None, 0.25)?;
    for extra in [1, 5, 63, 64, 100] {
        let padded = |t: &Tensor| -> Result<Tensor> {
            let z = Tensor::zeros((1, t.dim(1)?, extra, d), DType::F32, &dev)?;
            Tensor::cat(&[&z, t], 2)
        };
        let layout = StepLayout {
            past: 0,
            new: len + extra,
            pad: vec![extra],
        };
        let got = attention(
            &padded(&q)?,
            &padded(&k)?,
            &padded(&v)?,
            &layout,
            None,
            0.25,
        )?;
        let got = got.narrow(1, extra, len)?;
        assert_eq!(max_diff(&got, &want)?, 0.0, "padding {extra}");
    }
    Ok(())
}

/// Small deterministic pseudo-random numbers in [-1, 1).
pub(super) fn noise(seed: u64, len: usize) -> Vec<f32> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        })
        .collect()
}

/// Inputs of the fused products: `rows` stacked queries, and keys and values of
/// `slots` slots (rows `rs` floats apart, the head's vector first).
pub(super) struct Operands {
    pub q: Vec<f32>,
    pub k: Vec<f32>,
    pub v: Vec<f32>,
    pub rs: usize,
}

pub(super) fn operands(rows: usize, slots: usize, d: usize, seed: u64) -> Operands {
    let rs = d + 3;
    Operands {
        q: noise(seed, rows * d).iter().map(|x| 3.0 * x).collect(),
        k: noise(seed + 1, slots * rs),
        v: noise(seed + 2, slots * rs),
        rs,
    }
}

/// Packs the keys of `lo..=hi` and runs the fused products on `isa`: the unnormalised
/// outputs and the sums.
pub(super) fn attend_on(
    isa: Isa,
    o: &Operands,
    d: usize,
    spans: &[(usize, usize)],
    (lo, hi): (usize, usize),
) -> (Vec<f32>, Vec<f32>) {
    let mut keys = vec![f32::NAN; 7];
    products::pack_keys(isa, &mut keys, &o.k, o.rs, d, (lo, hi));
    attend_stacked(
        isa,
        (&o.q, Keys::Packed(&keys), &o.v, o.rs),
        d,
        spans,
        (lo, hi),
    )
}

/// The fused products on `isa` over keys read as `keys` says and values `v_rs` apart,
/// one query of `q` per span: the unnormalised outputs and the sums.
pub(super) fn attend_stacked<E: CacheElem>(
    isa: Isa,
    (q, keys, values, v_rs): (&[f32], Keys<E>, &[E], usize),
    d: usize,
    spans: &[(usize, usize)],
    (lo, hi): (usize, usize),
) -> (Vec<f32>, Vec<f32>) {
    let stacked = Stacked {
        queries: &q[..spans.len() * d],
        keys,
        values,
        v_rs,
        d,
        scale: 0.3,
        spans,
        lo,
        hi,
    };
    let (mut out, mut sums) = (vec![0f32; spans.len() * d], vec![0f32; spans.len()]);
    products::attend(isa, &stacked, &mut Vec::new(), &mut out, &mut sums);
    (out, sums)
}

/// Stacked rows as a prefill block has them: `group` heads per query, causal spans
/// from `first`, or sliding windows of `window` slots.
pub(super) fn block_spans(
    first: usize,
    q0: usize,
    m: usize,
    group: usize,
    window: Option<usize>,
) -> Vec<(usize, usize)> {
    (0..m * group)
        .map(|r| {
            let q = q0 + r / group;
            let a = window.map_or(first, |w| (q + 1).saturating_sub(w).max(first));
            (a, q)
        })
        .collect()
}

#[test]
fn fused_products_give_the_same_bits_on_every_instruction_set() {
    let isas = available_isas();
    eprintln!("instruction sets: {isas:?}");
    // (d, group, queries, first slot, first query, window): head sizes of one to eight
    // vectors (odd counts leave a single-vector remainder), row counts that leave
    // partial tiles, spans that start inside a panel, and sliding windows.
    let cases = [
        (16, 1, 37, 0, 0, None),
        (32, 4, 32, 5, 40, None),
        (48, 7, 16, 17, 17, None),
        (64, 2, 29, 3, 200, Some(50)),
        (128, 4, 8, 0, 120, None),
        (32, 1, 13, 30, 31, Some(1)),
    ];
    for (n, &(d, group, m, first, q0, window)) in cases.iter().enumerate() {
        let spans = block_spans(first, q0, m, group, window);
        let (lo, hi) = (spans[0].0, q0 + m - 1);
        let o = operands(spans.len(), hi + 1, d, 10 + n as u64);
        let want = attend_on(Isa::Scalar, &o, d, &spans, (lo, hi));
        for &isa in &isas[1..] {
            let got = attend_on(isa, &o, d, &spans, (lo, hi));
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got.0), bits(&want.0), "{isa:?}, case {n}: outputs");
            assert_eq!(bits(&got.1), bits(&want.1), "{isa:?}, case {n}: sums");
        }
    }
}

#[test]
fn packed_keys_are_the_same_on_every_instruction_set() {
    let isas = available_isas();
    for (d, lo, hi) in [
        (16, 0, 15),
        (32, 5, 100),
        (64, 17, 47),
        (48, 33, 33),
        (128, 3, 70),
    ] {
        let o = operands(1, hi + 1, d, d as u64);
        let mut want = Vec::new();
        products::pack_keys(Isa::Scalar, &mut want, &o.k, o.rs, d, (lo, hi));
        assert_eq!(want.len(), (hi / PANEL - lo / PANEL + 1) * PANEL * d);
        for s in lo..=hi {
            let (p, lane) = (s / PANEL - lo / PANEL, s % PANEL);
            for c in 0..d {
                let got = want[(p * d + c) * PANEL + lane];
                assert_eq!(
                    got.to_bits(),
                    o.k[s * o.rs + c].to_bits(),
                    "slot {s} col {c}"
                );
            }
        }
        for &isa in &isas[1..] {
            let mut got = vec![f32::NAN; 3];
            products::pack_keys(isa, &mut got, &o.k, o.rs, d, (lo, hi));
            let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&got), bits(&want), "{isa:?}: d {d}, slots {lo}..={hi}");
        }
    }
}

#[test]
fn fused_products_match_a_plain_softmax_in_f64() {
    let (d, group, m, first, q0) = (32, 4, 24, 9, 70);
    for window in [None, Some(20)] {
        let spans = block_spans(first, q0, m, group, window);
        let (lo, hi) = (spans[0].0, q0 + m - 1);
        let o = operands(spans.len(), hi + 1, d, 3);
        for isa in available_isas() {
            let (out, sums) = attend_on(isa, &o, d, &spans, (lo, hi));
            for (r, &(a, z)) in spans.iter().enumerate() {
                let q = &o.q[r * d..][..d];
                let scores: Vec<f64> = (a..=z)
                    .map(|s| {
                        (0..d)
                            .map(|c| q[c] as f64 * o.k[s * o.rs + c] as f64)
                            .sum::<f64>()
                            * 0.3
                    })
                    .collect();
                let max = scores.iter().copied().fold(f64::MIN, f64::max);
                let e: Vec<f64> = scores.iter().map(|x| (x - max).exp()).collect();
                let sum: f64 = e.iter().sum();
                assert!(
                    (sums[r] as f64 - sum).abs() < 1e-5 * sum,
                    "{isa:?} row {r}: sum"
                );
                for c in 0..d {
                    let want: f64 = (a..=z)
                        .zip(&e)
                        .map(|(s, p)| p * o.v[s * o.rs + c] as f64)
                        .sum::<f64>()
                        / sum;
                    let got = out[r * d + c] as f64 / sums[r] as f64;
                    assert!(
                        (got - want).abs() < 1e-5,
                        "{isa:?} row {r} col {c}: {got} vs {want}"
                    );
                }
            }
        }
    }
}

#[test]
fn a_rows_fused_products_do_not_depend_on_the_rows_that_share_its_tile() {
    // Row 5 of a block shares its tiles with rows that see more keys (zeros in its
    // probabilities) and fewer; alone, its chains stop at its own span. The bits agree
    // once -0 is made +0, as the output's normalisation does.
    let (d, group, m, first, q0) = (32, 4, 12, 3, 40);
    let spans = block_spans(first, q0, m, group, None);
    let o = operands(spans.len(), q0 + m, d, 7);
    for isa in available_isas() {
        let (out, sums) = attend_on(isa, &o, d, &spans, (first, q0 + m - 1));
        for r in [0, 5, 23, spans.len() - 1] {
            let alone = Operands {
                q: o.q[r * d..][..d].to_vec(),
                k: o.k.clone(),
                v: o.v.clone(),
                rs: o.rs,
            };
            let (a, z) = spans[r];
            let (one, sum) = attend_on(isa, &alone, d, &[(a, z)], (a, z));
            assert_eq!(sum[0].to_bits(), sums[r].to_bits(), "{isa:?} row {r}: sum");
            for c in 0..d {
                let (x, y) = (one[c] + 0.0, out[r * d + c] + 0.0);
                assert_eq!(x.to_bits(), y.to_bits(), "{isa:?} row {r} col {c}");
            }
        }
    }
}

#[test]
fn a_row_gets_the_same_bits_alone_as_among_other_rows_with_padding_and_chunks() -> Result<()> {
    let dev = Device::Cpu;
    let (kv, len) = (2, 300);
    // d = 16 and 32 run the fused products; d = 20 the gemm crate's.
    for (heads, d, window) in [
        (8, 32, None),
        (8, 32, Some(70)),
        (4, 16, None),
        (8, 20, None),
    ] {
        let t = |seed: u64, h: usize, s: usize| {
            Tensor::from_vec(noise(seed, h * s * d), (1, h, s, d), &dev)
        };
        let (q, k, v) = (t(1, heads, len)?, t(2, kv, len)?, t(3, kv, len)?);
        let alone = StepLayout {
            past: 0,
            new: len,
            pad: vec![0],
        };
        let want = attention(&q, &k, &v, &alone, window, 0.2)?;
        // Three rows: ours second with 45 slots of padding, the others longer and
        // shorter prompts of their own.
        let extra = 45;
        let total = len + extra;
        let pad_rows = |x: &Tensor, seed: u64| -> Result<Tensor> {
            let h = x.dim(1)?;
            let ours = Tensor::cat(&[&t(seed, h, extra)?, x], 2)?;
            Tensor::cat(
                &[&t(seed + 10, h, total)?, &ours, &t(seed + 20, h, total)?],
                0,
            )
        };
        let (qb, kb, vb) = (pad_rows(&q, 4)?, pad_rows(&k, 5)?, pad_rows(&v, 6)?);
        let layout = StepLayout {
            past: 0,
            new: total,
            pad: vec![0, extra, 200],
        };
        let got = attention(&qb, &kb, &vb, &layout, window, 0.2)?;
        let got = got.narrow(0, 1, 1)?.narrow(1, extra, len)?;
        assert_eq!(
            max_diff(&got, &want)?,
            0.0,
            "d {d} window {window:?}: batched"
        );
        // The same batch prefilled in two chunks: the first ending on a block boundary
        // of our row (128 real tokens), as the scheduler cuts them; with the fused
        // products, whose bits do not depend on the blocks, also anywhere else.
        let chunks: &[usize] = if d != 20 {
            &[extra + 128, 100]
        } else {
            &[extra + 128]
        };
        for &chunk in chunks {
            let first = StepLayout {
                past: 0,
                new: chunk,
                pad: layout.pad.clone(),
            };
            let second = StepLayout {
                past: chunk,
                new: total - chunk,
                pad: layout.pad.clone(),
            };
            let part = |x: &Tensor, n: usize| x.narrow(2, 0, n);
            let head = attention(
                &part(&qb, chunk)?,
                &part(&kb, chunk)?,
                &part(&vb, chunk)?,
                &first,
                window,
                0.2,
            )?;
            let rest = qb.narrow(2, chunk, total - chunk)?;
            let tail = attention(&rest, &kb, &vb, &second, window, 0.2)?;
            let chunked = Tensor::cat(&[&head, &tail], 1)?;
            let chunked = chunked.narrow(0, 1, 1)?.narrow(1, extra, len)?;
            let diff = max_diff(&chunked, &want)?;
            assert_eq!(diff, 0.0, "d {d} window {window:?}: chunks at {chunk}");
        }
    }
    Ok(())
}

#[test]
fn a_token_decoded_gets_the_bits_its_prefill_gives_it() -> Result<()> {
    // The scheduler may prefill a prompt in chunks whose last one is a single token,
    // which runs as a decode step: it must match the whole prefill.
    let dev = Device::Cpu;
    let (kv, len) = (2, 200);
    for (heads, d, window, pad) in [(8, 32, None, vec![0, 9]), (4, 16, Some(33), vec![70, 0])] {
        let rows = pad.len();
        let t = |seed: u64, h: usize| {
            Tensor::from_vec(noise(seed, rows * h * len * d), (rows, h, len, d), &dev)
        };
        let (q, k, v) = (t(1, heads)?, t(2, kv)?, t(3, kv)?);
        let whole = StepLayout {
            past: 0,
            new: len,
            pad: pad.clone(),
        };
        let want = attention(&q, &k, &v, &whole, window, 0.2)?.narrow(1, len - 1, 1)?;
        let last = StepLayout {
            past: len - 1,
            new: 1,
            pad,
        };
        let got = attention(&q.narrow(2, len - 1, 1)?, &k, &v, &last, window, 0.2)?;
        assert_eq!(max_diff(&got, &want)?, 0.0, "d {d} window {window:?}");
    }
    Ok(())
}
