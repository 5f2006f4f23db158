//! What a Probe run plans: the first N items of every domain, the seeds, and a slice
//! by request id as CREG's plan has; the workload asks every scored question of them.

use crate::record::Domain;
use runner_core::plan::Shard;
use std::collections::BTreeMap;

/// Which questions of the set a run asks, and with which seeds.
#[derive(Clone, Debug, PartialEq)]
pub struct ProbePlan {
    pub seeds: Vec<u64>,
    /// Keep the first N items of every domain (core and PIT alike), in file order.
    pub limit_per_domain: Option<usize>,
    pub shard: Option<Shard>,
}

/// Positions of the first `limit` items of every domain, in file order.
pub fn first_per_domain<T>(
    items: &[T],
    domain: impl Fn(&T) -> Domain,
    limit: Option<usize>,
) -> Vec<usize> {
    let mut taken: BTreeMap<Domain, usize> = BTreeMap::new();
    (0..items.len())
        .filter(|&i| {
            let n = taken.entry(domain(&items[i])).or_default();
            *n += 1;
            limit.is_none_or(|l| *n <= l)
        })
        .collect()
}
