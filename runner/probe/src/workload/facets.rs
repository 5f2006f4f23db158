//! Each planned question's facets and reference for the HTML report: the journal holds
//! only the item id, the Probe set holds the rest.

use crate::place::Place;
use crate::record::{Gold, PitItem, ProbeItem, Session};
use crate::render::{session_date, Phase, Question};
use crate::report::facets::{self as f, ProbeFacts, QuestionFacts, POINT_IN_TIME};
use crate::workload::ProbeWorkload;
use serde_json::{json, Value};

/// The conversation a question was asked after, as the sample browser shows it: each
/// session with its date and turns, the contradicting one marked, and when the question
/// was asked (`asked`).
fn conversation(
    sessions: &[Session],
    dates: Option<&[String]>,
    mark_last: Option<String>,
    asked: &str,
) -> Value {
    let n = sessions.len();
    let sessions: Vec<Value> = sessions
        .iter()
        .enumerate()
        .map(|(i, turns)| {
            let date = dates
                .and_then(|d| d.get(i).cloned())
                .unwrap_or_else(|| session_date(i));
            let mark = if i + 1 == n { mark_last.clone() } else { None };
            json!({"title": format!("Session {} ({date})", i + 1), "turns": turns, "mark": mark})
        })
        .collect();
    json!({"sessions": sessions, "asked": asked})
}

fn core_conversation(item: &ProbeItem, phase: Phase) -> Value {
    let contradicted = item.contradicted.to_string();
    let article = if contradicted.starts_with('a') {
        "an"
    } else {
        "a"
    };
    let mark = format!(
        "the contradicting turn: {article} {contradicted} fact, {}",
        match item.axis.to_string().as_str() {
            "update" => "updated (the world changed)",
            _ => "corrected (the earlier statement was wrong)",
        }
    );
    let asked = match phase {
        Phase::Pre => "asked before the contradicting turn",
        Phase::Post => "asked after the contradicting turn",
        Phase::Followup => {
            "asked after the contradicting turn, with the chain's statements to mark"
        }
    };
    conversation(&item.sessions, None, Some(mark), asked)
}

fn gold_kind(g: &Gold) -> &'static str {
    if g.is_unknown() {
        "unknown"
    } else {
        "value"
    }
}

fn pair(name: &str, value: impl ToString) -> (String, String) {
    (name.to_string(), value.to_string())
}

fn core_facts(item: &ProbeItem, phase: Phase) -> QuestionFacts {
    let mut facets = vec![
        pair(f::QUESTION, phase.as_str()),
        pair(f::HOP, item.hop_depth),
        pair(f::DOMAIN, item.domain),
        pair(f::AXIS, item.axis),
        pair(f::CONTRADICTED, item.contradicted),
        pair(f::DENSITY, item.density),
        pair(f::CONFIDENCE, item.confidence),
    ];
    let reference = match phase {
        Phase::Pre | Phase::Post => {
            let gold = if phase == Phase::Pre {
                &item.gold_pre
            } else {
                &item.gold_post
            };
            facets.push(pair(f::GOLD, gold_kind(gold)));
            json!({"question": item.question, "gold": gold,
                "conversation": core_conversation(item, phase)})
        }
        Phase::Followup => json!({
            "question": "Which statements does the last turn make no longer current, and is it an update or a correction?",
            "gold_invalidated": item.gold_invalidated,
            "gold_axis": item.gold_axis,
            "conversation": core_conversation(item, phase),
        }),
    };
    QuestionFacts { facets, reference }
}

fn pit_facts(item: &PitItem, query: usize) -> QuestionFacts {
    let q = &item.queries[query];
    QuestionFacts {
        facets: vec![
            pair(f::QUESTION, POINT_IN_TIME),
            pair(f::DOMAIN, item.domain),
            pair(f::DENSITY, item.density),
            pair(f::HISTORY, item.scenario),
            pair(f::GOLD, gold_kind(&q.gold)),
        ],
        reference: json!({
            "question": item.question,
            "as_of": q.reference_time,
            "gold": q.gold,
            "conversation": conversation(
                &item.sessions,
                item.session_dates.as_deref(),
                None,
                &format!("asked as of {}", q.reference_time),
            ),
        }),
    }
}

impl ProbeWorkload {
    /// The facts of every planned question, keyed as the journal names it.
    pub(super) fn facts(&self) -> ProbeFacts {
        let mut out = ProbeFacts::default();
        for (job, q) in self.jobs.iter().zip(&self.questions) {
            let facts = match *q {
                Question::Core { item, phase } => core_facts(&self.set.core_items()[item], phase),
                Question::Pit { item, query } => pit_facts(&self.set.pit_items()[item], query),
            };
            if let Ok(place) = Place::of(&job.facets) {
                out.insert(place.item, place.label, facts);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::ProbePlan;
    use crate::report::facets::{FOLLOWUP, POST};
    use crate::set::ProbeSet;

    #[test]
    fn every_question_has_its_kind_and_items_facets_and_gold() {
        let set = ProbeSet::generated();
        let plan = ProbePlan {
            seeds: vec![42],
            limit_per_domain: Some(4),
            shard: None,
        };
        let w = ProbeWorkload::new(set.clone(), plan, 8, runner_core::protocol::SAMPLING).unwrap();
        let facts = w.facts();
        assert_eq!(facts.len(), w.jobs.len());
        let core = &set.core.as_ref().unwrap().items[0];
        let post = facts.get(core.probe_id.as_str(), "post").unwrap();
        let value = |name: &str| {
            post.facets
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        };
        assert_eq!(value(f::QUESTION).as_deref(), Some(POST));
        assert_eq!(value(f::HOP), Some(core.hop_depth.to_string()));
        assert_eq!(value(f::AXIS), Some(core.axis.to_string()));
        assert_eq!(value(f::DOMAIN), Some(core.domain.to_string()));
        assert_eq!(post.reference["gold"], core.gold_post.as_str());
        let follow = facts.get(core.probe_id.as_str(), FOLLOWUP).unwrap();
        assert_eq!(follow.reference["gold_axis"], core.gold_axis.as_str());
        let pit = &set.pit.as_ref().unwrap().items[0];
        let q = &pit.queries[1];
        let asked = facts.get(pit.pit_id.as_str(), q.label.as_str()).unwrap();
        assert_eq!(asked.facets[0], pair(f::QUESTION, POINT_IN_TIME));
        assert_eq!(asked.reference["gold"], q.gold.as_str());
        assert_eq!(asked.reference["as_of"], q.reference_time.as_str());
    }
}
