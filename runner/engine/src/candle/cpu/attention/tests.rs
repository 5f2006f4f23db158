use super::*;
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

fn max_diff(a: &Tensor, b: &Tensor) -> Result<f32> {
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
    for (past, new, pad, window) in cases {
        let (rows, heads, kv, d) = (pad.len(), 6, 2, 16);
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
            "past {past} new {new} window {window:?}: {diff}"
        );
    }
    Ok(())
}

#[test]
fn shapes_that_do_not_fit_are_refused_before_any_read() -> Result<()> {
    let dev = Device::Cpu;
    let layout = StepLayout {
        past: 0,
        new: 4,
        pad: vec![0],
    };
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
