//! Attention over an f16 key/value cache (`--kv-cache f16`): the bits of attention over
//! an f32 cache holding the same rounded values, on every instruction set.

use super::tests::{
    attend_on, attend_stacked, block_spans, four_tokens, max_diff, noise, operands, Operands,
};
use super::*;
use crate::candle::cpu::isa::available_isas;
use candle_core::{DType, Device};

#[test]
fn an_f16_cache_gives_the_bits_of_an_f32_cache_holding_its_values() -> Result<()> {
    // The kernels widen each f16 key and value exactly as they load it, so the only
    // difference an f16 cache makes is the rounding of what it stores. Prefill and decode
    // steps, a sliding window, padding, and a head size the `gemm` crate's products take
    // (24: not whole vectors of 16, so the cache is widened for them).
    let dev = Device::Cpu;
    let (kv, len) = (2, 150);
    let cases = [
        (8, 64, None, vec![0, 9], 0, len),
        (4, 32, Some(40), vec![70, 0], len - 1, 1),
        (4, 256, None, vec![3, 0], len - 1, 1),
        (6, 24, None, vec![0, 5], 0, len),
        (6, 24, Some(20), vec![0, 5], len - 1, 1),
    ];
    for (heads, d, window, pad, past, new) in cases {
        let rows = pad.len();
        let t = |seed: u64, h: usize, n: usize| {
            Tensor::from_vec(noise(seed, rows * h * n * d), (rows, h, n, d), &dev)
        };
        let q = (t(1, heads, new)? * 3.0)?;
        // Cache buffers wider than the slots in use, read through views, as appended.
        let k16 = t(2, kv, len + 5)?.to_dtype(DType::F16)?;
        let v16 = t(3, kv, len + 5)?.to_dtype(DType::F16)?;
        let (k32, v32) = (k16.to_dtype(DType::F32)?, v16.to_dtype(DType::F32)?);
        let layout = StepLayout { past, new, pad };
        let view = |c: &Tensor| c.narrow(2, 0, len);
        let got = attention(&q, &view(&k16)?, &view(&v16)?, &layout, window, 0.2)?;
        let want = attention(&q, &view(&k32)?, &view(&v32)?, &layout, window, 0.2)?;
        assert_eq!(
            max_diff(&got, &want)?,
            0.0,
            "d {d} window {window:?} new {new}"
        );
        // And the rounding is all it changes: close to the f32 cache before rounding.
        let exact = attention(
            &q,
            &view(&t(2, kv, len + 5)?)?,
            &view(&t(3, kv, len + 5)?)?,
            &layout,
            window,
            0.2,
        )?;
        let diff = max_diff(&got, &exact)?;
        assert!(diff > 0.0 && diff < 2e-3, "d {d}: f16 against f32 {diff}");
    }
    Ok(())
}

#[test]
fn a_cache_of_another_dtype_is_refused() -> Result<()> {
    let dev = Device::Cpu;
    let layout = four_tokens();
    let q = Tensor::zeros((1, 2, 4, 16), DType::F32, &dev)?;
    let k = Tensor::zeros((1, 1, 4, 16), DType::BF16, &dev)?;
    let err = attention(&q, &k, &k, &layout, None, 1.0).unwrap_err();
    assert!(
        err.to_string().contains("key/value cache of BF16/BF16"),
        "{err}"
    );
    Ok(())
}

/// The fused products over f16 keys and values read in place (`Keys::Rows`), as a
/// decode step over an f16 cache runs them.
fn attend_f16_rows(
    isa: Isa,
    o: &Operands,
    d: usize,
    spans: &[(usize, usize)],
    (lo, hi): (usize, usize),
) -> (Vec<f32>, Vec<f32>) {
    let half = |v: &[f32]| {
        v.iter()
            .map(|&x| half::f16::from_f32(x))
            .collect::<Vec<_>>()
    };
    let (k, v) = (half(&o.k), half(&o.v));
    let keys = Keys::Rows {
        keys: &k,
        k_rs: o.rs,
    };
    attend_stacked(isa, (&o.q, keys, &v, o.rs), d, spans, (lo, hi))
}

#[test]
fn f16_keys_and_values_read_in_place_give_the_same_bits_on_every_instruction_set() {
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    for (n, &(d, group, m, first, q0, window)) in [
        (16, 4, 1, 0, 40, None),
        (64, 3, 1, 5, 200, Some(50)),
        (256, 4, 1, 17, 100, None),
        (32, 7, 13, 3, 60, None),
    ]
    .iter()
    .enumerate()
    {
        let spans = block_spans(first, q0, m, group, window);
        let (lo, hi) = (spans[0].0, q0 + m - 1);
        let mut o = operands(spans.len(), hi + 1, d, 40 + n as u64);
        let want = attend_f16_rows(Isa::Scalar, &o, d, &spans, (lo, hi));
        for isa in available_isas() {
            let got = attend_f16_rows(isa, &o, d, &spans, (lo, hi));
            assert_eq!(bits(&got.0), bits(&want.0), "{isa:?}, case {n}: outputs");
            assert_eq!(bits(&got.1), bits(&want.1), "{isa:?}, case {n}: sums");
        }
        // The same bits as packed f32 keys and values holding the rounded values.
        let round = |v: &mut Vec<f32>| {
            v.iter_mut()
                .for_each(|x| *x = half::f16::from_f32(*x).to_f32())
        };
        round(&mut o.k);
        round(&mut o.v);
        let packed = attend_on(Isa::Scalar, &o, d, &spans, (lo, hi));
        assert_eq!(bits(&packed.0), bits(&want.0), "case {n}: against f32");
    }
}
