//! The fixed relation chain of each domain. Relation names are those of the published
//! format, because `gold_invalidated` is scored against them.

use crate::record::{Domain, HopDepth};

/// What kind of value the hop-k question asks for; it selects the alias rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AnswerKind {
    /// Names of companies, cities, plans and the like.
    Name,
    /// A time zone: "X" also matches "X time" and "X time zone".
    TimeZone,
    /// The yes/no daylight-saving question whose gold is a policy phrase.
    DstPolicy,
}

/// The relation names of one domain's four-link chain.
#[derive(Debug, Clone, Copy)]
pub struct Chain {
    /// User-level root relation (hop 1).
    pub root: &'static str,
    /// Third-party link relations for hops 2, 3, 4.
    pub links: [&'static str; 3],
    /// User-level conclusions derived at hops 2, 3, 4.
    pub conclusions: [&'static str; 3],
    /// Answer kind at hops 1..=4.
    pub kinds: [AnswerKind; 4],
}

use AnswerKind::{DstPolicy, Name, TimeZone};

const EMPLOYMENT: Chain = Chain {
    root: "works_at",
    links: ["located_in", "city_timezone", "tz_dst_policy"],
    conclusions: ["workplace_city", "work_timezone", "work_dst_policy"],
    kinds: [Name, Name, TimeZone, DstPolicy],
};

const RESIDENCE: Chain = Chain {
    root: "lives_in",
    links: ["power_utility_of", "billing_portal_of", "portal_owner_of"],
    conclusions: ["home_utility", "utility_portal", "portal_owner"],
    kinds: [Name, Name, Name, Name],
};

const TRAINING: Chain = Chain {
    root: "training_for",
    links: ["plan_of", "long_run_day_of", "blocked_slot_of"],
    conclusions: [
        "training_plan",
        "current_long_run_day",
        "current_blocked_slot",
    ],
    kinds: [Name, Name, Name, Name],
};

pub fn chain(domain: Domain) -> &'static Chain {
    match domain {
        Domain::Employment => &EMPLOYMENT,
        Domain::Residence => &RESIDENCE,
        Domain::Training => &TRAINING,
    }
}

impl Chain {
    /// The user-level relation that holds the answer at hop k (the root at hop 1).
    pub fn conclusion(&self, k: HopDepth) -> &'static str {
        match k.get() {
            1 => self.root,
            n => self.conclusions[usize::from(n) - 2],
        }
    }

    pub fn kind(&self, k: HopDepth) -> AnswerKind {
        self.kinds[usize::from(k.get()) - 1]
    }

    /// Relations invalidated when the root is contradicted in a k-hop item:
    /// the root and every conclusion built on it up to hop k.
    pub fn invalidated_by_root(&self, k: HopDepth) -> Vec<&'static str> {
        let mut out = vec![self.root];
        out.extend(self.conclusions.iter().take(usize::from(k.get()) - 1));
        out
    }

    /// Every relation of the k-hop chain: root, links and conclusions up to hop k.
    pub fn relations_up_to(&self, k: HopDepth) -> Vec<&'static str> {
        let n = usize::from(k.get()) - 1;
        let mut out = vec![self.root];
        out.extend(self.links.iter().take(n));
        out.extend(self.conclusions.iter().take(n));
        out
    }

    /// The chain position (1..=4) of a user-level relation, if it is one.
    pub fn position(&self, relation: &str) -> Option<u8> {
        if relation == self.root {
            return Some(1);
        }
        self.conclusions
            .iter()
            .position(|c| *c == relation)
            .map(|i| i as u8 + 2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_contradiction_invalidates_k_relations() {
        for d in Domain::ALL {
            for k in HopDepth::all() {
                let inv = chain(*d).invalidated_by_root(k);
                assert_eq!(inv.len(), usize::from(k.get()));
                assert_eq!(*inv.last().unwrap(), chain(*d).conclusion(k));
            }
        }
    }
}
