//! Consistency checks for `probe.json` and `probe_pit.json`.
//!
//! Item checks hold for any subset; the design-count checks hold for a complete file.
//! Golds are recomputed through `replay`, which shares only the relation names of
//! `chains.rs` with the generator, never its wording or value tables.

use crate::chains::chain;
use crate::record::{
    loose_key, Axis, Confidence, Contradicted, Density, Domain, HopDepth, PitItem, PitQuery,
    ProbeItem, Scenario, BEFORE_ANY_FACT,
};
use crate::replay::{as_of, check_date, replay_pit, replay_probe, ProbeReplay, Record};
use std::collections::{BTreeMap, HashSet};
use std::fmt;

/// One failed check, naming the item (or `<file>` for set-level checks) and the field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub item: String,
    pub field: String,
    pub message: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "item {}, field `{}`: {}",
            self.item, self.field, self.message
        )
    }
}

const FILE: &str = "<file>";

struct Findings(Vec<Finding>);

impl Findings {
    fn add(&mut self, item: &str, field: &str, message: impl Into<String>) {
        self.0.push(Finding {
            item: item.to_string(),
            field: field.to_string(),
            message: message.into(),
        });
    }

    fn expect_eq<T: PartialEq + fmt::Debug>(&mut self, item: &str, field: &str, have: T, want: T) {
        if have != want {
            self.add(item, field, format!("is {have:?}, expected {want:?}"));
        }
    }
}

/// Expected size of a complete `probe.json`.
pub const PROBE_ITEMS: usize = 168;
/// Expected size of a complete `probe_pit.json`, and its queries.
pub const PIT_ITEMS: usize = 8;
pub const PIT_QUERIES: usize = 24;

/// Check a complete `probe.json`: every item, then the design counts.
pub fn check_probe(items: &[ProbeItem]) -> Vec<Finding> {
    let mut out = Findings(Vec::new());
    let mut seen = HashSet::new();
    for item in items {
        if !seen.insert(item.probe_id.as_str()) {
            out.add(item.probe_id.as_str(), "probe_id", "duplicate id");
        }
        check_probe_item(item, &mut out);
    }
    check_probe_counts(items, &mut out);
    out.0
}

/// Item-level checks only.
pub fn check_probe_items(items: &[ProbeItem]) -> Vec<Finding> {
    let mut out = Findings(Vec::new());
    for item in items {
        check_probe_item(item, &mut out);
    }
    out.0
}

fn check_probe_item(item: &ProbeItem, out: &mut Findings) {
    let id = item.probe_id.as_str();
    let n = item.sessions.len();
    if item.oracle_facts.len() != n || item.oracle_retractions.len() != n {
        out.add(
            id,
            "oracle_facts",
            format!(
                "{n} sessions but {} fact lists and {} retraction lists",
                item.oracle_facts.len(),
                item.oracle_retractions.len()
            ),
        );
        return;
    }
    check_probe_text(item, out);
    check_probe_design(item, out);
    let replay = match replay_probe(item) {
        Ok(r) => r,
        Err(e) => {
            out.add(id, &e.field, e.message);
            return;
        }
    };
    check_probe_chain(item, &replay, out);
    check_probe_golds(item, &replay, out);
    check_probe_confidence(item, out);
}

/// Nothing empty, and golds that a model can tell apart.
fn check_probe_text(item: &ProbeItem, out: &mut Findings) {
    let id = item.probe_id.as_str();
    if item
        .sessions
        .iter()
        .any(|s| s.is_empty() || s.iter().any(|t| t.trim().is_empty()))
    {
        out.add(id, "sessions", "a session or a turn is empty");
    }
    if item.question.trim().is_empty() {
        out.add(id, "question", "empty");
    }
    if item.gold_pre.is_unknown() {
        out.add(
            id,
            "gold_pre",
            "is \"unknown\"; the chain always supports an answer before the final turn",
        );
    }
    if loose_key(item.gold_pre.as_str()) == loose_key(item.gold_post.as_str()) {
        out.add(
            id,
            "gold_post",
            format!("equals gold_pre ({})", item.gold_pre),
        );
    }
}

/// The labels agree with each other and the sessions are laid out as the density says.
fn check_probe_design(item: &ProbeItem, out: &mut Findings) {
    let id = item.probe_id.as_str();
    let n = item.sessions.len();
    out.expect_eq(id, "gold_axis", item.gold_axis, item.axis);
    let k = usize::from(item.hop_depth.get());
    if item.hop_depth.get() == 1 && item.contradicted == Contradicted::Derived {
        out.add(id, "contradicted", "a hop-1 item has no derived edge");
    }
    let want_sessions = match item.density {
        Density::Adjacent => 2,
        Density::Distant => 2 * k + 1,
    };
    out.expect_eq(id, "sessions", n, want_sessions);
    if n > 0 && item.sessions[n - 1].len() != 1 {
        out.add(
            id,
            "sessions",
            "the contradiction must be alone in the last session",
        );
    }
}

/// The replayed chain is as long as the item's depth and follows its domain's relations.
fn check_probe_chain(item: &ProbeItem, replay: &ProbeReplay, out: &mut Findings) {
    let id = item.probe_id.as_str();
    let c = chain(item.domain);
    let k = usize::from(item.hop_depth.get());
    out.expect_eq(id, "hop_depth", replay.chain_values.len(), k);
    let want_relations: Vec<String> = std::iter::once(c.root)
        .chain(c.links.iter().copied())
        .take(replay.chain_relations.len())
        .map(str::to_string)
        .collect();
    if replay.chain_relations != want_relations {
        out.add(
            id,
            "oracle_facts",
            format!(
                "chain relations {:?} are not the {} chain",
                replay.chain_relations, item.domain
            ),
        );
    }
}

/// Golds and labels are those the replay gives.
fn check_probe_golds(item: &ProbeItem, replay: &ProbeReplay, out: &mut Findings) {
    let id = item.probe_id.as_str();
    out.expect_eq(id, "gold_pre", &item.gold_pre, &replay.gold_pre);
    out.expect_eq(id, "gold_post", &item.gold_post, &replay.gold_post);
    out.expect_eq(id, "contradicted", item.contradicted, replay.contradicted);
    out.expect_eq(id, "axis", item.axis, replay.axis);
    if replay.contradicted == Contradicted::Derived {
        out.expect_eq(
            id,
            "oracle_facts",
            replay.event_relation.as_str(),
            chain(item.domain).conclusion(item.hop_depth),
        );
    }
    let have: Vec<&str> = item.gold_invalidated.iter().map(|r| r.as_str()).collect();
    let want = replay.invalidated(item);
    out.expect_eq(
        id,
        "gold_invalidated",
        have,
        want.iter().map(String::as_str).collect(),
    );
}

/// The confidence label matches the root fact's, and every confidence is a probability.
fn check_probe_confidence(item: &ProbeItem, out: &mut Findings) {
    let id = item.probe_id.as_str();
    let root = item
        .oracle_facts
        .iter()
        .flatten()
        .find(|f| f.subject == "user");
    if let Some(root) = root {
        let hedged = root.confidence < 1.0;
        out.expect_eq(
            id,
            "confidence",
            item.confidence == Confidence::Hedged,
            hedged,
        );
    }
    for (s, facts) in item.oracle_facts.iter().enumerate() {
        for (j, f) in facts.iter().enumerate() {
            if !(0.0..=1.0).contains(&f.confidence) {
                out.add(
                    id,
                    &format!("oracle_facts[{s}][{j}].confidence"),
                    "outside [0, 1]",
                );
            }
        }
    }
}

fn check_probe_counts(items: &[ProbeItem], out: &mut Findings) {
    out.expect_eq(FILE, "items", items.len(), PROBE_ITEMS);
    check_design_cells(items, out);
    for message in unbalanced_gold_pre(items) {
        out.add(FILE, "gold_pre", message);
    }
    check_marginals(items, out);
}

/// Every possible design cell holds exactly one item.
fn check_design_cells(items: &[ProbeItem], out: &mut Findings) {
    let mut cells: BTreeMap<(Domain, HopDepth, Contradicted, Axis, Density, Confidence), usize> =
        BTreeMap::new();
    for i in items {
        *cells
            .entry((
                i.domain,
                i.hop_depth,
                i.contradicted,
                i.axis,
                i.density,
                i.confidence,
            ))
            .or_default() += 1;
    }
    for &domain in Domain::ALL {
        for hop in HopDepth::all() {
            for &contradicted in Contradicted::ALL {
                let possible = !(hop.get() == 1 && contradicted == Contradicted::Derived);
                for &axis in Axis::ALL {
                    for &density in Density::ALL {
                        for &confidence in Confidence::ALL {
                            let key = (domain, hop, contradicted, axis, density, confidence);
                            let have = cells.get(&key).copied().unwrap_or(0);
                            if possible && have != 1 {
                                out.add(
                                    FILE,
                                    "cells",
                                    format!("cell {domain}/{hop}/{contradicted}/{axis}/{density}/{confidence} has {have} items, expected 1"),
                                );
                            }
                        }
                    }
                }
            }
        }
    }
}

/// The item counts along each design axis of a complete file.
fn check_marginals(items: &[ProbeItem], out: &mut Findings) {
    let stats = Stats::of(items);
    type Expected<'a> = (&'a str, &'a BTreeMap<String, usize>, &'a [(&'a str, usize)]);
    let want: [Expected; 7] = [
        (
            "hop_depth",
            &stats.hop_depth,
            &[("1", 24), ("2", 48), ("3", 48), ("4", 48)],
        ),
        (
            "contradicted",
            &stats.contradicted,
            &[("asserted", 96), ("derived", 72)],
        ),
        ("axis", &stats.axis, &[("correction", 84), ("update", 84)]),
        (
            "density",
            &stats.density,
            &[("adjacent", 84), ("distant", 84)],
        ),
        (
            "confidence",
            &stats.confidence,
            &[("hedged", 84), ("high", 84)],
        ),
        (
            "domain",
            &stats.domain,
            &[("employment", 56), ("residence", 56), ("training", 56)],
        ),
        (
            "gold_axis",
            &stats.gold_axis,
            &[("correction", 84), ("update", 84)],
        ),
    ];
    for (field, have, want) in want {
        let want: BTreeMap<String, usize> = want.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        out.expect_eq(FILE, field, have, &want);
    }
}

/// The hop x domain cells whose gold_pre values are not balanced: within a cell every
/// distinct value must occur equally often, so that a constant answer (always "yes",
/// always the first city) earns no more than its share. A file that reuses one entity
/// set per domain (one value per cell, as the published v0) is balanced trivially.
pub fn unbalanced_gold_pre(items: &[ProbeItem]) -> Vec<String> {
    let mut cells: BTreeMap<(Domain, HopDepth), BTreeMap<String, usize>> = BTreeMap::new();
    for i in items {
        *cells
            .entry((i.domain, i.hop_depth))
            .or_default()
            .entry(loose_key(i.gold_pre.as_str()))
            .or_default() += 1;
    }
    cells
        .into_iter()
        .filter(|(_, values)| {
            let mut counts = values.values();
            let first = counts.next().copied().unwrap_or(0);
            counts.any(|c| *c != first)
        })
        .map(|((domain, hop), values)| {
            let counts: Vec<String> = values.iter().map(|(v, n)| format!("{v} {n}")).collect();
            format!(
                "cell {domain}/{hop} has unbalanced values ({}); each value must occur equally often",
                counts.join(", ")
            )
        })
        .collect()
}

/// Counts per design axis, as `stats` prints them.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Stats {
    pub items: usize,
    pub hop_depth: BTreeMap<String, usize>,
    pub contradicted: BTreeMap<String, usize>,
    pub axis: BTreeMap<String, usize>,
    pub density: BTreeMap<String, usize>,
    pub confidence: BTreeMap<String, usize>,
    pub domain: BTreeMap<String, usize>,
    pub gold_axis: BTreeMap<String, usize>,
    pub gold_post_unknown: usize,
    pub sessions: BTreeMap<String, usize>,
}

impl Stats {
    pub fn of(items: &[ProbeItem]) -> Stats {
        let mut s = Stats {
            items: items.len(),
            ..Stats::default()
        };
        let bump = |m: &mut BTreeMap<String, usize>, k: String| *m.entry(k).or_default() += 1;
        for i in items {
            bump(&mut s.hop_depth, i.hop_depth.to_string());
            bump(&mut s.contradicted, i.contradicted.to_string());
            bump(&mut s.axis, i.axis.to_string());
            bump(&mut s.density, i.density.to_string());
            bump(&mut s.confidence, i.confidence.to_string());
            bump(&mut s.domain, i.domain.to_string());
            bump(&mut s.gold_axis, i.gold_axis.to_string());
            bump(&mut s.sessions, i.sessions.len().to_string());
            s.gold_post_unknown += usize::from(i.gold_post.is_unknown());
        }
        s
    }
}

/// Check a complete `probe_pit.json`.
pub fn check_pit(items: &[PitItem]) -> Vec<Finding> {
    let mut out = Findings(Vec::new());
    let mut seen = HashSet::new();
    let mut cells: BTreeMap<(Domain, Scenario, Density), usize> = BTreeMap::new();
    for item in items {
        let id = item.pit_id.as_str();
        if !seen.insert(id) {
            out.add(id, "pit_id", "duplicate id");
        }
        *cells
            .entry((item.domain, item.scenario, item.density))
            .or_default() += 1;
        check_pit_item(item, &mut out);
    }
    out.expect_eq(FILE, "items", items.len(), PIT_ITEMS);
    let queries: usize = items.iter().map(|i| i.queries.len()).sum();
    out.expect_eq(FILE, "queries", queries, PIT_QUERIES);
    for domain in [Domain::Employment, Domain::Residence] {
        for &scenario in Scenario::ALL {
            for &density in Density::ALL {
                let have = cells
                    .get(&(domain, scenario, density))
                    .copied()
                    .unwrap_or(0);
                if have != 1 {
                    out.add(
                        FILE,
                        "cells",
                        format!("cell {domain}/{scenario}/{density} has {have} items, expected 1"),
                    );
                }
            }
        }
    }
    out.0
}

fn check_pit_item(item: &PitItem, out: &mut Findings) {
    let id = item.pit_id.as_str();
    let n = item.sessions.len();
    if item.oracle_facts.len() != n || item.oracle_retractions.len() != n {
        out.add(id, "oracle_facts", "not parallel to sessions");
        return;
    }
    check_session_dates(item, out);
    check_pit_design(item, out);
    let records = match replay_pit(item) {
        Ok(r) => r,
        Err(e) => {
            out.add(id, &e.field, e.message);
            return;
        }
    };
    for (j, q) in item.queries.iter().enumerate() {
        check_pit_query(id, j, q, &records, out);
    }
}

/// Where session dates are given, one valid date per session.
fn check_session_dates(item: &PitItem, out: &mut Findings) {
    let id = item.pit_id.as_str();
    if let Some(dates) = &item.session_dates {
        out.expect_eq(id, "session_dates", dates.len(), item.sessions.len());
        for (j, d) in dates.iter().enumerate() {
            if let Err(e) = check_date(d, &format!("session_dates[{j}]")) {
                out.add(id, &e.field, e.message);
            }
        }
    }
}

/// Three events, laid out as the density says, with the correction (if any) second,
/// and a query before any of them.
fn check_pit_design(item: &PitItem, out: &mut Findings) {
    let id = item.pit_id.as_str();
    let n = item.sessions.len();
    let events: usize = item.oracle_facts.iter().map(Vec::len).sum();
    out.expect_eq(id, "oracle_facts", events, 3);
    let want_sessions = match item.density {
        Density::Adjacent => 3,
        Density::Distant => 5,
    };
    if item.density == Density::Adjacent {
        out.expect_eq(id, "sessions", n, want_sessions);
    } else if n < want_sessions {
        out.add(
            id,
            "sessions",
            format!("{n} sessions; distant items need a filler between events"),
        );
    }
    let correction_at = item
        .oracle_facts
        .iter()
        .flatten()
        .position(|f| f.is_correction);
    let want_correction = match item.scenario {
        Scenario::DoubleUpdate => None,
        Scenario::CorrectionThenUpdate => Some(1),
    };
    out.expect_eq(id, "scenario", correction_at, want_correction);
    if !item
        .queries
        .iter()
        .any(|q| q.label.as_str() == BEFORE_ANY_FACT)
    {
        out.add(id, "queries", "no before_any_fact query");
    }
}

/// Query `j` has a valid reference time and the gold the replayed records give there.
fn check_pit_query(id: &str, j: usize, q: &PitQuery, records: &[Record], out: &mut Findings) {
    let field = format!("queries[{j}]");
    if let Err(e) = check_date(&q.reference_time, &format!("{field}.reference_time")) {
        out.add(id, &e.field, e.message);
        return;
    }
    if q.label.as_str() == BEFORE_ANY_FACT && !q.gold.is_unknown() {
        out.add(
            id,
            &format!("{field}.gold"),
            "before_any_fact must be \"unknown\"",
        );
    }
    match as_of(records, &q.reference_time) {
        Ok(g) => {
            if loose_key(g.as_str()) != loose_key(q.gold.as_str()) {
                out.add(
                    id,
                    &format!("{field}.gold"),
                    format!(
                        "is {:?}, the facts give {:?} at {}",
                        q.gold.as_str(),
                        g.as_str(),
                        q.reference_time
                    ),
                );
            }
        }
        Err(e) => out.add(id, &format!("{field}.gold"), e.message),
    }
}
