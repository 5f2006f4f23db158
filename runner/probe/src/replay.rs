//! Recomputing the golds from the oracle facts alone.
//!
//! This is the reference semantics the checker compares every item against, and it is
//! independent of the generator: it never looks at the wording, the axes or the golds.
//! Entity names are compared loosely (case-folded alphanumerics), every slot is
//! functional, and confidence never gates belief.

use crate::chains::chain;
use crate::record::{
    loose_key, Axis, Contradicted, Gold, OracleFact, OracleRetraction, PitItem, ProbeItem,
};
use chrono::NaiveDate;

/// Everything the oracle facts of a core item imply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeReplay {
    /// Values along the chain as stated before the final session, root first.
    pub chain_values: Vec<String>,
    /// Relations along that chain, root first.
    pub chain_relations: Vec<String>,
    pub gold_pre: Gold,
    pub gold_post: Gold,
    /// Which edge the final session contradicts.
    pub contradicted: Contradicted,
    /// Correction when the final event says the old record was wrong all along.
    pub axis: Axis,
    /// The user-level relation the final event touches.
    pub event_relation: String,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("field `{field}`: {message}")]
pub struct ReplayError {
    pub field: String,
    pub message: String,
}

fn err(field: &str, message: impl Into<String>) -> ReplayError {
    ReplayError {
        field: field.to_string(),
        message: message.into(),
    }
}

const USER: &str = "user";

/// Replay a core item. Fails when the facts do not form a chain with one final event.
pub fn replay_probe(item: &ProbeItem) -> Result<ProbeReplay, ReplayError> {
    let n = item.oracle_facts.len();
    if n < 2 || item.oracle_retractions.len() != n {
        return Err(err(
            "oracle_facts",
            format!(
                "need at least 2 sessions of facts and as many retraction lists (have {n} and {})",
                item.oracle_retractions.len()
            ),
        ));
    }
    let before: Vec<&OracleFact> = item.oracle_facts[..n - 1].iter().flatten().collect();
    let (chain_values, chain_relations) = stated_chain(&before)?;
    let gold_pre = Gold::Value(chain_values.last().expect("chain is never empty").clone());
    let event = final_event(item, &chain_relations)?;
    Ok(ProbeReplay {
        chain_values,
        chain_relations,
        gold_pre,
        gold_post: event.gold_post,
        contradicted: event.contradicted,
        axis: event.axis,
        event_relation: event.relation,
    })
}

/// The chain as stated before the final session: its values and relations, root first.
fn stated_chain(before: &[&OracleFact]) -> Result<(Vec<String>, Vec<String>), ReplayError> {
    let root = before.iter().find(|f| f.subject == USER).ok_or_else(|| {
        err(
            "oracle_facts",
            "no user-level root fact before the final session",
        )
    })?;
    let mut chain_values = vec![root.object.clone()];
    let mut chain_relations = vec![root.relation.0.clone()];
    // Third-party links hang off the previous value; follow them until none is left.
    loop {
        let key = loose_key(chain_values.last().expect("chain is never empty"));
        let next = before
            .iter()
            .find(|f| f.subject != USER && loose_key(&f.subject) == key);
        match next {
            Some(f) if chain_values.len() < 8 => {
                chain_values.push(f.object.clone());
                chain_relations.push(f.relation.0.clone());
            }
            Some(_) => return Err(err("oracle_facts", "the chain of links does not end")),
            None => break,
        }
    }
    Ok((chain_values, chain_relations))
}

/// What the final session's one event does.
struct FinalEvent {
    relation: String,
    axis: Axis,
    gold_post: Gold,
    contradicted: Contradicted,
}

fn final_event(item: &ProbeItem, chain_relations: &[String]) -> Result<FinalEvent, ReplayError> {
    let n = item.oracle_facts.len();
    let final_facts = &item.oracle_facts[n - 1];
    let final_retractions = &item.oracle_retractions[n - 1];
    let events = final_facts.len() + final_retractions.len();
    if events != 1 {
        return Err(err(
            "oracle_facts",
            format!("the final session must hold exactly one event, it holds {events}"),
        ));
    }
    match final_facts.first() {
        Some(f) => final_fact(f, chain_relations, item),
        None => final_retraction(&final_retractions[0], &chain_relations[0]),
    }
}

/// A final fact on the root relation asserts a new root; on any other relation it
/// overrides the derived conclusion.
fn final_fact(
    f: &OracleFact,
    chain_relations: &[String],
    item: &ProbeItem,
) -> Result<FinalEvent, ReplayError> {
    if f.subject != USER {
        return Err(err(
            "oracle_facts",
            "the final event must be about the user",
        ));
    }
    let axis = if f.is_correction {
        Axis::Correction
    } else {
        Axis::Update
    };
    let (gold_post, contradicted) = if f.relation.0 == chain_relations[0] {
        // A new root: follow the same link relations from it, over every fact.
        let post = follow(&f.object, &chain_relations[1..], item);
        (post, Contradicted::Asserted)
    } else {
        (Gold::Value(f.object.clone()), Contradicted::Derived)
    };
    Ok(FinalEvent {
        relation: f.relation.0.clone(),
        axis,
        gold_post,
        contradicted,
    })
}

/// A final retraction withdraws the root and leaves nothing in its place.
fn final_retraction(r: &OracleRetraction, root_relation: &str) -> Result<FinalEvent, ReplayError> {
    if r.subject != USER || r.relation.0 != root_relation {
        return Err(err(
            "oracle_retractions",
            "a final retraction must withdraw the user's root fact",
        ));
    }
    let axis = if r.was_wrong {
        Axis::Correction
    } else {
        Axis::Update
    };
    Ok(FinalEvent {
        relation: r.relation.0.clone(),
        axis,
        gold_post: Gold::Unknown,
        contradicted: Contradicted::Asserted,
    })
}

/// Follow the link relations from a new root over all third-party facts of the item.
fn follow(root: &str, relations: &[String], item: &ProbeItem) -> Gold {
    let mut value = root.to_string();
    for rel in relations {
        let key = loose_key(&value);
        let next =
            item.oracle_facts.iter().flatten().find(|f| {
                f.subject != USER && loose_key(&f.subject) == key && &f.relation.0 == rel
            });
        match next {
            Some(f) => value = f.object.clone(),
            None => return Gold::Unknown,
        }
    }
    Gold::Value(value)
}

impl ProbeReplay {
    /// Relations the final event invalidates, using the domain's chain names.
    pub fn invalidated(&self, item: &ProbeItem) -> Vec<String> {
        let c = chain(item.domain);
        match self.contradicted {
            Contradicted::Asserted => c
                .invalidated_by_root(item.hop_depth)
                .into_iter()
                .map(str::to_string)
                .collect(),
            Contradicted::Derived => vec![self.event_relation.clone()],
        }
    }
}

/// One validity record of the PIT slot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub object: String,
    pub start: NaiveDate,
    /// Exclusive end; `None` is open.
    pub end: Option<NaiveDate>,
    /// Set when a correction says it never held.
    pub void: bool,
}

/// Replay the root slot of a PIT item in valid time with the latest transaction state.
pub fn replay_pit(item: &PitItem) -> Result<Vec<Record>, ReplayError> {
    let mut records: Vec<Record> = Vec::new();
    for (s, facts) in item.oracle_facts.iter().enumerate() {
        for (j, f) in facts.iter().enumerate() {
            let field = format!("oracle_facts[{s}][{j}]");
            let start = match &f.valid_from {
                Some(d) => parse_date(d, &format!("{field}.valid_from"))?,
                // A correction without a date inherits the corrected record's start.
                None if f.is_correction => records
                    .iter()
                    .rev()
                    .find(|r| !r.void)
                    .map(|r| r.start)
                    .ok_or_else(|| err(&field, "a correction with nothing to correct"))?,
                None => return Err(err(&format!("{field}.valid_from"), "missing date")),
            };
            let end = match &f.valid_to {
                Some(d) => Some(parse_date(d, &format!("{field}.valid_to"))?),
                None => None,
            };
            for r in records.iter_mut().filter(|r| !r.void) {
                let overlaps = r.end.is_none_or(|e| e > start);
                if !overlaps {
                    continue;
                }
                if !f.is_correction && r.start < start {
                    r.end = Some(start);
                } else {
                    // A correction voids what it overlaps; so does an update dated at or
                    // before the start of the record it supersedes.
                    r.void = true;
                }
            }
            records.push(Record {
                object: f.object.clone(),
                start,
                end,
                void: false,
            });
        }
        for r in item.oracle_retractions.get(s).into_iter().flatten() {
            for rec in records
                .iter_mut()
                .filter(|x| !x.void && loose_key(&x.object) == loose_key(&r.object))
            {
                if r.was_wrong {
                    rec.void = true;
                } else if rec.end.is_none() {
                    // A retraction carries no date, so the interval it closes cannot be
                    // placed; the record then answers no as-of query.
                    rec.end = Some(rec.start);
                }
            }
        }
    }
    Ok(records)
}

/// What was true at `time` (an ISO date) according to the replayed records.
pub fn as_of(records: &[Record], time: &str) -> Result<Gold, ReplayError> {
    let t = parse_date(time, "reference_time")?;
    let live: Vec<&Record> = records
        .iter()
        .filter(|r| !r.void && r.start <= t && r.end.is_none_or(|e| t < e))
        .collect();
    match live.as_slice() {
        [] => Ok(Gold::Unknown),
        [one] => Ok(Gold::Value(one.object.clone())),
        many => Err(err(
            "oracle_facts",
            format!("{} records hold at {time}", many.len()),
        )),
    }
}

/// Parse a strict `YYYY-MM-DD` date.
pub fn parse_date(d: &str, field: &str) -> Result<NaiveDate, ReplayError> {
    let strict = d.len() == 10 && d.as_bytes()[4] == b'-' && d.as_bytes()[7] == b'-';
    NaiveDate::parse_from_str(d, "%Y-%m-%d")
        .ok()
        .filter(|_| strict)
        .ok_or_else(|| err(field, format!("`{d}` is not an ISO date (YYYY-MM-DD)")))
}

pub fn check_date(d: &str, field: &str) -> Result<(), ReplayError> {
    parse_date(d, field).map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generator::{generate_pit, generate_probe};
    use crate::record::{Relation, Scenario};

    fn pit(scenario: Scenario) -> PitItem {
        generate_pit()
            .into_iter()
            .find(|i| i.scenario == scenario)
            .unwrap()
    }

    fn values(item: &PitItem) -> Vec<String> {
        item.oracle_facts
            .iter()
            .flatten()
            .map(|f| f.object.clone())
            .collect()
    }

    #[test]
    fn update_closes_and_correction_rewrites_the_past() {
        let d = pit(Scenario::DoubleUpdate);
        let v = values(&d);
        let r = replay_pit(&d).unwrap();
        assert_eq!(as_of(&r, "2020-01-01").unwrap(), Gold::Unknown);
        assert_eq!(as_of(&r, "2024-01-15").unwrap(), Gold::Value(v[0].clone()));
        assert_eq!(as_of(&r, "2025-01-15").unwrap(), Gold::Value(v[1].clone()));
        assert_eq!(as_of(&r, "2030-01-01").unwrap(), Gold::Value(v[2].clone()));

        let c = pit(Scenario::CorrectionThenUpdate);
        let v = values(&c);
        let r = replay_pit(&c).unwrap();
        assert_eq!(as_of(&r, "2024-01-15").unwrap(), Gold::Value(v[1].clone()));
        assert_eq!(as_of(&r, "2030-01-01").unwrap(), Gold::Value(v[2].clone()));
    }

    #[test]
    fn dateless_correction_inherits_the_corrected_start() {
        let mut c = pit(Scenario::CorrectionThenUpdate);
        let s = c
            .oracle_facts
            .iter()
            .position(|f| f.iter().any(|x| x.is_correction))
            .unwrap();
        c.oracle_facts[s][0].valid_from = None;
        let v = values(&c);
        let r = replay_pit(&c).unwrap();
        assert_eq!(as_of(&r, "2023-05-01").unwrap(), Gold::Value(v[1].clone()));
    }

    #[test]
    fn wrong_retraction_voids_the_record() {
        let mut d = pit(Scenario::DoubleUpdate);
        let first = values(&d)[0].clone();
        d.oracle_retractions[1].push(OracleRetraction {
            subject: "user".into(),
            relation: Relation("works_at".into()),
            object: first,
            was_wrong: true,
        });
        let r = replay_pit(&d).unwrap();
        assert_eq!(as_of(&r, "2024-01-15").unwrap(), Gold::Unknown);
    }

    #[test]
    fn bad_dates_are_reported_with_their_field() {
        let mut d = pit(Scenario::DoubleUpdate);
        d.oracle_facts[0][0].valid_from = Some("April 2023".into());
        assert_eq!(
            replay_pit(&d).unwrap_err().field,
            "oracle_facts[0][0].valid_from"
        );
        d.oracle_facts[0][0].valid_from = Some("2023-4-1".into());
        assert!(replay_pit(&d).is_err());
        assert!(as_of(&[], "15/01/2024").is_err());
    }

    #[test]
    fn final_session_must_hold_one_event() {
        let mut item = generate_probe().remove(0);
        let extra = item.oracle_facts.last().unwrap()[0].clone();
        item.oracle_facts.last_mut().unwrap().push(extra);
        assert!(replay_probe(&item)
            .unwrap_err()
            .message
            .contains("exactly one event"));
        let mut item = generate_probe().remove(0);
        item.oracle_facts.iter_mut().for_each(Vec::clear);
        assert!(replay_probe(&item).is_err());
    }
}
