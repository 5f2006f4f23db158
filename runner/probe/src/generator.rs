//! Deterministic generator of `probe.json` and `probe_pit.json` from this project's own
//! wording (`wording.rs`). Golds are computed here from the template values; the checker
//! recomputes them independently from the oracle facts (`replay.rs`).
//!
//! The choices the published description leaves open are written down in `README.md`
//! beside this file.

use crate::chains::chain;
use crate::records::{
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

pub fn generate_item(cell: Cell) -> ProbeItem {
    let w = wording(cell.domain);
    let rel = chain(cell.domain);
    let i = cell.chain_index();
    let values = w.chains[i];
    let k = usize::from(cell.hop.get());

    let mut chain_turns = Vec::with_capacity(k);
    let root_text = match cell.confidence {
        Confidence::High => capitalise(&fill(w.root, values[0], "", "", "")),
        Confidence::Hedged => {
            let hedge = HEDGES[i % HEDGES.len()];
            format!("{hedge}{}", fill(w.root, values[0], "", "", ""))
        }
    };
    let root_conf = match cell.confidence {
        Confidence::High => 1.0,
        Confidence::Hedged => HEDGED_CONFIDENCE,
    };
    chain_turns.push(Turn {
        text: root_text,
        facts: vec![fact("user", rel.root, values[0], root_conf, false)],
        retractions: vec![],
    });
    for hop in 1..k {
        chain_turns.push(Turn {
            text: capitalise(&fill(
                w.links[hop - 1],
                values[hop],
                values[hop - 1],
                "",
                "",
            )),
            facts: vec![fact(
                &entity_key(values[hop - 1]),
                rel.links[hop - 1],
                values[hop],
                1.0,
                false,
            )],
            retractions: vec![],
        });
    }

    let correction = cell.axis == Axis::Correction;
    let gold_pre = values[k - 1].to_string();
    let (event, gold_post, invalidated) = match cell.contradicted {
        Contradicted::Asserted => {
            let old = values[0];
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
            // Nothing is said about the new root's links, so beyond hop 1 the basis of
            // the old conclusion is gone and nothing replaces it.
            let post = if k == 1 && !withdrawal {
                Gold::Value(new.to_string())
            } else {
                Gold::Unknown
            };
            (turn, post, rel.invalidated_by_root(cell.hop))
        }
        Contradicted::Derived => {
            let old = values[k - 1];
            let new = alternative(w, i, k - 1);
            let templates = if correction {
                &w.derived_correction
            } else {
                &w.derived_update
            };
            let conclusion = rel.conclusion(cell.hop);
            let turn = Turn {
                text: fill(templates[k - 2], new, "", old, ""),
                facts: vec![fact("user", conclusion, new, 1.0, correction)],
                retractions: vec![],
            };
            (turn, Gold::Value(new.to_string()), vec![conclusion])
        }
    };

    let filler_base = (i + k) % FILLERS.len();
    let mut sessions: Vec<(Session, Vec<OracleFact>, Vec<OracleRetraction>)> = Vec::new();
    match cell.density {
        Density::Adjacent => {
            let (texts, facts): (Vec<String>, Vec<Vec<OracleFact>>) =
                chain_turns.into_iter().map(|t| (t.text, t.facts)).unzip();
            sessions.push((texts, facts.into_iter().flatten().collect(), vec![]));
        }
        Density::Distant => {
            for (j, t) in chain_turns.into_iter().enumerate() {
                sessions.push((vec![t.text], t.facts, t.retractions));
                let filler = FILLERS[(filler_base + j) % FILLERS.len()];
                sessions.push((vec![filler.to_string()], vec![], vec![]));
            }
        }
    }
    sessions.push((vec![event.text], event.facts, event.retractions));

    let mut out_sessions = Vec::new();
    let mut out_facts = Vec::new();
    let mut out_retractions = Vec::new();
    for (s, f, r) in sessions {
        out_sessions.push(s);
        out_facts.push(f);
        out_retractions.push(r);
    }
    ProbeItem {
        probe_id: cell.probe_id(),
        domain: cell.domain,
        hop_depth: cell.hop,
        contradicted: cell.contradicted,
        axis: cell.axis,
        density: cell.density,
        confidence: cell.confidence,
        sessions: out_sessions,
        oracle_facts: out_facts,
        oracle_retractions: out_retractions,
        question: w.questions[k - 1].to_string(),
        gold_pre: Gold::Value(gold_pre),
        gold_post,
        gold_invalidated: invalidated
            .into_iter()
            .map(|r| Relation(r.to_string()))
            .collect(),
        gold_axis: cell.axis,
    }
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
    let rel = chain(domain).root;
    let a = w.chains[index % 4][0];
    let b = w.replacements[index % 4];
    let c = w.chains[(index + 1) % 4][0];
    let [t1, t2, t3] = PIT_EVENT_DATES;
    let dated = |object: &str, from: &str, correction: bool| OracleFact {
        valid_from: Some(from.to_string()),
        ..fact("user", rel, object, 1.0, correction)
    };
    let correction = scenario == Scenario::CorrectionThenUpdate;
    let events = [
        (
            capitalise(&fill(w.pit_first, a, "", "", &month_text(t1))),
            dated(a, t1, false),
        ),
        if correction {
            // "All along": the correction holds from the corrected record's start.
            (
                fill(w.pit_correction, b, "", a, &month_text(t1)),
                dated(b, t1, true),
            )
        } else {
            (
                fill(w.pit_update, b, "", a, &month_text(t2)),
                dated(b, t2, false),
            )
        },
        (
            fill(w.pit_update, c, "", b, &month_text(t3)),
            dated(c, t3, false),
        ),
    ];
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
    let after_first = if correction { b } else { a };
    let golds = [
        Gold::Unknown,
        Gold::Value(after_first.to_string()),
        Gold::Value(b.to_string()),
    ];
    let queries = PIT_QUERY_TIMES
        .iter()
        .zip(golds)
        .map(|((label, time), gold)| PitQuery {
            label: QueryLabel(label.to_string()),
            reference_time: time.to_string(),
            gold,
        })
        .collect();
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
        queries,
    }
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
