//! The fused passes behind `layers`' projections, norms and activations: each reads a
//! contiguous f32 tensor straight from its storage and writes a new one, in parallel.

use crate::candle::cpu::vectorised::{self, GatedAct};
use candle_core::{Result, Tensor};
use rayon::prelude::*;

/// The f32 data of a contiguous CPU tensor.
pub fn cpu_f32<'a>(
    storage: &'a candle_core::Storage,
    layout: &candle_core::Layout,
    len: usize,
) -> Result<&'a [f32]> {
    match storage {
        candle_core::Storage::Cpu(c) => Ok(&c.as_slice::<f32>()?[layout.start_offset()..][..len]),
        _ => candle_core::bail!("expected a tensor on the CPU"),
    }
}

/// The stacked projection `y` (rows * new, (heads + 2 * kv_heads) * d), without its
/// bias, split into q (rows, heads, new, d), k and v (rows, kv_heads, new, d), with the
/// bias added and q and k rotated by the step's tables (half-split layout), in one
/// parallel pass; candle would take a single-threaded copy per part and a rope pass.
pub fn split_rotate(
    y: &Tensor,
    bias: Option<&Tensor>,
    (rows, new): (usize, usize),
    (h, kv, d): (usize, usize, usize),
    cos: &Tensor,
    sin: &Tensor,
) -> Result<(Tensor, Tensor, Tensor)> {
    let half = d / 2;
    let bias = match bias {
        Some(b) => b.to_vec1::<f32>()?,
        None => vec![0.0; (h + 2 * kv) * d],
    };
    let y = y.contiguous()?;
    let (cos, sin) = (cos.contiguous()?, sin.contiguous()?);
    let (ys, cs, ss) = (
        y.storage_and_layout(),
        cos.storage_and_layout(),
        sin.storage_and_layout(),
    );
    let y_data = cpu_f32(&ys.0, ys.1, y.elem_count())?;
    let cos_data = cpu_f32(&cs.0, cs.1, rows * new * half)?;
    let sin_data = cpu_f32(&ss.0, ss.1, rows * new * half)?;
    let all = h + 2 * kv;
    let mut q = vec![0f32; rows * h * new * d];
    let mut k = vec![0f32; rows * kv * new * d];
    let mut v = vec![0f32; rows * kv * new * d];
    // One task per (row, head): head `j` of the stacked output (q heads, then k,
    // then v) of every token of row `b`, into its contiguous (new, d) block.
    let mut tasks: Vec<(usize, usize, &mut [f32])> = Vec::with_capacity(rows * all);
    let mut parts = [
        (0, h, q.as_mut_slice()),
        (h, kv, k.as_mut_slice()),
        (h + kv, kv, v.as_mut_slice()),
    ];
    for (first, count, buf) in parts.iter_mut() {
        for (t, block) in buf.chunks_mut(new * d).enumerate() {
            tasks.push((t / *count, *first + t % *count, block));
        }
    }
    let head = |(b, j, out): (usize, usize, &mut [f32])| {
        let bias = &bias[j * d..][..d];
        for i in 0..new {
            let t = b * new + i;
            let src = &y_data[(t * all + j) * d..][..d];
            let dst = &mut out[i * d..][..d];
            if j >= h + kv {
                for ((o, x), b) in dst.iter_mut().zip(src).zip(bias) {
                    *o = x + b;
                }
                continue;
            }
            let c = &cos_data[t * half..][..half];
            let s = &sin_data[t * half..][..half];
            let (o1, o2) = dst.split_at_mut(half);
            for m in 0..half {
                let x1 = src[m] + bias[m];
                let x2 = src[half + m] + bias[half + m];
                o1[m] = x1 * c[m] - x2 * s[m];
                o2[m] = x1 * s[m] + x2 * c[m];
            }
        }
    };
    // A decode step's few values are not worth waking the other threads for.
    if rows * new * all * d < 1 << 15 {
        tasks.into_iter().for_each(head);
    } else {
        tasks.into_par_iter().for_each(head);
    }
    drop((ys, cs, ss));
    let dev = y.device();
    Ok((
        Tensor::from_vec(q, (rows, h, new, d), dev)?,
        Tensor::from_vec(k, (rows, kv, new, d), dev)?,
        Tensor::from_vec(v, (rows, kv, new, d), dev)?,
    ))
}

/// `x / sqrt(mean(x^2) + eps) * weight` over the last dimension in one vectorised pass.
pub fn rms_norm(x: &Tensor, weight: &Tensor, eps: f32) -> Result<Tensor> {
    let x = x.contiguous()?;
    let dim = weight.elem_count();
    let weight = weight.contiguous()?;
    let (xs, xl) = x.storage_and_layout();
    let (ws, wl) = weight.storage_and_layout();
    let data = cpu_f32(&xs, xl, x.elem_count())?;
    let w = cpu_f32(&ws, wl, dim)?;
    let len = x.elem_count();
    // The output is not zeroed first (a pass over memory as long as the norm's own).
    let mut out = Vec::<f32>::with_capacity(len);
    // Rows per task: enough that a decode step's few rows stay on one thread.
    let per_task = dim * (4096 / dim).max(1);
    out.spare_capacity_mut()[..len]
        .par_chunks_mut(per_task)
        .zip(data.par_chunks(per_task))
        .for_each(|(o, x)| vectorised::rms_norm(x, w, eps, o));
    // SAFETY: each task wrote all of its chunk, and the chunks cover `len` floats.
    unsafe { out.set_len(len) };
    drop((xs, ws));
    Tensor::from_vec(out, x.dims(), x.device())
}

/// (.., 2 * inner) -> (.., inner): act(first half) * second half, in one pass.
pub fn gated(gate_up: &Tensor, inner: usize, act: GatedAct) -> Result<Tensor> {
    let mut dims = gate_up.dims().to_vec();
    let last = dims.len() - 1;
    dims[last] = inner;
    if gate_up.dims().last() != Some(&(2 * inner)) {
        candle_core::bail!("gated: {:?} is not rows of 2 x {inner}", gate_up.dims());
    }
    let gate_up = gate_up.contiguous()?;
    let (storage, layout) = gate_up.storage_and_layout();
    let data = cpu_f32(&storage, layout, gate_up.elem_count())?;
    let len = gate_up.elem_count() / 2;
    // The output is not zeroed first: every element is written below.
    let mut out = Vec::<f32>::with_capacity(len);
    let rows = (len / inner.max(1)).max(1);
    let per_task = (rows / (2 * rayon::current_num_threads())).max(1);
    out.spare_capacity_mut()[..len]
        .par_chunks_mut(per_task * inner)
        .zip(data.par_chunks(per_task * 2 * inner))
        .for_each(|(o, gu)| vectorised::gated(gu, inner, act, o));
    // SAFETY: the input is whole rows of 2 x inner, so each task wrote all of its
    // chunk of whole output rows, and the chunks cover `len` floats.
    unsafe { out.set_len(len) };
    drop(storage);
    Tensor::from_vec(out, dims, gate_up.device())
}
