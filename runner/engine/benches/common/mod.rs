//! What the benches share: their inputs.

/// Varied values in [-1, 1], the same for the same `seed` (their only use is to be
/// multiplied and summed).
pub fn values(n: usize, seed: u64) -> Vec<f32> {
    (0..n)
        .map(|i| ((i as f64 * 0.754_877_666 + seed as f64) * 12.9898).sin() as f32)
        .collect()
}
