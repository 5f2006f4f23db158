//! Token choice from logits, with randomness that belongs to the sample alone.
//!
//! Each draw is a pure function of (seed, request id, token position): a counter-based
//! stream rather than a stateful generator, so a sample's tokens do not depend on which
//! other sequences share its batch, on their order, or on how many steps they ran.

use crate::candle::choice::nucleus::{self, Draw};
use crate::{RequestId, Sampling};
use sha2::{Digest, Sha256};

/// The part of a sample's random stream fixed before decoding starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamKey {
    seed: u64,
    request: u64,
}

impl StreamKey {
    pub fn new(seed: u64, request: &RequestId) -> Self {
        // The id is arbitrary text; a cryptographic digest spreads it over 64 bits so
        // that near-identical ids give unrelated streams.
        let digest = Sha256::digest(request.as_str().as_bytes());
        let mut first = [0u8; 8];
        first.copy_from_slice(&digest[..8]);
        StreamKey {
            seed,
            request: u64::from_le_bytes(first),
        }
    }

    /// A uniform draw in [0, 1) for the token at `position` (0 = first new token).
    pub fn uniform(&self, position: usize) -> f64 {
        let mut x = splitmix64(self.seed ^ 0x243f_6a88_85a3_08d3);
        x = splitmix64(x ^ self.request);
        x = splitmix64(x ^ position as u64);
        // 53 random bits fill an f64 mantissa exactly.
        (x >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }
}

/// SplitMix64's finaliser: a bijective mixer with full avalanche.
fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Chooses a token from one row of logits with the uniform draw `u`. Top-p draws from a
/// candidate set ([`crate::candle::choice::nucleus`]) and falls back to the full-vocabulary reference
/// where that cannot decide; the token is [`choose_reference`]'s in every case.
pub fn choose(logits: &[f32], sampling: Sampling, u: f64) -> u32 {
    match sampling {
        Sampling::TopP { temperature, top_p } if !is_greedy(sampling) => {
            let (t, p) = (temperature as f64, top_p as f64);
            match nucleus::top_p_draw(logits, t, p, u) {
                Draw::Token(token) => token,
                Draw::Reference => reference_top_p(logits, t, p, u),
            }
        }
        _ => argmax(logits),
    }
}

/// The sampler as it was before candidate sets: every top-p draw weighs the whole
/// vocabulary. Kept as the reference that [`choose`] must match bit for bit.
pub fn choose_reference(logits: &[f32], sampling: Sampling, u: f64) -> u32 {
    match sampling {
        Sampling::Greedy => argmax(logits),
        Sampling::TopP { temperature, top_p } => {
            if temperature <= 0.0 {
                return argmax(logits);
            }
            reference_top_p(logits, temperature as f64, top_p as f64, u)
        }
    }
}

/// Whether a row's token can be chosen from its logits' maximum alone.
pub fn is_greedy(sampling: Sampling) -> bool {
    match sampling {
        Sampling::Greedy => true,
        Sampling::TopP { temperature, .. } => temperature <= 0.0,
    }
}

/// The highest logit, the lowest id among equals; a NaN in slot 0 wins, other NaNs lose.
///
/// That is [`argmax_reference`]'s scan, in two passes the compiler can vectorise (a
/// row of 262,144 logits is read at memory speed rather than one compare-and-branch at
/// a time): the greatest value that is not NaN, over 16 lanes, then the first slot
/// that equals it. The two agree on every input: the scan keeps the first slot that
/// beats every slot before it, and `==` takes -0 and +0 for one another as `>` does.
pub fn argmax(logits: &[f32]) -> u32 {
    const LANES: usize = 16;
    let Some(&first) = logits.first() else {
        return 0;
    };
    if first.is_nan() {
        return 0;
    }
    let chunks = logits.chunks_exact(LANES);
    let tail = chunks.remainder();
    let mut lanes = [first; LANES];
    for chunk in chunks {
        for (m, &l) in lanes.iter_mut().zip(chunk) {
            *m = if l > *m { l } else { *m };
        }
    }
    let max = lanes
        .into_iter()
        .chain(tail.iter().copied())
        .fold(first, |m, l| if l > m { l } else { m });
    for (c, chunk) in logits.chunks(LANES).enumerate() {
        if chunk.contains(&max) {
            let i = chunk.iter().position(|&l| l == max).unwrap_or(0);
            return (c * LANES + i) as u32;
        }
    }
    0
}

/// [`argmax`] as a plain scan: the rule it follows.
pub fn argmax_reference(logits: &[f32]) -> u32 {
    let mut best = 0usize;
    for (i, &l) in logits.iter().enumerate() {
        if l > logits[best] {
            best = i;
        }
    }
    best as u32
}

pub fn reference_top_p(logits: &[f32], temperature: f64, top_p: f64, u: f64) -> u32 {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max) as f64;
    let weights: Vec<f64> = logits
        .iter()
        .map(|&l| ((l as f64 - max) / temperature).exp())
        .collect();
    let total: f64 = weights.iter().sum();
    let target = top_p * total;

    // The nucleus is a prefix of the order (weight desc, id asc). Any threshold whose
    // candidate set already holds `target` contains that prefix, so only the candidates
    // need sorting: at low temperature that is a handful of tokens, not the vocabulary.
    let mut threshold = 1.0 / 1024.0;
    let mut candidates: Vec<u32>;
    loop {
        candidates = (0..weights.len() as u32)
            .filter(|&i| weights[i as usize] >= threshold)
            .collect();
        let mass: f64 = candidates.iter().map(|&i| weights[i as usize]).sum();
        if mass >= target || threshold == 0.0 {
            break;
        }
        threshold = if threshold < 1e-300 {
            0.0
        } else {
            threshold / 1024.0
        };
    }
    candidates.sort_by(|&a, &b| {
        weights[b as usize]
            .total_cmp(&weights[a as usize])
            .then(a.cmp(&b))
    });

    let mut kept = 0usize;
    let mut mass = 0.0;
    for &i in &candidates {
        mass += weights[i as usize];
        kept += 1;
        if mass >= target {
            break;
        }
    }
    // No token has a finite weight (every logit -inf, or NaN where the maximum is -inf):
    // there is no distribution to draw from, and the highest logit is the only answer.
    if kept == 0 {
        return argmax(logits);
    }
    let nucleus = &candidates[..kept];
    let point = u * mass;
    let mut acc = 0.0;
    for &i in nucleus {
        acc += weights[i as usize];
        if point < acc {
            return i;
        }
    }
    nucleus[kept - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_depend_only_on_seed_request_and_position() {
        let a = StreamKey::new(7, &RequestId::new("r1"));
        let b = StreamKey::new(7, &RequestId::new("r1"));
        assert_eq!(a.uniform(3), b.uniform(3));
        assert_ne!(a.uniform(3), a.uniform(4));
        assert_ne!(
            a.uniform(3),
            StreamKey::new(8, &RequestId::new("r1")).uniform(3)
        );
        assert_ne!(
            a.uniform(3),
            StreamKey::new(7, &RequestId::new("r2")).uniform(3)
        );
    }

    #[test]
    fn draws_are_roughly_uniform() {
        let key = StreamKey::new(1, &RequestId::new("uniformity"));
        let n = 20_000;
        let mut bins = [0usize; 10];
        for p in 0..n {
            let u = key.uniform(p);
            assert!((0.0..1.0).contains(&u));
            bins[(u * 10.0) as usize] += 1;
        }
        for b in bins {
            assert!((1800..2200).contains(&b), "bin count {b}");
        }
    }

    #[test]
    fn the_vectorised_argmax_picks_the_scans_slot_on_ties_zeros_infinities_and_nan() {
        // Values from a small set, so that rows are full of ties, signed zeros,
        // infinities and NaNs (first or not), at lengths around the 16 lanes.
        let set = [
            f32::NAN,
            f32::NEG_INFINITY,
            f32::INFINITY,
            -0.0,
            0.0,
            1.5,
            -2.0,
            1.5,
        ];
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for n in (0..70).chain([1000, 4097]) {
            for _ in 0..200 {
                // Each row draws from a random part of the set, so that some rows have
                // no NaN, no infinity or only zeros.
                let from = (next() % set.len() as u64) as usize;
                let row: Vec<f32> = (0..n)
                    .map(|_| set[from + (next() % (set.len() - from) as u64) as usize])
                    .collect();
                assert_eq!(argmax(&row), argmax_reference(&row), "{row:?}");
            }
        }
    }

    #[test]
    fn greedy_takes_the_highest_logit_and_the_lowest_id_on_ties() {
        assert_eq!(choose(&[0.1, 3.0, -1.0, 3.0], Sampling::Greedy, 0.99), 1);
    }

    #[test]
    fn top_p_never_leaves_the_nucleus() {
        // Probabilities at temperature 1: 0.5, 0.3, 0.15, 0.05. With top-p 0.9 the
        // nucleus is the first three tokens; the last must never be drawn.
        let logits: Vec<f32> = [0.5f64, 0.3, 0.15, 0.05]
            .iter()
            .map(|p| p.ln() as f32)
            .collect();
        let s = Sampling::TopP {
            temperature: 1.0,
            top_p: 0.9,
        };
        let mut seen = [0usize; 4];
        let key = StreamKey::new(3, &RequestId::new("nucleus"));
        for p in 0..5000 {
            seen[choose(&logits, s, key.uniform(p)) as usize] += 1;
        }
        assert_eq!(seen[3], 0);
        // Renormalised nucleus: 0.5/0.95, 0.3/0.95, 0.15/0.95.
        let f0 = seen[0] as f64 / 5000.0;
        assert!((f0 - 0.5 / 0.95).abs() < 0.03, "share of token 0: {f0}");
        assert!(seen[2] > 0);
    }

    #[test]
    fn low_temperature_concentrates_on_the_top_token() {
        let logits = [2.0f32, 1.0, 0.0];
        let key = StreamKey::new(9, &RequestId::new("cold"));
        let hits = (0..1000)
            .filter(|&p| {
                choose(
                    &logits,
                    Sampling::TopP {
                        temperature: 0.2,
                        top_p: 0.9,
                    },
                    key.uniform(p),
                ) == 0
            })
            .count();
        // At temperature 0.2 token 0 carries exp(5)/(exp(5)+1+exp(-5)) = 0.993 of the
        // mass, which alone exceeds top-p 0.9: the nucleus is token 0 only.
        assert_eq!(hits, 1000);
    }
}
