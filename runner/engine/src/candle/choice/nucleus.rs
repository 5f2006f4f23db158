//! Top-p sampling from a small candidate set, with the same result as the full-vocabulary
//! reference ([`crate::candle::choice::sampler::reference_top_p`]) bit for bit.
//!
//! The reference computes an f64 weight `exp((l - max) / T)` for every token, sums them
//! in index order into `total`, and keeps the shortest prefix of the order (weight desc,
//! id asc) whose running sum reaches `top_p * total`; the draw then walks that prefix.
//! Only two things depend on tokens outside the nucleus: which prefix is the nucleus
//! (through `total`) and nothing else. So the sampler here
//! - takes as candidates the tokens whose logit lies within `CUT` temperatures of the
//!   maximum; every other token weighs at most `exp(-CUT)`, so the sum of all of them is
//!   bounded by their count times that;
//! - computes the weights of the candidates exactly as the reference does, and sorts them
//!   in the reference's order;
//! - brackets `top_p * total` between a lower and an upper bound (the candidates' sum,
//!   plus at most the bound of the rest, widened by the worst rounding error of a
//!   sequential f64 sum over the vocabulary) and accepts a cutoff only when the running
//!   sum before it lies below the lower bound and the running sum at it reaches the upper
//!   bound. The running sums are the reference's own (same weights, same order, same
//!   additions), so the nucleus, its mass and the draw are the reference's.
//!
//! Whenever the bracket cannot decide (a running sum within about 1e-10 of the target),
//! or the logits hold NaN or +inf, or the parameters are outside (0, 1], the caller falls
//! back to the reference. Candidates are the whole vocabulary only for a nearly flat
//! distribution; at the protocol's temperature 0.2 they are the tokens within 8 logits of
//! the top one.

/// Candidates lie within this many temperatures of the top logit; a token outside weighs
/// at most `exp(-CUT)` = 4.2e-18 (the top token weighs 1).
pub const CUT: f64 = 40.0;

/// Outcome of the candidate-set sampler.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Draw {
    /// The token the reference draws.
    Token(u32),
    /// Undecided here: run the reference.
    Reference,
}

/// Whether the candidate set can decide a draw with these parameters at all.
pub fn valid(temperature: f64, top_p: f64) -> bool {
    temperature.is_finite() && temperature > 0.0 && top_p > 0.0 && top_p <= 1.0
}

/// The lowest logit a candidate within `within` temperatures of the maximum may have:
/// tokens below it count only through a bound on their sum.
pub fn cut(max: f32, temperature: f64, within: f64) -> f64 {
    max as f64 - within * temperature
}

/// Top-p draw with `u` in [0, 1): the reference's token, or [`Draw::Reference`].
pub fn top_p_draw(logits: &[f32], temperature: f64, top_p: f64, u: f64) -> Draw {
    if !valid(temperature, top_p) {
        return Draw::Reference;
    }
    // The reference's maximum: an f32 fold with `f32::max`. NaN and +inf make its sums
    // NaN, a case left to it.
    let mut max = f32::NEG_INFINITY;
    let mut bad = false;
    for &l in logits {
        bad |= l.is_nan() || l == f32::INFINITY;
        max = max.max(l);
    }
    if bad || max == f32::NEG_INFINITY {
        return Draw::Reference;
    }
    let tokens = logits.iter().enumerate().map(|(i, &l)| (i as u32, l));
    draw_among(max, logits.len(), tokens, CUT, temperature, top_p, u)
}

/// [`top_p_draw`] for a row of `vocab` logits whose maximum `max` is finite and which
/// holds no NaN or +inf, given only `tokens`: (id, logit) pairs in increasing id order
/// that include every token whose logit reaches [`cut`] with the same `within` (others
/// are skipped). Every token is the reference's, whatever `within`; a narrower window
/// (fewer candidates) leaves a wider bound on the rest and so more draws undecided.
pub fn draw_among(
    max: f32,
    vocab: usize,
    tokens: impl Iterator<Item = (u32, f32)>,
    within: f64,
    temperature: f64,
    top_p: f64,
    u: f64,
) -> Draw {
    let cut = cut(max, temperature, within);
    let max = max as f64;
    let weight = |l: f32| ((l as f64 - max) / temperature).exp();

    // Tokens with (max - l) / T <= within, compared in f64 as the weight is computed.
    let mut cand: Vec<(f64, u32)> = tokens
        .filter(|&(_, l)| l as f64 >= cut)
        .map(|(i, l)| (weight(l), i))
        .collect();
    // Any token left out has (l - max) / T < -within up to one rounding of the subtraction
    // and one of the division, so its weight is below `outside` (exp is faithful to
    // within an ulp; the factor covers all three roundings with room to spare).
    let outside = (-within).exp() * (1.0 + 1e-9);
    let n_out = (vocab - cand.len()) as f64;
    // Candidates that do not weigh strictly more than any outsider could join the rest,
    // so that the kept set is a prefix of the reference's order whatever the ties.
    let mut rest_bound = n_out * outside;
    cand.retain(|&(w, _)| {
        let keep = w > outside;
        if !keep {
            rest_bound += w;
        }
        keep
    });
    cand.sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));

    // The reference's total is a sequential f64 sum of all weights; its error is at most
    // (n - 1) u times the true sum (u = 2^-53). `rel` covers that, the rounding of our
    // own sum of the candidates and the product with top_p, several times over.
    let n = vocab as f64;
    let rel = 4.0 * (n + 8.0) * f64::EPSILON;
    let kept_sum: f64 = cand.iter().map(|c| c.0).sum();
    let target_lo = top_p * kept_sum * (1.0 - rel);
    let target_hi = top_p * (kept_sum + rest_bound) * (1.0 + rel);

    let mut mass = 0.0;
    let mut kept = 0usize;
    for (k, &(w, _)) in cand.iter().enumerate() {
        if k > 0 && mass >= target_lo {
            // The running sum before this token may already reach the true target.
            return Draw::Reference;
        }
        mass += w;
        if mass >= target_hi {
            kept = k + 1;
            break;
        }
    }
    if kept == 0 {
        return Draw::Reference;
    }
    // The reference's draw over its nucleus, with its own mass.
    let nucleus = &cand[..kept];
    let point = u * mass;
    let mut acc = 0.0;
    for &(w, i) in nucleus {
        acc += w;
        if point < acc {
            return Draw::Token(i);
        }
    }
    Draw::Token(nucleus[kept - 1].1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::candle::choice::sampler::{choose, choose_reference, reference_top_p, StreamKey};
    use crate::{RequestId, Sampling};

    /// Qwen2.5's vocabulary.
    const VOCAB: usize = 152_064;

    /// A deterministic stream of uniforms for building logits.
    struct Stream(StreamKey, usize);
    impl Stream {
        fn new(name: &str) -> Self {
            Stream(StreamKey::new(11, &RequestId::new(name)), 0)
        }
        fn next(&mut self) -> f64 {
            self.1 += 1;
            self.0.uniform(self.1)
        }
        /// Roughly normal: the sum of four uniforms, centred.
        fn normal(&mut self) -> f64 {
            (0..4).map(|_| self.next()).sum::<f64>() - 2.0
        }
    }

    /// Language-model-like logits: a broad body and a few strong tokens on top.
    fn lm_logits(s: &mut Stream, spread: f64) -> Vec<f32> {
        let mut l: Vec<f32> = (0..VOCAB).map(|_| (s.normal() * spread) as f32).collect();
        for _ in 0..8 {
            let i = (s.next() * VOCAB as f64) as usize;
            l[i] = (12.0 + s.normal() * 3.0) as f32;
        }
        l
    }

    const SETTINGS: [(f32, f32); 6] = [
        (0.2, 0.9),
        (0.7, 0.8),
        (1.0, 0.9),
        (0.2, 0.5),
        (1.5, 0.95),
        (0.05, 1.0),
    ];

    /// Asserts `choose` equals the reference for every setting and `draws` uniforms;
    /// returns how many draws the candidate set decided on its own.
    fn assert_same(logits: &[f32], draws: usize, what: &str) -> usize {
        let key = StreamKey::new(5, &RequestId::new(what));
        let mut decided = 0;
        for (temperature, top_p) in SETTINGS {
            let s = Sampling::TopP { temperature, top_p };
            for p in 0..draws {
                let u = key.uniform(p);
                let want = choose_reference(logits, s, u);
                assert_eq!(
                    choose(logits, s, u),
                    want,
                    "{what}: T {temperature} top-p {top_p} u {u}"
                );
                if let Draw::Token(t) = top_p_draw(logits, temperature as f64, top_p as f64, u) {
                    assert_eq!(t, want, "{what}: the candidate set disagrees");
                    decided += 1;
                }
            }
        }
        decided
    }

    #[test]
    fn random_logits_at_full_vocabulary_give_the_references_tokens() {
        let mut s = Stream::new("random");
        let mut decided = 0;
        let mut total = 0;
        for row in 0..8 {
            let logits = lm_logits(&mut s, 1.0 + row as f64 * 0.5);
            decided += assert_same(&logits, 8, &format!("row {row}"));
            total += 8 * SETTINGS.len();
        }
        // top-p 1.0 always needs the reference (its target is the whole mass); the
        // other settings must nearly always be decided from the candidates.
        let reachable = total - total / SETTINGS.len();
        assert!(
            decided * 100 >= reachable * 95,
            "only {decided} of {reachable} draws decided from candidates"
        );
    }

    #[test]
    fn adversarial_logits_give_the_references_tokens() {
        let mut s = Stream::new("adversarial");
        let mut cases: Vec<(&str, Vec<f32>)> = Vec::new();
        cases.push(("flat", vec![0.5; VOCAB]));
        let mut ties = lm_logits(&mut s, 2.0);
        for i in (0..VOCAB).step_by(151) {
            ties[i] = 20.0;
        }
        cases.push(("a thousand ties at the top", ties));
        let mut spike = vec![-3.0f32; VOCAB];
        spike[VOCAB / 2] = 40.0;
        cases.push(("one spike", spike));
        let mut two = vec![0.0f32; VOCAB];
        two[7] = 30.0;
        two[9] = 30.0;
        cases.push(("two equal tokens (top-p 0.5 sits on the boundary)", two));
        let mut neg = vec![f32::NEG_INFINITY; VOCAB];
        neg[3] = 1.0;
        neg[VOCAB - 1] = 0.5;
        cases.push(("-inf but two", neg));
        let mut some_neg = lm_logits(&mut s, 1.0);
        for i in (0..VOCAB).step_by(3) {
            some_neg[i] = f32::NEG_INFINITY;
        }
        cases.push(("a third -inf", some_neg));
        // Today's sampler indexed an empty nucleus here; both now take the argmax.
        cases.push(("all -inf", vec![f32::NEG_INFINITY; VOCAB]));
        let mut nan0 = lm_logits(&mut s, 1.0);
        nan0[0] = f32::NAN;
        cases.push(("NaN in slot 0", nan0));
        let mut nan = lm_logits(&mut s, 1.0);
        nan[VOCAB / 3] = f32::NAN;
        cases.push(("one NaN", nan));
        let mut inf = lm_logits(&mut s, 1.0);
        inf[17] = f32::INFINITY;
        cases.push(("+inf", inf));
        // Tokens exactly on, just above and just below the candidate cut of T 0.2.
        let mut edge = lm_logits(&mut s, 0.5);
        let top = edge.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        let cut = top - (CUT * 0.2) as f32;
        for (k, i) in (0..VOCAB).step_by(97).enumerate() {
            edge[i] = match k % 3 {
                0 => cut,
                1 => f32::from_bits(cut.to_bits() - 1),
                _ => f32::from_bits(cut.to_bits() + 1),
            };
        }
        cases.push(("on the candidate cut", edge));
        // Weights that underflow to zero next to a top token.
        let mut under = vec![-1.0e30f32; VOCAB];
        under[100] = 0.0;
        cases.push(("underflowing weights", under));
        for (what, logits) in &cases {
            assert_same(logits, 5, what);
        }
    }

    #[test]
    fn undecided_cases_are_handed_to_the_reference() {
        let mut nan = vec![0.0f32; VOCAB];
        nan[5] = f32::NAN;
        assert_eq!(top_p_draw(&nan, 0.2, 0.9, 0.3), Draw::Reference);
        assert_eq!(top_p_draw(&[1.0, 2.0], 0.2, 1.5, 0.3), Draw::Reference);
        // Two equal tokens and top-p 0.5: the first one's mass is exactly the target.
        let mut two = vec![0.0f32; VOCAB];
        two[7] = 30.0;
        two[9] = 30.0;
        assert_eq!(top_p_draw(&two, 0.2, 0.5, 0.3), Draw::Reference);
        assert_eq!(reference_top_p(&two, 0.2, 0.5, 0.3), 7);
    }
}
