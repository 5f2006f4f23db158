//! Cluster bootstrap: the mean of values grouped in clusters (items, scenarios), with a
//! 95% percentile interval from resampling whole clusters.
//!
//! Resampling clusters rather than values keeps the interval honest when one cluster
//! contributes several correlated values (seeds of one item, prefixes of one scenario).
//! The generator is a fixed-seed SplitMix64 so that reports are reproducible byte for
//! byte without pulling in a random-number crate.

use serde::Serialize;

/// Resamples used unless a caller asks otherwise.
pub const DEFAULT_RESAMPLES: usize = 2000;
/// Seed used unless a caller asks otherwise.
pub const DEFAULT_SEED: u64 = 0x5EED_2026;

/// A mean with its 95% interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Estimate {
    pub clusters: usize,
    pub values: usize,
    pub mean: f64,
    pub lo: f64,
    pub hi: f64,
}

/// SplitMix64: tiny, fast and good enough to drive resampling indices.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform index below `n` (n > 0), without modulo bias worth caring about at these sizes.
    pub fn below(&mut self, n: usize) -> usize {
        ((u128::from(self.next_u64()) * n as u128) >> 64) as usize
    }
}

/// Pooled mean of all values with a 95% cluster-bootstrap percentile interval.
///
/// Empty clusters are ignored; `None` when there is no value at all.
pub fn cluster_bootstrap(clusters: &[Vec<f64>], resamples: usize, seed: u64) -> Option<Estimate> {
    let clusters: Vec<(f64, usize)> = clusters
        .iter()
        .filter(|c| !c.is_empty())
        .map(|c| (c.iter().sum::<f64>(), c.len()))
        .collect();
    let values: usize = clusters.iter().map(|c| c.1).sum();
    if values == 0 {
        return None;
    }
    let mean = clusters.iter().map(|c| c.0).sum::<f64>() / values as f64;
    let mut rng = SplitMix64::new(seed);
    let mut means: Vec<f64> = (0..resamples.max(1))
        .map(|_| {
            let (mut sum, mut count) = (0.0, 0usize);
            for _ in 0..clusters.len() {
                let (s, n) = clusters[rng.below(clusters.len())];
                sum += s;
                count += n;
            }
            sum / count as f64
        })
        .collect();
    means.sort_by(f64::total_cmp);
    Some(Estimate {
        clusters: clusters.len(),
        values,
        mean,
        lo: percentile(&means, 0.025),
        hi: percentile(&means, 0.975),
    })
}

/// Same as [`cluster_bootstrap`] with the default resamples and seed.
pub fn mean_ci(clusters: &[Vec<f64>]) -> Option<Estimate> {
    cluster_bootstrap(clusters, DEFAULT_RESAMPLES, DEFAULT_SEED)
}

/// Paired difference of means, mean(a) - mean(b), over clusters holding (a, b) value
/// pairs measured on the same units (two systems on the same items), with a 95%
/// percentile interval from resampling whole clusters. `None` without any pair.
pub fn paired_bootstrap(
    clusters: &[Vec<(f64, f64)>],
    resamples: usize,
    seed: u64,
) -> Option<Estimate> {
    let clusters: Vec<(f64, usize)> = clusters
        .iter()
        .filter(|c| !c.is_empty())
        .map(|c| (c.iter().map(|(a, b)| a - b).sum::<f64>(), c.len()))
        .collect();
    let grouped: Vec<Vec<f64>> = clusters
        .iter()
        .map(|&(d, n)| vec![d / n as f64; n])
        .collect();
    // The difference of means equals the mean of per-pair differences, so the paired
    // interval is the cluster bootstrap of those differences.
    cluster_bootstrap(&grouped, resamples, seed)
}

/// Linear-interpolated percentile of sorted data.
fn percentile(sorted: &[f64], q: f64) -> f64 {
    let pos = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bernoulli(ones: usize, n: usize) -> Vec<Vec<f64>> {
        (0..n)
            .map(|i| vec![if i < ones { 1.0 } else { 0.0 }])
            .collect()
    }

    #[test]
    fn constant_data_has_a_degenerate_interval() {
        let e = mean_ci(&bernoulli(10, 10)).unwrap();
        assert_eq!((e.mean, e.lo, e.hi), (1.0, 1.0, 1.0));
    }

    #[test]
    fn empty_input_has_no_estimate() {
        assert!(mean_ci(&[]).is_none());
        assert!(mean_ci(&[vec![], vec![]]).is_none());
    }

    #[test]
    fn interval_brackets_the_mean_and_matches_the_binomial_width() {
        let e = mean_ci(&bernoulli(50, 100)).unwrap();
        assert_eq!(e.mean, 0.5);
        assert!(e.lo < 0.5 && e.hi > 0.5);
        // The normal approximation gives +-0.098 for p = 0.5, n = 100.
        assert!((e.hi - e.lo - 0.196).abs() < 0.03, "width {}", e.hi - e.lo);
    }

    #[test]
    fn same_seed_same_interval_other_seed_differs() {
        let data = bernoulli(37, 80);
        let a = cluster_bootstrap(&data, 500, 7).unwrap();
        let b = cluster_bootstrap(&data, 500, 7).unwrap();
        let c = cluster_bootstrap(&data, 500, 8).unwrap();
        assert_eq!(a, b);
        assert_ne!((a.lo, a.hi), (c.lo, c.hi));
    }

    #[test]
    fn correlated_clusters_widen_the_interval() {
        // 20 clusters of 5 identical values versus 100 independent values, same mean.
        let clustered: Vec<Vec<f64>> = (0..20)
            .map(|i| vec![if i < 10 { 1.0 } else { 0.0 }; 5])
            .collect();
        let a = mean_ci(&clustered).unwrap();
        let b = mean_ci(&bernoulli(50, 100)).unwrap();
        assert_eq!((a.mean, a.values, a.clusters), (0.5, 100, 20));
        assert!(a.hi - a.lo > 1.5 * (b.hi - b.lo));
    }

    #[test]
    fn paired_difference_of_identical_systems_is_zero() {
        let same: Vec<Vec<(f64, f64)>> = (0..30)
            .map(|i| vec![(f64::from(i % 2), f64::from(i % 2))])
            .collect();
        let e = paired_bootstrap(&same, 500, 1).unwrap();
        assert_eq!((e.mean, e.lo, e.hi), (0.0, 0.0, 0.0));
    }

    #[test]
    fn paired_difference_is_tighter_than_unpaired_when_units_correlate() {
        // A is right on 60 of 100 items, B on the same 60 minus 10: the paired
        // difference is 0.1 and its interval excludes 0.
        let pairs: Vec<Vec<(f64, f64)>> = (0..100)
            .map(|i| {
                let a = f64::from(u8::from(i < 60));
                let b = f64::from(u8::from(i < 50));
                vec![(a, b)]
            })
            .collect();
        let e = paired_bootstrap(&pairs, 2000, 3).unwrap();
        assert!((e.mean - 0.1).abs() < 1e-12);
        assert!(e.lo > 0.0 && e.hi < 0.2, "{e:?}");
        assert!(paired_bootstrap(&[], 10, 1).is_none());
    }

    #[test]
    fn below_stays_in_range() {
        let mut rng = SplitMix64::new(1);
        assert!((0..10_000).all(|_| rng.below(3) < 3));
    }
}

/// Many metrics over the same clusters at once: `clusters[c][m]` is the (sum, count) of
/// metric `m` in cluster `c`. Each resample draws whole clusters once and pools every
/// metric from the same draw, so the intervals of related metrics are computed from
/// identical resamples (and the cost of drawing is shared). A metric with no value in a
/// resample skips that resample; `None` for a metric with no value at all.
pub fn cluster_bootstrap_many(
    clusters: &[Vec<(f64, usize)>],
    resamples: usize,
    seed: u64,
) -> Vec<Option<Estimate>> {
    let metrics = clusters.first().map_or(0, Vec::len);
    let n = clusters.len();
    let total = |m: usize| {
        clusters
            .iter()
            .fold((0.0, 0usize, 0usize), |(s, c, k), cl| {
                (s + cl[m].0, c + cl[m].1, k + usize::from(cl[m].1 > 0))
            })
    };
    // Most metrics are present in every sample, so their counts coincide: pool counts
    // once per distinct count column rather than once per metric.
    let column = |m: usize| clusters.iter().map(|c| c[m].1).collect::<Vec<usize>>();
    let mut classes: Vec<Vec<usize>> = Vec::new();
    let class_of: Vec<usize> = (0..metrics)
        .map(|m| {
            let col = column(m);
            classes.iter().position(|c| *c == col).unwrap_or_else(|| {
                classes.push(col);
                classes.len() - 1
            })
        })
        .collect();
    let k = classes.len();
    // Flat, contiguous rows so the pooling loops vectorize.
    let flat_sums: Vec<f64> = clusters
        .iter()
        .flat_map(|c| c.iter().map(|x| x.0))
        .collect();
    let flat_counts: Vec<f64> = (0..n)
        .flat_map(|c| classes.iter().map(move |col| col[c] as f64))
        .collect();
    let mut rng = SplitMix64::new(seed);
    let mut means: Vec<Vec<f64>> = vec![Vec::with_capacity(resamples); metrics];
    let mut sums = vec![0.0; metrics];
    let mut counts = vec![0.0; k];
    for _ in 0..resamples.max(1) {
        sums.fill(0.0);
        counts.fill(0.0);
        for _ in 0..n {
            let c = rng.below(n);
            for (acc, x) in sums
                .iter_mut()
                .zip(&flat_sums[c * metrics..(c + 1) * metrics])
            {
                *acc += x;
            }
            for (acc, x) in counts.iter_mut().zip(&flat_counts[c * k..(c + 1) * k]) {
                *acc += x;
            }
        }
        for m in 0..metrics {
            let count = counts[class_of[m]];
            if count > 0.0 {
                means[m].push(sums[m] / count);
            }
        }
    }
    (0..metrics)
        .map(|m| {
            let (sum, values, nonempty) = total(m);
            let boot = &mut means[m];
            if values == 0 || boot.is_empty() {
                return None;
            }
            boot.sort_by(f64::total_cmp);
            Some(Estimate {
                clusters: nonempty,
                values,
                mean: sum / values as f64,
                lo: percentile(boot, 0.025),
                hi: percentile(boot, 0.975),
            })
        })
        .collect()
}

#[cfg(test)]
mod many_tests {
    use super::*;

    #[test]
    fn many_agrees_with_single_metric_bootstrap_on_means_and_brackets_them() {
        let clusters: Vec<Vec<f64>> = (0..60)
            .map(|i| vec![(i % 3) as f64, ((i * 7) % 5) as f64 / 4.0])
            .collect();
        let single = cluster_bootstrap(&clusters, 1000, 7).unwrap();
        let packed: Vec<Vec<(f64, usize)>> = clusters
            .iter()
            .map(|c| vec![(c.iter().sum(), c.len()), (c[0], 1), (0.0, 0)])
            .collect();
        let many = cluster_bootstrap_many(&packed, 1000, 7);
        let pooled = many[0].unwrap();
        assert_eq!(pooled.mean, single.mean);
        assert_eq!((pooled.clusters, pooled.values), (60, 120));
        assert!((pooled.lo - single.lo).abs() < 0.05 && (pooled.hi - single.hi).abs() < 0.05);
        let first = many[1].unwrap();
        assert!((first.mean - 1.0).abs() < 1e-12);
        assert!(first.lo < first.mean && first.mean < first.hi);
        assert!(many[2].is_none(), "a metric with no values has no estimate");
    }
}
