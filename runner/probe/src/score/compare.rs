//! Tests the scoring proposal asks for beyond accuracies: paired comparisons of two
//! systems on the same items (exact McNemar per cell, paired bootstrap of the post
//! accuracy difference) and the depth trend within each contradicted arm
//! (Cochran-Armitage).

use crate::record::{Contradicted, ProbeItem};
use crate::score::outcome::{score_probe_item, ProbeResponse};
use runner_core::stats::bootstrap::{paired_bootstrap, Estimate, DEFAULT_RESAMPLES, DEFAULT_SEED};
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write;

/// Exact two-sided McNemar test from the discordant counts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct McNemar {
    /// Items A got right and B wrong.
    pub a_only: usize,
    /// Items B got right and A wrong.
    pub b_only: usize,
    pub p_value: f64,
}

pub fn mcnemar(a_only: usize, b_only: usize) -> McNemar {
    let n = a_only + b_only;
    let k = a_only.min(b_only);
    // Binomial(n, 1/2) tail in log space so large n cannot underflow.
    let ln_half_n = n as f64 * 0.5f64.ln();
    let mut ln_choose = 0.0;
    let mut tail = 0.0;
    for i in 0..=k {
        if i > 0 {
            ln_choose += ((n - i + 1) as f64).ln() - (i as f64).ln();
        }
        tail += (ln_choose + ln_half_n).exp();
    }
    McNemar {
        a_only,
        b_only,
        p_value: (2.0 * tail).min(1.0),
    }
}

/// Cochran-Armitage test for a linear trend of a proportion over ordered groups.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Trend {
    pub z: f64,
    pub p_value: f64,
}

/// `groups`: (score, successes, trials) per group. `None` when the test is undefined
/// (fewer than two groups with trials, or a proportion of exactly 0 or 1 overall).
pub fn cochran_armitage(groups: &[(f64, usize, usize)]) -> Option<Trend> {
    let n: usize = groups.iter().map(|g| g.2).sum();
    let x: usize = groups.iter().map(|g| g.1).sum();
    if groups.iter().filter(|g| g.2 > 0).count() < 2 || x == 0 || x == n {
        return None;
    }
    let p = x as f64 / n as f64;
    let t: f64 = groups
        .iter()
        .map(|&(s, xi, ni)| s * (xi as f64 - ni as f64 * p))
        .sum();
    let st2: f64 = groups.iter().map(|&(s, _, ni)| s * s * ni as f64).sum();
    let st: f64 = groups.iter().map(|&(s, _, ni)| s * ni as f64).sum();
    let var = p * (1.0 - p) * (st2 - st * st / n as f64);
    if var <= 0.0 {
        return None;
    }
    let z = t / var.sqrt();
    Some(Trend {
        z,
        p_value: erfc(z.abs() / std::f64::consts::SQRT_2),
    })
}

/// Complementary error function (Numerical Recipes' erfcc, relative error < 1.2e-7).
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let r = t
        * (-z * z - 1.265_512_23
            + t * (1.000_023_68
                + t * (0.374_091_96
                    + t * (0.096_784_18
                        + t * (-0.186_288_06
                            + t * (0.278_868_07
                                + t * (-1.135_203_98
                                    + t * (1.488_515_87
                                        + t * (-0.822_152_23 + t * 0.170_872_77)))))))))
            .exp();
    if x >= 0.0 {
        r
    } else {
        2.0 - r
    }
}

/// Cochran-Armitage on per-unit scores in [0, 1] (here: an item's share of correct
/// samples). With 0/1 scores it is the classic test; with fractions it is the same score
/// statistic with the variance of the unit scores in place of p(1-p), so that seeds are
/// nested in their item and repeating identical seeds changes nothing.
/// `units`: (group score, unit score). `None` when undefined.
pub fn cochran_armitage_units(units: &[(f64, f64)]) -> Option<Trend> {
    let n = units.len() as f64;
    let groups: std::collections::BTreeSet<u64> = units.iter().map(|u| u.0.to_bits()).collect();
    if groups.len() < 2 {
        return None;
    }
    let mean = units.iter().map(|u| u.1).sum::<f64>() / n;
    let var_y = units.iter().map(|u| (u.1 - mean).powi(2)).sum::<f64>() / n;
    let t: f64 = units.iter().map(|&(s, y)| s * (y - mean)).sum();
    let st2: f64 = units.iter().map(|u| u.0 * u.0).sum();
    let st: f64 = units.iter().map(|u| u.0).sum();
    let var = var_y * (st2 - st * st / n);
    if var <= 0.0 {
        return None;
    }
    let z = t / var.sqrt();
    Some(Trend {
        z,
        p_value: erfc(z.abs() / std::f64::consts::SQRT_2),
    })
}

/// Depth trend of post accuracy within each contradicted arm, clustered by item: each
/// item is one unit scored by its share of correct samples (seeds nested in items), so
/// three identical seeds give the statistic of one.
pub fn depth_trends(pairs: &[(&ProbeItem, &ProbeResponse)]) -> BTreeMap<String, Option<Trend>> {
    let mut out = BTreeMap::new();
    for &arm in Contradicted::ALL {
        let mut items: BTreeMap<&str, (u8, usize, usize)> = BTreeMap::new();
        for (item, r) in pairs.iter().filter(|(i, _)| i.contradicted == arm) {
            let e = items
                .entry(item.probe_id.as_str())
                .or_insert((item.hop_depth.get(), 0, 0));
            e.1 += usize::from(score_probe_item(item, r).post.is_correct());
            e.2 += 1;
        }
        let units: Vec<(f64, f64)> = items
            .values()
            .map(|&(k, x, n)| (f64::from(k), x as f64 / n as f64))
            .collect();
        out.insert(arm.to_string(), cochran_armitage_units(&units));
    }
    out
}

/// Two systems on the same items.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    pub a: String,
    pub b: String,
    pub items: usize,
    /// Post accuracy of A minus B, paired bootstrap over items.
    pub post_acc_difference: Option<Estimate>,
    /// McNemar on post correctness: overall and per hop x contradicted cell.
    pub mcnemar: BTreeMap<String, McNemar>,
}

/// Compare two systems' responses, matched by item id; items only one system answered
/// are left out. With several samples per item, an item counts as right for McNemar
/// when most of its samples are.
pub fn compare_probe(
    a: (&str, &[(&ProbeItem, &ProbeResponse)]),
    b: (&str, &[(&ProbeItem, &ProbeResponse)]),
) -> Comparison {
    type PerItem<'x> = BTreeMap<&'x str, (&'x ProbeItem, Vec<f64>)>;
    fn per_item<'x>(pairs: &[(&'x ProbeItem, &ProbeResponse)]) -> PerItem<'x> {
        let mut m: PerItem = BTreeMap::new();
        for (item, r) in pairs {
            let ok = f64::from(u8::from(score_probe_item(item, r).post.is_correct()));
            m.entry(item.probe_id.as_str())
                .or_insert((item, vec![]))
                .1
                .push(ok);
        }
        m
    }
    let (ma, mb) = (per_item(a.1), per_item(b.1));
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let mut clusters = Vec::new();
    let mut counts: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for (id, (item, va)) in &ma {
        let Some((_, vb)) = mb.get(id) else { continue };
        let (pa, pb) = (mean(va), mean(vb));
        clusters.push(vec![(pa, pb)]);
        let (ra, rb) = (pa > 0.5, pb > 0.5);
        for key in [
            "all".to_string(),
            format!("{} {}", item.hop_depth, item.contradicted),
        ] {
            let c = counts.entry(key).or_default();
            c.0 += usize::from(ra && !rb);
            c.1 += usize::from(rb && !ra);
        }
    }
    Comparison {
        a: a.0.to_string(),
        b: b.0.to_string(),
        items: clusters.len(),
        post_acc_difference: paired_bootstrap(&clusters, DEFAULT_RESAMPLES, DEFAULT_SEED),
        mcnemar: counts
            .into_iter()
            .map(|(k, (x, y))| (k, mcnemar(x, y)))
            .collect(),
    }
}

impl Comparison {
    pub fn to_markdown(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "## Probe: {} vs {} ({} paired items)\n",
            runner_core::report::markdown_text(&self.a),
            runner_core::report::markdown_text(&self.b),
            self.items
        );
        if let Some(d) = &self.post_acc_difference {
            let _ = writeln!(
                s,
                "Post accuracy difference (A - B): {:.3} [{:.3}, {:.3}] (paired bootstrap over items)\n",
                d.mean, d.lo, d.hi
            );
        }
        let _ = writeln!(
            s,
            "| cell | A only right | B only right | McNemar exact p |\n| --- | --- | --- | --- |"
        );
        for (cell, m) in &self.mcnemar {
            let _ = writeln!(
                s,
                "| {cell} | {} | {} | {:.4} |",
                m.a_only, m.b_only, m.p_value
            );
        }
        s
    }
}

/// A p-value with enough digits to be read at any size.
pub fn fmt_p(p: f64) -> String {
    if p < 1e-4 {
        format!("{p:.1e}")
    } else {
        format!("{p:.4}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mcnemar_matches_the_binomial_tail() {
        // 2 * P(X <= 1) for X ~ Bin(10, 1/2) = 2 * 11 / 1024.
        assert!((mcnemar(1, 9).p_value - 22.0 / 1024.0).abs() < 1e-12);
        assert_eq!(mcnemar(0, 0).p_value, 1.0);
        assert_eq!(mcnemar(5, 5).p_value, 1.0);
        // Large counts stay finite and tiny.
        let p = mcnemar(0, 2000).p_value;
        assert!((0.0..1e-300).contains(&p));
    }

    #[test]
    fn erfc_reference_values() {
        assert!((erfc(0.0) - 1.0).abs() < 1e-7);
        assert!((erfc(1.0) - 0.157_299_207).abs() < 1e-7);
        assert!((erfc(-1.0) - 1.842_700_793).abs() < 1e-7);
    }

    #[test]
    fn trend_detects_a_falling_proportion_and_not_a_flat_one() {
        let falling = [(1.0, 20, 24), (2.0, 30, 48), (3.0, 18, 48), (4.0, 6, 48)];
        let t = cochran_armitage(&falling).unwrap();
        assert!(t.z < -5.0 && t.p_value < 1e-6, "{t:?}");
        let flat = [(1.0, 12, 24), (2.0, 24, 48), (3.0, 24, 48), (4.0, 24, 48)];
        let t = cochran_armitage(&flat).unwrap();
        assert!(t.z.abs() < 1e-9 && (t.p_value - 1.0).abs() < 1e-6);
        assert!(cochran_armitage(&[(1.0, 0, 10), (2.0, 0, 10)]).is_none());
        assert!(cochran_armitage(&[(1.0, 3, 10)]).is_none());
    }

    #[test]
    fn unit_trend_on_binary_units_is_the_classic_test() {
        let falling = [(1.0, 20, 24), (2.0, 30, 48), (3.0, 18, 48), (4.0, 6, 48)];
        let units: Vec<(f64, f64)> = falling
            .iter()
            .flat_map(|&(s, x, n)| (0..n).map(move |i| (s, f64::from(u8::from(i < x)))))
            .collect();
        let a = cochran_armitage(&falling).unwrap();
        let b = cochran_armitage_units(&units).unwrap();
        assert!((a.z - b.z).abs() < 1e-9, "{a:?} {b:?}");
        assert!(cochran_armitage_units(&[(1.0, 1.0), (1.0, 0.0)]).is_none());
    }
}
