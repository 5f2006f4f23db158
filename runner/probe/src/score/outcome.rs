//! Per-item and per-query scoring. Pure: no I/O, and any model text is accepted.

use crate::chains::{chain, AnswerKind};
use crate::record::{loose_key, Contradicted, Gold, PitItem, PitQuery, ProbeItem};
use crate::replay::{parse_date, replay_pit};
pub use crate::response::ProbeResponse;
use crate::score::claim::PromptEcho;
use crate::score::matching::{aliases, read_reply, Alias, Answer, Reading};
use serde::Serialize;

/// Outcome classes of one answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Named the gold value and nothing else.
    Correct,
    /// Abstained where the gold is "unknown" (abstention credit).
    Abstain,
    /// Answered the value before the final turn; at a point in time, a value that
    /// held earlier and had been superseded by the reference time.
    Stale,
    /// At a point in time: a value the conversation states only for a later time (a
    /// later or the current value given for an earlier date).
    Leak,
    /// Named another value, or several, where the gold is a value.
    Other,
    /// Abstained where the gold is a value.
    OverAbstain,
    /// Named a value where the gold is "unknown".
    Hallucinated,
    /// Words, but no claim about the asked relation: a restated prompt, pasted or
    /// invented turns, the user's words quoted back, or sentences that name no value
    /// and do not decline. Never credited, whatever values the copied text holds.
    NoAnswer,
    /// No words at all.
    Empty,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Correct => "correct",
            Outcome::Abstain => "abstain",
            Outcome::Stale => "stale",
            Outcome::Leak => "leak",
            Outcome::Other => "other",
            Outcome::OverAbstain => "over_abstain",
            Outcome::Hallucinated => "hallucinated",
            Outcome::NoAnswer => "no_answer",
            Outcome::Empty => "empty",
        }
    }

    pub fn is_correct(self) -> bool {
        matches!(self, Outcome::Correct | Outcome::Abstain)
    }

    /// A reply the scorer cannot use as an answer: none given, or no words.
    pub fn is_unusable(self) -> bool {
        matches!(self, Outcome::NoAnswer | Outcome::Empty)
    }
}

/// Score of the invalidation list of one item.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InvalidationScore {
    pub hits: usize,
    pub total: usize,
    /// Distinct relations predicted (the precision denominator).
    pub predicted: usize,
    /// For each chain position 1..=k of an asserted item: was it invalidated?
    pub positions: Vec<(u8, bool)>,
    /// Chain relations marked that should have stayed current.
    pub over: usize,
}

/// The score of one system response on one core item.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ItemScore {
    pub pre: Outcome,
    pub post: Outcome,
    pub pre_em: bool,
    pub post_em: bool,
    pub invalidation: Option<InvalidationScore>,
    pub axis_correct: Option<bool>,
}

/// Candidate values of a core item: gold_pre and gold_post where it is a value.
fn probe_candidates(item: &ProbeItem) -> (Vec<Vec<Alias>>, AnswerKind) {
    let kind = chain(item.domain).kind(item.hop_depth);
    let mut values = vec![item.gold_pre.as_str()];
    if let Some(v) = item.gold_post.value() {
        values.push(v);
    }
    (values.iter().map(|v| aliases(v, kind)).collect(), kind)
}

/// Classify one reading against a gold given as a candidate index (None = unknown).
fn classify(r: &Reading, gold: Option<usize>, stale: Option<usize>) -> Outcome {
    if r.empty && !r.abstained {
        return Outcome::Empty;
    }
    if r.no_answer() {
        return Outcome::NoAnswer;
    }
    match gold {
        Some(g) if r.names_only(g) => Outcome::Correct,
        Some(_) if r.abstained => Outcome::OverAbstain,
        None if r.abstained => Outcome::Abstain,
        _ if stale.is_some_and(|s| r.names_only(s)) => Outcome::Stale,
        None => Outcome::Hallucinated,
        Some(_) => Outcome::Other,
    }
}

pub fn score_probe_item(item: &ProbeItem, response: &ProbeResponse) -> ItemScore {
    let (candidates, _) = probe_candidates(item);
    let prompt = PromptEcho::probe(item);
    let pre_r = read_reply(&response.pre, &candidates, &prompt);
    let post_r = read_reply(&response.post, &candidates, &prompt);
    let post_gold = item.gold_post.value().map(|_| 1);
    ItemScore {
        pre: classify(&pre_r, Some(0), None),
        post: classify(&post_r, post_gold, Some(0)),
        pre_em: pre_r.exact.contains(&0) && pre_r.names_only(0),
        post_em: match post_gold {
            Some(g) => post_r.exact.contains(&g),
            None => post_r.abstained,
        },
        invalidation: response
            .invalidated
            .as_ref()
            .map(|pred| score_invalidation(item, pred)),
        axis_correct: if response.followup_failed {
            Some(false)
        } else {
            response.axis_pred.map(|a| a == item.gold_axis)
        },
    }
}

/// Loose relation names with a few plain-language synonyms.
fn canonical(relation: &str) -> String {
    let key = loose_key(relation);
    let mapped = match key.as_str() {
        "employer" | "job" | "company" | "workfor" => "works_at",
        "home" | "residence" | "livein" | "city" => "lives_in",
        "race" | "goalrace" | "trainingfor" => "training_for",
        "timezone" | "worktimezone" => "work_timezone",
        "workplace" | "officecity" | "workcity" => "workplace_city",
        "utility" | "powerutility" | "electricityprovider" => "home_utility",
        "plan" | "trainingplan" => "training_plan",
        _ => return key,
    };
    loose_key(mapped)
}

fn score_invalidation(item: &ProbeItem, predicted: &[String]) -> InvalidationScore {
    let mut pred: Vec<String> = predicted.iter().map(|p| canonical(p)).collect();
    pred.sort();
    pred.dedup();
    let gold: Vec<String> = item
        .gold_invalidated
        .iter()
        .map(|g| loose_key(g.as_str()))
        .collect();
    let hits = gold.iter().filter(|g| pred.contains(g)).count();
    let c = chain(item.domain);
    let positions = if item.contradicted == Contradicted::Asserted {
        item.gold_invalidated
            .iter()
            .filter_map(|g| {
                c.position(g.as_str())
                    .map(|p| (p, pred.contains(&loose_key(g.as_str()))))
            })
            .collect()
    } else {
        vec![]
    };
    let chain_rel: Vec<String> = c
        .relations_up_to(item.hop_depth)
        .iter()
        .map(|r| loose_key(r))
        .collect();
    let mut over: Vec<&String> = pred
        .iter()
        .filter(|p| chain_rel.contains(p) && !gold.contains(p))
        .collect();
    over.dedup();
    InvalidationScore {
        hits,
        total: gold.len(),
        predicted: pred.len(),
        positions,
        over: over.len(),
    }
}

/// The score of one PIT query.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct QueryScore {
    pub outcome: Outcome,
    /// Named the value a correction removed (the first value of a correction history).
    pub retracted_leak: bool,
    /// Named the final, current value at a historical reference time.
    pub current_leak: bool,
}

/// Values of the root slot in the order they were stated.
pub fn pit_values(item: &PitItem) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for f in item.oracle_facts.iter().flatten() {
        if !out.iter().any(|v| loose_key(v) == loose_key(&f.object)) {
            out.push(f.object.clone());
        }
    }
    out
}

pub fn score_pit_query(item: &PitItem, query: &PitQuery, answer: &Answer) -> QueryScore {
    let values = pit_values(item);
    let candidates: Vec<Vec<Alias>> = values
        .iter()
        .map(|v| aliases(v, AnswerKind::Name))
        .collect();
    let prompt = PromptEcho::pit(item);
    let r = read_reply(answer, &candidates, &prompt);
    let gold = match &query.gold {
        Gold::Unknown => None,
        Gold::Value(v) => values.iter().position(|x| loose_key(x) == loose_key(v)),
    };
    let outcome = match (&query.gold, gold) {
        // A gold outside the stated values can only be named by text that matches it.
        (Gold::Value(v), None) => {
            let extra = [aliases(v, AnswerKind::Name)];
            if read_reply(answer, &extra, &prompt).names_only(0) && r.mentioned.is_empty() {
                Outcome::Correct
            } else {
                classify(&r, Some(usize::MAX), None)
            }
        }
        _ => classify(&r, gold, None),
    };
    let outcome = match outcome {
        Outcome::Other | Outcome::Hallucinated => match pit_timing(item, query, &values, &r) {
            Some(Timing::Earlier) => Outcome::Stale,
            Some(Timing::Later) => Outcome::Leak,
            None => outcome,
        },
        o => o,
    };
    let corrected_first = item.oracle_facts.iter().flatten().any(|f| f.is_correction);
    QueryScore {
        outcome,
        retracted_leak: corrected_first && !values.is_empty() && r.mentioned.contains(&0),
        current_leak: values.len() > 1 && r.mentioned.contains(&(values.len() - 1)),
    }
}

/// When the one value a reply names holds, relative to a query's reference time.
enum Timing {
    /// It held before the reference time and had ended by then (not voided).
    Earlier,
    /// It holds only from after the reference time.
    Later,
}

/// The timing of the single value `r` names, from the replayed facts; `None` when it
/// names several, none, or a value the facts do not date.
fn pit_timing(item: &PitItem, query: &PitQuery, values: &[String], r: &Reading) -> Option<Timing> {
    let named = match r.mentioned.iter().collect::<Vec<_>>().as_slice() {
        [one] if !r.names_other => values.get(**one)?,
        _ => return None,
    };
    let records = replay_pit(item).ok()?;
    let t = parse_date(&query.reference_time, "reference_time").ok()?;
    let own: Vec<_> = records
        .iter()
        .filter(|x| loose_key(&x.object) == loose_key(named))
        .collect();
    if own.is_empty() {
        return None;
    }
    // A value a correction voided was still stated for its dates: before them it is a
    // leak; after them it is a retracted value (see `retracted_leak`), not a stale one.
    if own.iter().all(|x| x.start > t) {
        Some(Timing::Later)
    } else if own.iter().all(|x| !x.void && x.end.is_some_and(|e| e <= t)) {
        Some(Timing::Earlier)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generator::{generate_pit, generate_probe};
    use crate::record::{Gold, Scenario};

    fn item(pred: impl Fn(&ProbeItem) -> bool) -> ProbeItem {
        generate_probe()
            .into_iter()
            .find(|i| pred(i))
            .expect("such an item exists")
    }

    fn post(item: &ProbeItem, text: &str) -> ItemScore {
        score_probe_item(
            item,
            &ProbeResponse {
                pre: Answer::text(item.gold_pre.as_str()),
                post: Answer::text(text),
                ..ProbeResponse::default()
            },
        )
    }

    fn derived() -> ProbeItem {
        item(|i| i.contradicted == Contradicted::Derived && i.hop_depth.get() == 2)
    }

    #[test]
    fn naming_both_old_and_new_value_is_not_correct() {
        let it = derived();
        let (old, new) = (it.gold_pre.as_str(), it.gold_post.as_str());
        let s = post(&it, &format!("{old} or {new}"));
        assert_eq!(s.post, Outcome::Other);
        assert!(!s.post_em);
        assert_eq!(
            post(&it, &format!("It is {new} now.")).post,
            Outcome::Correct
        );
        assert!(post(&it, new).post_em);
        assert!(!post(&it, &format!("It is {new} now.")).post_em);
    }

    #[test]
    fn old_value_is_stale_and_a_third_value_is_other() {
        let it = derived();
        assert_eq!(post(&it, it.gold_pre.as_str()).post, Outcome::Stale);
        assert_eq!(post(&it, "Reykjavik").post, Outcome::Other);
        assert_eq!(post(&it, "I don't know").post, Outcome::OverAbstain);
        assert_eq!(post(&it, "").post, Outcome::Empty);
    }

    #[test]
    fn abstention_gets_credit_only_when_the_gold_is_unknown() {
        let it = item(|i| i.gold_post.is_unknown() && i.hop_depth.get() == 3);
        assert_eq!(
            post(&it, "I can't determine that any more.").post,
            Outcome::Abstain
        );
        assert_eq!(post(&it, "unknown").post, Outcome::Abstain);
        let flagged = score_probe_item(
            &it,
            &ProbeResponse {
                post: Answer::abstention(),
                ..ProbeResponse::default()
            },
        );
        assert_eq!(flagged.post, Outcome::Abstain);
        assert!(flagged.post_em);
        // A hedge that names the old value is scored as that value.
        let hedge = format!("Not sure, probably {}", it.gold_pre);
        assert_eq!(post(&it, &hedge).post, Outcome::Stale);
        assert_eq!(post(&it, "Mars Base One").post, Outcome::Hallucinated);
        assert!(Outcome::Abstain.is_correct() && !Outcome::Hallucinated.is_correct());
    }

    #[test]
    fn daylight_saving_question_accepts_yes_and_no() {
        let it = item(|i| {
            i.hop_depth.get() == 4
                && i.contradicted == Contradicted::Derived
                && i.domain == crate::record::Domain::Employment
        });
        let gold_no =
            crate::score::normalize::normalize(it.gold_post.as_str()).contains("standard");
        let (right, wrong) = if gold_no {
            ("No, it doesn't.", "Yes.")
        } else {
            ("Yes, it does.", "No.")
        };
        assert_eq!(post(&it, right).post, Outcome::Correct, "{}", it.gold_post);
        assert_eq!(post(&it, wrong).post, Outcome::Stale);
    }

    #[test]
    fn invalidation_recall_and_over_invalidation() {
        let it = item(|i| i.contradicted == Contradicted::Asserted && i.hop_depth.get() == 3);
        let s = score_probe_item(
            &it,
            &ProbeResponse {
                invalidated: Some(vec![it.gold_invalidated[0].to_string()]),
                ..ProbeResponse::default()
            },
        );
        let inv = s.invalidation.unwrap();
        assert_eq!((inv.hits, inv.total, inv.over), (1, 3, 0));
        assert_eq!(inv.positions, vec![(1, true), (2, false), (3, false)]);
        let d = derived();
        let root = chain(d.domain).root.to_string();
        let s = score_probe_item(
            &d,
            &ProbeResponse {
                invalidated: Some(vec![root, d.gold_invalidated[0].to_string().to_uppercase()]),
                ..ProbeResponse::default()
            },
        );
        let inv = s.invalidation.unwrap();
        assert_eq!((inv.hits, inv.total, inv.over), (1, 1, 1));
    }

    #[test]
    fn pit_retracted_and_current_value_leaks() {
        let items = generate_pit();
        let it = items
            .iter()
            .find(|i| i.scenario == Scenario::CorrectionThenUpdate)
            .unwrap();
        let values = pit_values(it);
        let q = &it.queries[1];
        assert_eq!(q.gold, Gold::Value(values[1].clone()));
        let s = score_pit_query(it, q, &Answer::text(&values[0]));
        assert_eq!(s.outcome, Outcome::Other);
        assert!(s.retracted_leak && !s.current_leak);
        let s = score_pit_query(it, q, &Answer::text(&values[2]));
        assert!(s.current_leak && !s.retracted_leak);
        assert_eq!(s.outcome, Outcome::Leak);
        assert_eq!(
            score_pit_query(it, q, &Answer::text(&values[1])).outcome,
            Outcome::Correct
        );
        let before = &it.queries[0];
        assert_eq!(
            score_pit_query(it, before, &Answer::text("Nothing yet, unknown")).outcome,
            Outcome::Abstain
        );
        // A value stated later, given for a date before any fact, leaks it (it was
        // `hallucinated` before: it is not invented). So does the voided first value.
        assert_eq!(
            score_pit_query(it, before, &Answer::text(&values[0])).outcome,
            Outcome::Leak
        );
        assert_eq!(
            score_pit_query(it, before, &Answer::text("Zanzibar Corp")).outcome,
            Outcome::Hallucinated
        );
    }

    #[test]
    fn pit_superseded_value_is_stale_and_a_later_one_leaks() {
        let items = generate_pit();
        let it = items
            .iter()
            .find(|i| i.scenario == Scenario::DoubleUpdate)
            .unwrap();
        let values = pit_values(it);
        let outcome =
            |j: usize, text: &str| score_pit_query(it, &it.queries[j], &Answer::text(text)).outcome;
        assert_eq!(it.queries[2].gold, Gold::Value(values[1].clone()));
        // After the second fact, the first (superseded) value is stale, not `other`.
        assert_eq!(outcome(2, &values[0]), Outcome::Stale);
        assert_eq!(outcome(2, &values[1]), Outcome::Correct);
        assert_eq!(outcome(2, &values[2]), Outcome::Leak);
        // Before any fact, every stated value is a leak.
        for v in &values {
            assert_eq!(outcome(0, v), Outcome::Leak, "{v}");
        }
        // Between the first and second facts, the second value leaks.
        assert_eq!(outcome(1, &values[1]), Outcome::Leak);
        assert_eq!(outcome(1, &values[0]), Outcome::Correct);
    }

    #[test]
    fn random_text_never_makes_scoring_panic() {
        use runner_core::stats::bootstrap::SplitMix64;
        // Pieces that exercise every branch: values, aliases, abstention phrases,
        // labels, punctuation and characters whose case mapping changes length.
        let items = generate_probe();
        let mut pieces: Vec<String> = items
            .iter()
            .flat_map(|i| [i.gold_pre.to_string(), i.gold_post.to_string()])
            .collect();
        pieces.extend(
            [
                "yes",
                "no",
                "it does not",
                "I don't know",
                "Answer:",
                "&",
                "/",
                "İ",
                "ß",
                "\n",
                " ",
                "the",
                "ﬁ",
                "\u{0}",
                "🙂",
            ]
            .map(str::to_string),
        );
        let mut rng = SplitMix64::new(11);
        for round in 0..2000 {
            let text: String = (0..rng.below(12))
                .map(|_| pieces[rng.below(pieces.len())].clone())
                .collect::<Vec<_>>()
                .join(if round % 2 == 0 { " " } else { "" });
            let item = &items[rng.below(items.len())];
            let s = post(item, &text);
            // Whatever the text, the outcome is consistent with the gold's kind.
            if item.gold_post.is_unknown() {
                assert!(
                    matches!(
                        s.post,
                        Outcome::Abstain
                            | Outcome::Stale
                            | Outcome::Hallucinated
                            | Outcome::NoAnswer
                            | Outcome::Empty
                    ),
                    "{text:?}"
                );
            } else {
                assert!(
                    !matches!(s.post, Outcome::Abstain | Outcome::Hallucinated),
                    "{text:?}"
                );
            }
        }
    }

    #[test]
    fn no_text_makes_scoring_panic() {
        let texts = [
            "",
            "\u{feff}",
            "   ",
            "?!",
            "unknown unknown",
            "ÄÖÜ ß ﬀ",
            "\n\n\t",
            "yes no yes no",
        ];
        for it in generate_probe() {
            for t in texts {
                let _ = post(&it, t);
            }
        }
        for it in generate_pit() {
            for q in &it.queries {
                for t in texts {
                    let _ = score_pit_query(&it, q, &Answer::text(t));
                }
            }
        }
    }
}
