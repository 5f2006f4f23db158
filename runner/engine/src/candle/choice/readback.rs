//! Token choice from logits that live on a device, reading back only the parts of each
//! row that can hold its token rather than the whole vocabulary.
//!
//! Reading every row's logits back costs rows x vocab x 4 bytes per step (263 MB at 432
//! rows of Qwen2.5's 152k vocabulary), and the host then scans all of them. Instead each
//! row is cut into blocks of [`BLOCK`] logits and the device reduces every block to its
//! maximum; from those maxima (and a NaN flag per row) the host knows which blocks can
//! hold a row's token:
//! - greedy: the first block holding the row's maximum holds the lowest id with it, the
//!   argmax's tie rule;
//! - top-p: the blocks whose maximum reaches the candidate cut ([`nucleus::cut`]); every
//!   logit elsewhere lies below the cut, so the candidate sampler sees exactly the
//!   candidates, in the same order, and the same count of tokens outside, as from the
//!   whole row ([`nucleus::draw_among`]);
//! - anything the candidate set does not decide (NaN, +inf, a row all -inf, parameters
//!   outside its range, or a draw too close to call) reads the whole row and takes the
//!   host sampler's path, so every token is [`sampler::choose`]'s bit for bit.
//!
//! That is two reads per step: the block maxima (rows x (blocks + 1) x 4 bytes, 4.6 KiB
//! a row at 152k) and one gather of the chosen blocks (512 bytes each).

use crate::candle::choice::nucleus::{self, Draw};
use crate::candle::choice::sampler;
use crate::candle::choice::ChoiceStats;
use crate::Sampling;
use candle_core::{DType, Result, Tensor};
use rayon::prelude::*;
use std::time::Instant;

/// Logits per block. A row reads back vocab / BLOCK maxima and then a block per
/// candidate at most, so about 4 x (vocab / BLOCK + candidates x BLOCK) bytes: 128
/// keeps that near its least for rows with 10 to 100 candidates (4.6 KiB of maxima
/// at 152k, and 512 bytes per block).
pub const BLOCK: usize = 128;

/// Candidates lie within this many temperatures of the top logit (5 logits at the
/// protocol's 0.2), against the host sampler's [`nucleus::CUT`] of 40: fewer candidates
/// touch fewer blocks. A token outside weighs below exp(-25) = 1.4e-11, so the rest of
/// a 262k vocabulary weighs below 3.6e-6 of the top token; a draw whose nucleus
/// boundary falls that close is undecided and reads its whole row.
pub const WITHIN: f64 = 25.0;

/// What the host reads of one row.
enum Need {
    /// Every block: the host sampler decides.
    Row,
    /// The first block holding the row's maximum.
    Argmax(usize),
    /// The blocks that can hold a candidate, in increasing order.
    Candidates {
        blocks: Vec<usize>,
        max: f32,
        temperature: f64,
        top_p: f64,
    },
}

/// The next token of each row of `logits` (rows, vocab), drawn with `rows[r]` =
/// (sampling, uniform draw), reading back block maxima and the blocks they point to.
/// The result is [`sampler::choose`]'s on each whole row.
pub fn next_tokens(
    logits: &Tensor,
    rows: &[(Sampling, f64)],
    stats: &mut ChoiceStats,
) -> Result<Vec<u32>> {
    let (n, vocab) = logits.dims2()?;
    if n != rows.len() {
        candle_core::bail!("{n} rows of logits for {} rows", rows.len())
    }
    if n == 0 {
        return Ok(Vec::new());
    }
    let t = Instant::now();
    let logits = logits.to_dtype(DType::F32)?.contiguous()?;
    let maxima = BlockMaxima::read(&logits, stats)?;
    stats.transfer_s += t.elapsed().as_secs_f64();

    let t = Instant::now();
    let needs = maxima.needs(rows);
    let ids = block_ids(&needs, maxima.per_row);
    stats.sampler_s += t.elapsed().as_secs_f64();

    let t = Instant::now();
    let picked = maxima
        .blocks
        .index_select(&Tensor::from_slice(&ids, ids.len(), logits.device())?, 0)?;
    let data: Vec<f32> = picked.flatten_all()?.to_vec1()?;
    stats.transfers += 1;
    stats.transfer_bytes += data.len() * 4;
    stats.transfer_s += t.elapsed().as_secs_f64();

    let t = Instant::now();
    let starts = block_starts(&needs, maxima.per_row);
    let mut out: Vec<Option<u32>> = needs
        .par_iter()
        .zip(rows.par_iter())
        .zip(starts.par_iter())
        .map(|((need, &(sampling, u)), &start)| draw(need, sampling, u, &data[start..], vocab))
        .collect();
    stats.sampler_s += t.elapsed().as_secs_f64();

    // Draws too close to call from the candidates: the whole row, as the host does.
    for r in 0..n {
        if out[r].is_none() {
            out[r] = Some(by_reference(&logits, r, rows[r], stats)?);
        }
    }
    Ok(out.into_iter().flatten().collect())
}

/// A step's logits cut into blocks of [`BLOCK`] (the last one of each row padded with
/// -inf), and what the host read of them: each row's block maxima, then its NaN flag.
struct BlockMaxima {
    /// (rows x blocks per row, BLOCK), on the logits' device.
    blocks: Tensor,
    per_row: usize,
    summary: Vec<f32>,
}

impl BlockMaxima {
    /// Reduces every block of `logits` (rows, vocab) in f32 to its maximum where the
    /// logits are, and reads the maxima and NaN flags back: one transfer.
    fn read(logits: &Tensor, stats: &mut ChoiceStats) -> Result<BlockMaxima> {
        let (n, vocab) = logits.dims2()?;
        let nb = vocab.div_ceil(BLOCK);
        let pad = nb * BLOCK - vocab;
        let padded = if pad == 0 {
            logits.clone()
        } else {
            let fill = Tensor::full(f32::NEG_INFINITY, (n, pad), logits.device())?;
            Tensor::cat(&[logits, &fill], 1)?
        };
        let blocks = padded.reshape((n * nb, BLOCK))?;
        let maxima = blocks.max_keepdim(1)?.reshape((n, nb))?;
        let nan = logits.ne(logits)?.to_dtype(DType::F32)?.max_keepdim(1)?;
        let summary: Vec<f32> = Tensor::cat(&[&maxima, &nan], 1)?.flatten_all()?.to_vec1()?;
        stats.transfers += 1;
        stats.transfer_bytes += summary.len() * 4;
        Ok(BlockMaxima {
            blocks,
            per_row: nb,
            summary,
        })
    }

    /// What the host reads of each row, drawn as `rows` says.
    fn needs(&self, rows: &[(Sampling, f64)]) -> Vec<Need> {
        let nb = self.per_row;
        self.summary
            .chunks(nb + 1)
            .zip(rows)
            .map(|(s, &(sampling, _))| need(&s[..nb], s[nb] != 0.0, sampling))
            .collect()
    }
}

/// The blocks (numbered across rows of `nb` blocks each) that the rows' needs read, in
/// row order.
fn block_ids(needs: &[Need], nb: usize) -> Vec<u32> {
    let mut ids: Vec<u32> = Vec::new();
    for (r, need) in needs.iter().enumerate() {
        let first = (r * nb) as u32;
        match need {
            Need::Row => ids.extend(first..first + nb as u32),
            Need::Argmax(b) => ids.push(first + *b as u32),
            Need::Candidates { blocks, .. } => ids.extend(blocks.iter().map(|&b| first + b as u32)),
        }
    }
    ids
}

/// Where each row's blocks start in the data read back: where the previous row's end.
fn block_starts(needs: &[Need], nb: usize) -> Vec<usize> {
    needs
        .iter()
        .scan(0, |at, need| {
            let start = *at;
            *at += match need {
                Need::Row => nb,
                Need::Argmax(_) => 1,
                Need::Candidates { blocks, .. } => blocks.len(),
            };
            Some(start * BLOCK)
        })
        .collect()
}

/// A row's token from the blocks `read` for its `need`; None where the candidates
/// leave the draw undecided.
fn draw(need: &Need, sampling: Sampling, u: f64, read: &[f32], vocab: usize) -> Option<u32> {
    let len = |b: usize| BLOCK.min(vocab - b * BLOCK);
    match need {
        Need::Row => Some(sampler::choose(&read[..vocab], sampling, u)),
        Need::Argmax(b) => Some((b * BLOCK) as u32 + sampler::argmax(&read[..len(*b)])),
        Need::Candidates {
            blocks,
            max,
            temperature,
            top_p,
        } => {
            let tokens = blocks.iter().enumerate().flat_map(|(k, &b)| {
                read[k * BLOCK..][..len(b)]
                    .iter()
                    .enumerate()
                    .map(move |(j, &l)| ((b * BLOCK + j) as u32, l))
            });
            match nucleus::draw_among(*max, vocab, tokens, WITHIN, *temperature, *top_p, u) {
                Draw::Token(token) => Some(token),
                Draw::Reference => None,
            }
        }
    }
}

/// Row `r`'s token from the whole row read back, by the reference sampler.
fn by_reference(
    logits: &Tensor,
    r: usize,
    (sampling, u): (Sampling, f64),
    stats: &mut ChoiceStats,
) -> Result<u32> {
    let t = Instant::now();
    let row = super::host_row(logits, r)?;
    stats.transfers += 1;
    stats.transfer_bytes += row.len() * 4;
    stats.transfer_s += t.elapsed().as_secs_f64();
    let t = Instant::now();
    let token = sampler::choose_reference(&row, sampling, u);
    stats.sampler_s += t.elapsed().as_secs_f64();
    Ok(token)
}

/// What to read of a row with block `maxima` and a NaN flag.
fn need(maxima: &[f32], nan: bool, sampling: Sampling) -> Need {
    let max = maxima.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    if nan || max == f32::INFINITY || max == f32::NEG_INFINITY {
        return Need::Row;
    }
    if sampler::is_greedy(sampling) {
        return match maxima.iter().position(|&m| m == max) {
            Some(b) => Need::Argmax(b),
            None => Need::Row,
        };
    }
    let Sampling::TopP { temperature, top_p } = sampling else {
        return Need::Row;
    };
    let (t, p) = (temperature as f64, top_p as f64);
    if !nucleus::valid(t, p) {
        return Need::Row;
    }
    let cut = nucleus::cut(max, t, WITHIN);
    let blocks: Vec<usize> = (0..maxima.len())
        .filter(|&b| maxima[b] as f64 >= cut)
        .collect();
    // A flat row: the candidates are most of it, so read it whole.
    if blocks.len() * 2 > maxima.len() {
        return Need::Row;
    }
    Need::Candidates {
        blocks,
        max,
        temperature: t,
        top_p: p,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::candle::bench::synthetic_logits;
    use candle_core::Device;

    /// Qwen2.5's vocabulary: 1,188 blocks (other lengths, padded ones among them, are
    /// in `vocabularies_of_any_length_are_read_whole`).
    const VOCAB: usize = 152_064;

    const SETTINGS: [Sampling; 6] = [
        Sampling::TopP {
            temperature: 0.2,
            top_p: 0.9,
        },
        Sampling::Greedy,
        Sampling::TopP {
            temperature: 1.0,
            top_p: 0.9,
        },
        Sampling::TopP {
            temperature: 0.7,
            top_p: 0.5,
        },
        Sampling::TopP {
            temperature: 0.05,
            top_p: 1.0,
        },
        Sampling::TopP {
            temperature: 0.0,
            top_p: 0.9,
        },
    ];

    /// Chooses every row with every setting through the block reads and asserts each
    /// token is the host sampler's on the whole row and the reference's; returns the
    /// bytes read back.
    fn assert_same(rows: &[Vec<f32>], what: &str) -> ChoiceStats {
        let vocab = rows[0].len();
        let flat: Vec<f32> = rows.concat();
        let logits = Tensor::from_vec(flat, (rows.len(), vocab), &Device::Cpu).unwrap();
        let mut stats = ChoiceStats::default();
        for (k, &sampling) in SETTINGS.iter().enumerate() {
            let draws: Vec<(Sampling, f64)> = (0..rows.len())
                .map(|r| (sampling, ((r * 7 + k * 3) % 10) as f64 / 10.0 + 0.05))
                .collect();
            let got = next_tokens(&logits, &draws, &mut stats).unwrap();
            for (r, (&(s, u), row)) in draws.iter().zip(rows).enumerate() {
                let want = sampler::choose(row, s, u);
                assert_eq!(got[r], want, "{what}: row {r}, {s:?}, u {u}");
                assert_eq!(want, sampler::choose_reference(row, s, u), "{what}");
                assert_blocks_hold_every_candidate(row, s, what);
            }
        }
        stats
    }

    /// The blocks a row reads hold every token of the candidate window: a token left out
    /// would be bounded as weighing at most exp(-WITHIN), which a token inside exceeds.
    fn assert_blocks_hold_every_candidate(row: &[f32], sampling: Sampling, what: &str) {
        let maxima: Vec<f32> = row
            .chunks(BLOCK)
            .map(|b| b.iter().copied().fold(f32::NEG_INFINITY, f32::max))
            .collect();
        let nan = row.iter().any(|l| l.is_nan());
        if let Need::Candidates {
            blocks,
            max,
            temperature,
            ..
        } = need(&maxima, nan, sampling)
        {
            let cut = nucleus::cut(max, temperature, WITHIN);
            for (i, &l) in row.iter().enumerate() {
                if l as f64 >= cut {
                    assert!(blocks.contains(&(i / BLOCK)), "{what}: token {i} not read");
                }
            }
        }
    }

    fn lm_rows(rows: usize, vocab: usize, seed: u64) -> Vec<Vec<f32>> {
        synthetic_logits(rows, vocab, seed)
            .chunks(vocab)
            .map(<[f32]>::to_vec)
            .collect()
    }

    #[test]
    fn peaked_rows_give_the_host_samplers_tokens_from_a_few_blocks() {
        let rows = lm_rows(16, VOCAB, 1);
        assert_same(&rows, "lm-like rows");
        // At the protocol's settings: the maxima, then a few blocks per row, not the rows.
        let flat: Vec<f32> = rows.concat();
        let logits = Tensor::from_vec(flat, (rows.len(), VOCAB), &Device::Cpu).unwrap();
        let draws: Vec<(Sampling, f64)> = (0..rows.len())
            .map(|r| {
                (
                    Sampling::TopP {
                        temperature: 0.2,
                        top_p: 0.9,
                    },
                    r as f64 / 16.0,
                )
            })
            .collect();
        let mut stats = ChoiceStats::default();
        let got = next_tokens(&logits, &draws, &mut stats).unwrap();
        for (r, &(s, u)) in draws.iter().enumerate() {
            assert_eq!(got[r], sampler::choose(&rows[r], s, u), "row {r}");
        }
        let maxima = rows.len() * (VOCAB.div_ceil(BLOCK) + 1) * 4;
        let whole = rows.len() * VOCAB * 4;
        assert_eq!(stats.transfers, 2, "the maxima and one gather");
        assert!(stats.transfer_bytes > maxima);
        assert!(
            stats.transfer_bytes * 20 < whole,
            "{} bytes read back against {whole} for whole rows",
            stats.transfer_bytes
        );
    }

    #[test]
    fn adversarial_rows_give_the_host_samplers_tokens() {
        let base = lm_rows(1, VOCAB, 2).remove(0);
        let top = base.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let mut cases: Vec<(&str, Vec<f32>)> = Vec::new();
        // Ties at the maximum in several blocks and twice in one block; the maximum in
        // the last block.
        let mut ties = base.clone();
        for i in [5 * BLOCK + 3, 2 * BLOCK + 100, 2 * BLOCK + 99, 1100 * BLOCK] {
            ties[i] = 30.0;
        }
        cases.push(("ties across blocks", ties));
        let mut tail = base.clone();
        tail[VOCAB - 1] = 40.0;
        tail[VOCAB - 2] = 39.9;
        cases.push(("the top in the last block", tail));
        // A block whose maximum sits exactly on the cut of T 0.2, one just above and
        // one just below: the first two must be read, the last must not matter.
        let mut edge = base.clone();
        let cut = nucleus::cut(top, 0.2, WITHIN) as f32;
        for (k, b) in [10usize, 20, 30].into_iter().enumerate() {
            for j in 0..BLOCK {
                edge[b * BLOCK + j] = edge[b * BLOCK + j].min(cut - 1.0);
            }
            edge[b * BLOCK + 7] = match k {
                0 => cut,
                1 => f32::from_bits(cut.to_bits() - 1),
                _ => f32::from_bits(cut.to_bits() + 1),
            };
        }
        cases.push(("block maxima on the candidate cut", edge));
        let mut many = vec![0.0f32; VOCAB];
        for i in (0..VOCAB).step_by(701) {
            many[i] = 9.0;
        }
        cases.push(("candidates in a fifth of the blocks", many));
        let mut most = vec![0.0f32; VOCAB];
        for i in (0..VOCAB).step_by(101) {
            most[i] = 9.0;
        }
        cases.push(("candidates in most blocks", most));
        cases.push(("flat", vec![0.5; VOCAB]));
        let mut two = vec![0.0f32; VOCAB];
        two[7] = 30.0;
        two[BLOCK + 9] = 30.0;
        cases.push(("two equal tokens: top-p 0.5 on the boundary", two));
        let mut nan0 = base.clone();
        nan0[0] = f32::NAN;
        cases.push(("NaN in slot 0", nan0));
        let mut nan = base.clone();
        nan[VOCAB / 3] = f32::NAN;
        cases.push(("one NaN", nan));
        let mut inf = base.clone();
        inf[17] = f32::INFINITY;
        cases.push(("+inf", inf));
        let mut neg = vec![f32::NEG_INFINITY; VOCAB];
        neg[3 * BLOCK] = 1.0;
        neg[VOCAB - 1] = 0.5;
        cases.push(("-inf but two", neg));
        cases.push(("all -inf", vec![f32::NEG_INFINITY; VOCAB]));
        let mut zeros = vec![-1.0f32; VOCAB];
        zeros[BLOCK + 4] = -0.0;
        zeros[4] = 0.0;
        cases.push(("signed zeros at the top", zeros));
        for (what, row) in &cases {
            assert_same(std::slice::from_ref(row), what);
        }
        // All together in one batch, as a step would hold them.
        let rows: Vec<Vec<f32>> = cases.into_iter().map(|(_, r)| r).collect();
        assert_same(&rows, "every case in one batch");
    }

    #[test]
    fn vocabularies_of_any_length_are_read_whole() {
        for vocab in [
            1,
            7,
            BLOCK - 1,
            BLOCK,
            BLOCK + 1,
            3 * BLOCK,
            128_256,
            262_208,
        ] {
            let rows = lm_rows(3, vocab, vocab as u64);
            assert_same(&rows, &format!("vocab {vocab}"));
        }
    }

    #[test]
    fn mixed_samplings_in_one_step_give_each_rows_token() {
        let rows = lm_rows(6, VOCAB, 3);
        let flat: Vec<f32> = rows.concat();
        let logits = Tensor::from_vec(flat, (6, VOCAB), &Device::Cpu).unwrap();
        let draws: Vec<(Sampling, f64)> = (0..6).map(|r| (SETTINGS[r], 0.37)).collect();
        let mut stats = ChoiceStats::default();
        let got = next_tokens(&logits, &draws, &mut stats).unwrap();
        for (r, &(s, u)) in draws.iter().enumerate() {
            assert_eq!(got[r], sampler::choose(&rows[r], s, u), "row {r}, {s:?}");
        }
        assert!(next_tokens(&logits, &draws[..5], &mut stats).is_err());
        let none = Tensor::zeros((0, VOCAB), candle_core::DType::F32, &Device::Cpu).unwrap();
        assert_eq!(
            next_tokens(&none, &[], &mut stats).unwrap(),
            Vec::<u32>::new()
        );
    }
}
