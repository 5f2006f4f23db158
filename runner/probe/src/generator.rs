//! Deterministic generator of `probe.json` and `probe_pit.json` from this project's own
//! wording (`wording.rs`). Golds are computed here from the template values; the checker
//! recomputes them independently from the oracle facts (`replay.rs`).
//!
//! The choices the published description leaves open are written down in `README.md`
//! beside this file.

use crate::chains::chain;
use crate::record::{
    Axis, Confidence, Contradicted, Density, Domain, Gold, HopDepth, OracleFact, OracleRetraction,
    PitId, PitItem, PitQuery, ProbeId, ProbeItem, QueryLabel, Relation, Scenario, Session,
    AFTER_FIRST_FACT, AFTER_SECOND_FACT, BEFORE_ANY_FACT,
};
use crate::wording::{capitalise, fill, wording, DomainWording, FILLERS, HEDGES};

/// SHA-256 of the generated `probe.json` and `probe_pit.json` (as written by
/// [`to_json`]). Any change to the wording, the entities or the rules changes them; a
/// test holds them so that such a change is made on purpose and versioned.
pub const PROBE_SHA256: &str = "605d63d52925da67d6e23b550c884058de92ca5fc320daebfd82f8157ebf1d04";
pub const PIT_SHA256: &str = "2f457ba138bf4e67adff602e21bcd9aa1215bdda951e43452a30552ae71cba8b";

/// Oracle confidence of a hedged root.
pub const HEDGED_CONFIDENCE: f64 = 0.6;

/// One design cell of the core set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cell {
    pub domain: Domain,
    pub hop: HopDepth,
    pub contradicted: Contradicted,
    pub axis: Axis,
    pub density: Density,
    pub confidence: Confidence,
}

/// The 168 cells in file order: domain, depth, contradicted, axis, density, confidence.
pub fn cells() -> Vec<Cell> {
    let mut out = Vec::with_capacity(168);
    for &domain in Domain::ALL {
        for hop in HopDepth::all() {
            for &contradicted in Contradicted::ALL {
                // A hop-1 item has no derived edge to contradict.
                if hop.get() == 1 && contradicted == Contradicted::Derived {
                    continue;
                }
                for &axis in Axis::ALL {
                    for &density in Density::ALL {
                        for &confidence in Confidence::ALL {
                            out.push(Cell {
                                domain,
                                hop,
                                contradicted,
                                axis,
                                density,
                                confidence,
                            });
                        }
                    }
                }
            }
        }
    }
    out
}

fn bit<T: PartialEq>(all: &[T], v: &T) -> usize {
    all.iter().position(|x| x == v).unwrap_or(0)
}

impl Cell {
    pub fn probe_id(&self) -> ProbeId {
        let rep = bit(Domain::ALL, &self.domain);
        ProbeId(format!(
            "{}-d{}-{}-{}-{}-{}-r{rep}",
            &self.domain.as_str()[..3],
            self.hop,
            &self.contradicted.as_str()[..3],
            &self.axis.as_str()[..4],
            &self.density.as_str()[..3],
            &self.confidence.as_str()[..2],
        ))
    }

    /// Which of the domain's four value chains the item uses. Within every
    /// (depth, contradicted, axis) group the four density x confidence cells take the
    /// four chains once each, so entities are balanced against those axes.
    pub fn chain_index(&self) -> usize {
        let c = bit(Confidence::ALL, &self.confidence);
        let d = bit(Density::ALL, &self.density);
        let a = bit(Axis::ALL, &self.axis);
        let x = bit(Contradicted::ALL, &self.contradicted);
        (c + 2 * d + a + x + usize::from(self.hop.get())) % 4
    }
}

fn fact(
    subject: &str,
    relation: &str,
    object: &str,
    confidence: f64,
    correction: bool,
) -> OracleFact {
    OracleFact {
        subject: subject.to_string(),
        relation: Relation(relation.to_string()),
        object: object.to_string(),
        valid_from: None,
        valid_to: None,
        confidence,
        is_correction: correction,
        premises: vec![],
    }
}

/// Snake-case entity key used as the subject of third-party facts.
pub fn entity_key(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        if c.is_alphanumeric() {
            out.extend(c.to_lowercase());
        } else if !out.ends_with('_') && !out.is_empty() {
            out.push('_');
        }
    }
    out.trim_end_matches('_').to_string()
}

/// The value that replaces V at hop k in a derived item: the next chain's hop-k value
/// that differs from V.
fn alternative(w: &DomainWording, chain_index: usize, hop: usize) -> &'static str {
    let v = w.chains[chain_index][hop];
    (1..4)
        .map(|step| w.chains[(chain_index + step) % 4][hop])
        .find(|alt| *alt != v)
        .expect("every hop pool holds two distinct values")
}

/// One statement with its oracle record.
struct Turn {
    text: String,
    facts: Vec<OracleFact>,
    retractions: Vec<OracleRetraction>,
}

/// The contradiction in an item's final session, with the golds it implies.
struct Contradiction {
    turn: Turn,
    gold_post: Gold,
    invalidated: Vec<&'static str>,
}

/// An item's sessions with their oracle facts and retractions, parallel.
struct Sessions {
    texts: Vec<Session>,
    facts: Vec<Vec<OracleFact>>,
    retractions: Vec<Vec<OracleRetraction>>,
}

pub fn generate_item(cell: Cell) -> ProbeItem {
    let w = wording(cell.domain);
    let values = w.chains[cell.chain_index()];
    let k = usize::from(cell.hop.get());
    let contradiction = contradiction(cell);
    let sessions = lay_out_sessions(cell, chain_turns(cell), contradiction.turn);
    ProbeItem {
        probe_id: cell.probe_id(),
        domain: cell.domain,
        hop_depth: cell.hop,
        contradicted: cell.contradicted,
        axis: cell.axis,
        density: cell.density,
        confidence: cell.confidence,
        sessions: sessions.texts,
        oracle_facts: sessions.facts,
        oracle_retractions: sessions.retractions,
        question: w.questions[k - 1].to_string(),
        gold_pre: Gold::Value(values[k - 1].to_string()),
        gold_post: contradiction.gold_post,
        gold_invalidated: contradiction
            .invalidated
            .into_iter()
            .map(|r| Relation(r.to_string()))
            .collect(),
        gold_axis: cell.axis,
    }
}

/// The statements of the chain, root first: the (possibly hedged) root, then one
/// third-party link per further hop.
fn chain_turns(cell: Cell) -> Vec<Turn> {
    let k = usize::from(cell.hop.get());
    let mut turns = Vec::with_capacity(k);
    turns.push(root_turn(cell));
    turns.extend((1..k).map(|hop| link_turn(cell, hop)));
    turns
}

fn root_turn(cell: Cell) -> Turn {
    let w = wording(cell.domain);
    let i = cell.chain_index();
    let root = w.chains[i][0];
    let (text, confidence) = match cell.confidence {
        Confidence::High => (capitalise(&fill(w.root, root, "", "", "")), 1.0),
        Confidence::Hedged => {
            let hedge = HEDGES[i % HEDGES.len()];
            (
                format!("{hedge}{}", fill(w.root, root, "", "", "")),
                HEDGED_CONFIDENCE,
            )
        }
    };
    Turn {
        text,
        facts: vec![fact(
            "user",
            chain(cell.domain).root,
            root,
            confidence,
            false,
        )],
        retractions: vec![],
    }
}

/// The third-party statement that leads from the chain's value at `hop - 1` to its value
/// at `hop` (both counted from 0, the root being 0).
fn link_turn(cell: Cell, hop: usize) -> Turn {
    let w = wording(cell.domain);
    let values = w.chains[cell.chain_index()];
    Turn {
        text: capitalise(&fill(
            w.links[hop - 1],
            values[hop],
            values[hop - 1],
            "",
            "",
        )),
        facts: vec![fact(
            &entity_key(values[hop - 1]),
            chain(cell.domain).links[hop - 1],
            values[hop],
            1.0,
            false,
        )],
        retractions: vec![],
    }
}

fn contradiction(cell: Cell) -> Contradiction {
    match cell.contradicted {
        Contradicted::Asserted => asserted_contradiction(cell),
        Contradicted::Derived => derived_contradiction(cell),
    }
}

/// A new root (or, where the domain's update names no replacement, a withdrawn one).
fn asserted_contradiction(cell: Cell) -> Contradiction {
    let w = wording(cell.domain);
    let rel = chain(cell.domain);
    let i = cell.chain_index();
    let k = usize::from(cell.hop.get());
    let correction = cell.axis == Axis::Correction;
    let old = w.chains[i][0];
    let new = w.replacements[i];
    let withdrawal = !correction && !w.root_update_names_replacement;
    let template = if correction {
        w.root_correction
    } else {
        w.root_update
    };
    let turn = if withdrawal {
        Turn {
            text: fill(template, "", "", old, ""),
            facts: vec![],
            retractions: vec![OracleRetraction {
                subject: "user".to_string(),
                relation: Relation(rel.root.to_string()),
                object: old.to_string(),
                was_wrong: false,
            }],
        }
    } else {
        Turn {
            text: fill(template, new, "", old, ""),
            facts: vec![fact("user", rel.root, new, 1.0, correction)],
            retractions: vec![],
        }
    };
    // Nothing is said about the new root's links, so beyond hop 1 the basis of the old
    // conclusion is gone and nothing replaces it.
    let gold_post = if k == 1 && !withdrawal {
        Gold::Value(new.to_string())
    } else {
        Gold::Unknown
    };
    Contradiction {
        turn,
        gold_post,
        invalidated: rel.invalidated_by_root(cell.hop),
    }
}

/// A user-level fact that overrides the probed hop-k conclusion; the links stay true.
fn derived_contradiction(cell: Cell) -> Contradiction {
    let w = wording(cell.domain);
    let i = cell.chain_index();
    let k = usize::from(cell.hop.get());
    let correction = cell.axis == Axis::Correction;
    let old = w.chains[i][k - 1];
    let new = alternative(w, i, k - 1);
    let templates = if correction {
        &w.derived_correction
    } else {
        &w.derived_update
    };
    let conclusion = chain(cell.domain).conclusion(cell.hop);
    Contradiction {
        turn: Turn {
            text: fill(templates[k - 2], new, "", old, ""),
            facts: vec![fact("user", conclusion, new, 1.0, correction)],
            retractions: vec![],
        },
        gold_post: Gold::Value(new.to_string()),
        invalidated: vec![conclusion],
    }
}

/// Adjacent: every chain statement in one session. Distant: each statement in its own
/// session followed by a filler. Either way the contradiction comes alone, last.
fn lay_out_sessions(cell: Cell, chain_turns: Vec<Turn>, event: Turn) -> Sessions {
    let mut out = Sessions {
        texts: Vec::new(),
        facts: Vec::new(),
        retractions: Vec::new(),
    };
    let mut push = |texts: Session, facts, retractions| {
        out.texts.push(texts);
        out.facts.push(facts);
        out.retractions.push(retractions);
    };
    match cell.density {
        Density::Adjacent => {
            let (texts, facts): (Vec<String>, Vec<Vec<OracleFact>>) =
                chain_turns.into_iter().map(|t| (t.text, t.facts)).unzip();
            push(texts, facts.into_iter().flatten().collect(), vec![]);
        }
        Density::Distant => {
            let filler_base = (cell.chain_index() + usize::from(cell.hop.get())) % FILLERS.len();
            for (j, t) in chain_turns.into_iter().enumerate() {
                push(vec![t.text], t.facts, t.retractions);
                let filler = FILLERS[(filler_base + j) % FILLERS.len()];
                push(vec![filler.to_string()], vec![], vec![]);
            }
        }
    }
    push(vec![event.text], event.facts, event.retractions);
    out
}

/// The 168 core items in file order.
pub fn generate_probe() -> Vec<ProbeItem> {
    cells().into_iter().map(generate_item).collect()
}

/// Event dates of the PIT histories: first fact, second fact, third fact.
pub const PIT_EVENT_DATES: [&str; 3] = ["2023-04-01", "2024-09-01", "2025-06-01"];
/// Reference times: before the first fact, between first and second, between second
/// and third.
pub const PIT_QUERY_TIMES: [(&str, &str); 3] = [
    (BEFORE_ANY_FACT, "2022-10-15"),
    (AFTER_FIRST_FACT, "2024-01-15"),
    (AFTER_SECOND_FACT, "2025-01-15"),
];

fn month_text(iso: &str) -> String {
    chrono::NaiveDate::parse_from_str(iso, "%Y-%m-%d")
        .map(|d| d.format("%B %Y").to_string())
        .unwrap_or_else(|_| iso.to_string())
}

/// The PIT domains.
pub const PIT_DOMAINS: [Domain; 2] = [Domain::Employment, Domain::Residence];

pub fn generate_pit_item(
    domain: Domain,
    scenario: Scenario,
    density: Density,
    index: usize,
) -> PitItem {
    let w = wording(domain);
    let values = PitValues::of(w, index);
    let correction = scenario == Scenario::CorrectionThenUpdate;
    let (sessions, facts) = pit_sessions(pit_events(domain, correction, &values), density, index);
    let n = sessions.len();
    PitItem {
        pit_id: PitId(format!(
            "pit-{}-{}-{}",
            &domain.as_str()[..3],
            if correction { "cor" } else { "dbl" },
            &density.as_str()[..3]
        )),
        domain,
        scenario,
        density,
        sessions,
        session_dates: None,
        oracle_facts: facts,
        oracle_retractions: vec![vec![]; n],
        question: w.questions[0].to_string(),
        queries: pit_queries(correction, &values),
    }
}

/// The three values the root slot of a PIT item takes: A, then B, then C.
struct PitValues {
    a: &'static str,
    b: &'static str,
    c: &'static str,
}

impl PitValues {
    fn of(w: &DomainWording, index: usize) -> PitValues {
        PitValues {
            a: w.chains[index % 4][0],
            b: w.replacements[index % 4],
            c: w.chains[(index + 1) % 4][0],
        }
    }
}

/// The three dated events of a PIT history, each a statement with its fact: A, then B
/// (an update, or a correction of A), then an update to C.
fn pit_events(domain: Domain, correction: bool, v: &PitValues) -> [(String, OracleFact); 3] {
    let w = wording(domain);
    let rel = chain(domain).root;
    let [t1, t2, t3] = PIT_EVENT_DATES;
    let dated = |object: &str, from: &str, correction: bool| OracleFact {
        valid_from: Some(from.to_string()),
        ..fact("user", rel, object, 1.0, correction)
    };
    [
        (
            capitalise(&fill(w.pit_first, v.a, "", "", &month_text(t1))),
            dated(v.a, t1, false),
        ),
        if correction {
            // "All along": the correction holds from the corrected record's start.
            (
                fill(w.pit_correction, v.b, "", v.a, &month_text(t1)),
                dated(v.b, t1, true),
            )
        } else {
            (
                fill(w.pit_update, v.b, "", v.a, &month_text(t2)),
                dated(v.b, t2, false),
            )
        },
        (
            fill(w.pit_update, v.c, "", v.b, &month_text(t3)),
            dated(v.c, t3, false),
        ),
    ]
}

/// One session per event; a distant item puts a filler before every event but the first.
fn pit_sessions(
    events: [(String, OracleFact); 3],
    density: Density,
    index: usize,
) -> (Vec<Session>, Vec<Vec<OracleFact>>) {
    let mut sessions = Vec::new();
    let mut facts = Vec::new();
    for (j, (text, f)) in events.into_iter().enumerate() {
        if density == Density::Distant && j > 0 {
            sessions.push(vec![FILLERS[(index + j) % FILLERS.len()].to_string()]);
            facts.push(vec![]);
        }
        sessions.push(vec![text]);
        facts.push(vec![f]);
    }
    (sessions, facts)
}

/// The queries at [`PIT_QUERY_TIMES`]: nothing yet, then A (or B, which a correction
/// made true all along), then B.
fn pit_queries(correction: bool, v: &PitValues) -> Vec<PitQuery> {
    let after_first = if correction { v.b } else { v.a };
    let golds = [
        Gold::Unknown,
        Gold::Value(after_first.to_string()),
        Gold::Value(v.b.to_string()),
    ];
    PIT_QUERY_TIMES
        .iter()
        .zip(golds)
        .map(|((label, time), gold)| PitQuery {
            label: QueryLabel(label.to_string()),
            reference_time: time.to_string(),
            gold,
        })
        .collect()
}

/// The 8 PIT items: domain, then scenario, then density.
pub fn generate_pit() -> Vec<PitItem> {
    let mut out = Vec::with_capacity(8);
    for domain in PIT_DOMAINS {
        for (s, &scenario) in Scenario::ALL.iter().enumerate() {
            for (d, &density) in Density::ALL.iter().enumerate() {
                out.push(generate_pit_item(domain, scenario, density, 2 * s + d));
            }
        }
    }
    out
}

/// Serialised files, byte-stable: pretty JSON with a trailing newline.
pub fn to_json<T: serde::Serialize>(items: &[T]) -> String {
    let mut s = serde_json::to_string_pretty(items).expect("records always serialise");
    s.push('\n');
    s
}
