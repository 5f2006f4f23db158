//! The next token of every row from one decode step's logits. On the CPU the sampler
//! reads them in place; on a device, greedy rows take an argmax computed there, and
//! sampled rows read back only the blocks of logits that can hold their token
//! ([`crate::candle::choice::readback`]), not the whole vocabulary.

pub use crate::candle::choice::ChoiceStats;
use crate::candle::choice::{readback, sampler};
use crate::{FinishReason, Sampling};
use candle_core::{DType, Result, Storage, Tensor};
use rayon::prelude::*;
use std::time::Instant;

/// Adds a row's new token, or says why the row is done: an end token (which is not
/// kept) or the row's cap of `max_new` tokens reached with this one.
pub(crate) fn advance(
    tokens: &mut Vec<u32>,
    token: u32,
    eos: &[u32],
    max_new: usize,
) -> Option<FinishReason> {
    if eos.contains(&token) {
        return Some(FinishReason::Stop);
    }
    tokens.push(token);
    (tokens.len() >= max_new).then_some(FinishReason::Length)
}

/// How the host reads a step's logits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reads {
    /// In place on the CPU; on a device, block reads (an argmax there when every row
    /// is greedy).
    Auto,
    /// Every row whole: in place on the CPU, one copy of all rows from a device (what
    /// `runner bench --sampler` compares block reads against).
    Whole,
    /// Block reads on any device (to test the device's way on the CPU).
    Blocks,
}

/// Chooses the next token of each row of `logits` (rows, vocab) in f32. Row `r` is drawn
/// with `rows[r]` = (sampling, uniform draw); the result is [`sampler::choose`]'s.
pub fn next_tokens(
    logits: &Tensor,
    rows: &[(Sampling, f64)],
    stats: &mut ChoiceStats,
) -> Result<Vec<u32>> {
    choose_tokens(logits, rows, Reads::Auto, stats)
}

/// [`next_tokens`], reading the logits as `reads` says.
pub fn choose_tokens(
    logits: &Tensor,
    rows: &[(Sampling, f64)],
    reads: Reads,
    stats: &mut ChoiceStats,
) -> Result<Vec<u32>> {
    let (n, vocab) = logits.dims2()?;
    if n != rows.len() {
        candle_core::bail!("{n} rows of logits for {} rows", rows.len())
    }
    stats.steps += 1;
    let on_device = !logits.device().is_cpu();
    match reads {
        Reads::Blocks => return readback::next_tokens(logits, rows, stats),
        Reads::Auto if on_device => {
            if rows.iter().all(|(s, _)| sampler::is_greedy(*s)) {
                return device_argmax(logits, stats);
            }
            return readback::next_tokens(logits, rows, stats);
        }
        Reads::Auto | Reads::Whole => {}
    }
    let t = Instant::now();
    let logits = logits.to_dtype(DType::F32)?.contiguous()?;
    let owned;
    let (storage, layout) = logits.storage_and_layout();
    let data: &[f32] = match &*storage {
        Storage::Cpu(c) => &c.as_slice::<f32>()?[layout.start_offset()..][..n * vocab],
        _ => {
            // One copy of the whole (rows, vocab) block, not one per row.
            owned = logits.flatten_all()?.to_vec1::<f32>()?;
            stats.transfers += 1;
            stats.transfer_bytes += owned.len() * 4;
            &owned
        }
    };
    stats.transfer_s += t.elapsed().as_secs_f64();
    let t = Instant::now();
    let out = data
        .par_chunks(vocab)
        .zip(rows.par_iter())
        .map(|(l, &(s, u))| sampler::choose(l, s, u))
        .collect();
    stats.sampler_s += t.elapsed().as_secs_f64();
    Ok(out)
}

/// The argmax of every row computed where the logits are: the lowest id holding the
/// row's maximum (the host's tie rule). Rows with a NaN are read back and decided on the
/// host, whose rule for them (a NaN in slot 0 wins, others lose) no reduction shares.
pub fn device_argmax(logits: &Tensor, stats: &mut ChoiceStats) -> Result<Vec<u32>> {
    let t = Instant::now();
    let (n, vocab) = logits.dims2()?;
    let dev = logits.device();
    let max = logits.max_keepdim(1)?;
    let hit = logits.broadcast_eq(&max)?;
    let ids = Tensor::arange(0u32, vocab as u32, dev)?.broadcast_as((n, vocab))?;
    let none = Tensor::new(u32::MAX, dev)?.broadcast_as((n, vocab))?;
    let first = hit.where_cond(&ids, &none)?.min_keepdim(1)?;
    let nan = logits.ne(logits)?.to_dtype(DType::U32)?.max_keepdim(1)?;
    let both: Vec<Vec<u32>> = Tensor::cat(&[&first, &nan], 1)?.to_vec2()?;
    stats.transfers += 1;
    stats.transfer_bytes += n * 8;
    let mut out = Vec::with_capacity(n);
    for (r, pair) in both.iter().enumerate() {
        if pair[1] != 0 || pair[0] as usize >= vocab {
            let row = super::host_row(logits, r)?;
            stats.transfers += 1;
            stats.transfer_bytes += vocab * 4;
            out.push(sampler::argmax(&row));
        } else {
            out.push(pair[0]);
        }
    }
    stats.transfer_s += t.elapsed().as_secs_f64();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    #[test]
    fn the_reduction_argmax_follows_the_host_rule_on_ties_infinities_and_nan() -> Result<()> {
        let vocab = 152_064;
        let mut rows: Vec<Vec<f32>> = Vec::new();
        let mut ties = vec![0.0f32; vocab];
        ties[90_000] = 3.0;
        ties[70_001] = 3.0;
        ties[150_000] = 3.0;
        rows.push(ties);
        rows.push(vec![f32::NEG_INFINITY; vocab]);
        let mut inf = vec![1.0f32; vocab];
        inf[5] = f32::INFINITY;
        inf[4] = f32::INFINITY;
        rows.push(inf);
        let mut nan0 = vec![1.0f32; vocab];
        nan0[0] = f32::NAN;
        nan0[10] = 2.0;
        rows.push(nan0);
        let mut nan = vec![1.0f32; vocab];
        nan[3] = f32::NAN;
        nan[10] = 2.0;
        rows.push(nan);
        rows.push((0..vocab).map(|i| ((i * 7919) % 1000) as f32).collect());
        let flat: Vec<f32> = rows.concat();
        let logits = Tensor::from_vec(flat, (rows.len(), vocab), &Device::Cpu)?;
        let mut stats = ChoiceStats::default();
        let got = device_argmax(&logits, &mut stats)?;
        let want: Vec<u32> = rows.iter().map(|r| sampler::argmax(r)).collect();
        assert_eq!(got, want);
        assert_eq!(want[..5], [70_001, 0, 4, 0, 10]);
        // One read of (id, NaN flag) pairs, and one row read back for each NaN row.
        assert_eq!(stats.transfers, 3);
        Ok(())
    }

    #[test]
    fn next_tokens_are_the_samplers_choice_per_row() -> Result<()> {
        let vocab = 1000;
        let flat: Vec<f32> = (0..3 * vocab)
            .map(|i| ((i * 31) % 97) as f32 / 10.0)
            .collect();
        let logits = Tensor::from_vec(flat.clone(), (3, vocab), &Device::Cpu)?;
        let rows = [
            (
                Sampling::TopP {
                    temperature: 0.2,
                    top_p: 0.9,
                },
                0.3,
            ),
            (Sampling::Greedy, 0.0),
            (
                Sampling::TopP {
                    temperature: 1.0,
                    top_p: 0.9,
                },
                0.7,
            ),
        ];
        let mut stats = ChoiceStats::default();
        let got = next_tokens(&logits, &rows, &mut stats)?;
        for (r, &(s, u)) in rows.iter().enumerate() {
            let row = &flat[r * vocab..][..vocab];
            assert_eq!(got[r], sampler::choose_reference(row, s, u), "row {r}");
        }
        assert_eq!(
            (stats.transfers, stats.steps),
            (0, 1),
            "read in place on the CPU"
        );
        Ok(())
    }
}
