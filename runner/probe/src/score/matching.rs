//! Matching model text against gold values: aliases, whole-token mentions of the
//! item's candidate values, exact match, and abstention.
//!
//! Candidates are searched together, longest alias first, and a matched span hides
//! the shorter aliases inside it, so "it does not" is not also read as "it does", and
//! "Central Standard" would not count as a mention of "Central".

use crate::chains::AnswerKind;
use crate::score::abstention::{declines, denied};
use crate::score::assertion::{is_negation, names_a_value, negated, words, Word};
use crate::score::claim::{claims, Claims, PromptEcho};
use crate::score::normalize::{tokens, value_tokens};
use std::collections::BTreeSet;

/// Version of the alias rules; reports carry it because scores depend on it.
pub const ALIAS_VERSION: &str = "probe-aliases-1";
pub use crate::response::Answer;
pub use crate::score::abstention::ABSTENTION_VERSION;

/// One alias as normalised tokens. `leading_only` aliases (bare "yes"/"no") count only
/// as the first word of the answer, so "no idea" is not read as "no".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alias {
    pub tokens: Vec<String>,
    pub leading_only: bool,
}

fn alias(words: &[&str]) -> Alias {
    Alias {
        tokens: words.iter().map(|w| w.to_string()).collect(),
        leading_only: false,
    }
}

const YES: &[&[&str]] = &[
    &["observes", "dst"],
    &["observes", "daylight", "saving"],
    &["observes", "daylight", "savings"],
    &["does", "observe", "dst"],
    &["does", "observe", "daylight", "saving"],
    &["it", "does"],
    &["they", "do"],
];
const NO: &[&[&str]] = &[
    &["does", "not", "observe"],
    &["doesnt", "observe"],
    &["do", "not", "observe"],
    &["dont", "observe"],
    &["never", "observes"],
    &["stays", "on", "standard", "time"],
    &["stay", "on", "standard", "time"],
    &["standard", "time", "all", "year"],
    &["no", "daylight", "saving"],
    &["it", "does", "not"],
    &["it", "doesnt"],
    &["they", "do", "not"],
    &["they", "dont"],
];

/// Whether a daylight-saving policy phrase says the clocks never change.
fn is_no_dst(value_tokens: &[String]) -> bool {
    let text = value_tokens.join(" ");
    [
        "standard time",
        "no daylight",
        "not observe",
        "never observe",
        "doesnt observe",
    ]
    .iter()
    .any(|p| text.contains(p))
}

/// All aliases of a gold value: the value itself, its punctuation-free spelling, its
/// singular/plural twin, and the rules of its answer kind.
pub fn aliases(value: &str, kind: AnswerKind) -> Vec<Alias> {
    let base = value_tokens(value);
    if base.is_empty() {
        return vec![];
    }
    let mut out = vec![Alias {
        tokens: base.clone(),
        leading_only: false,
    }];
    // "Tempo Builder 16/45" also as "tempo builder 1645".
    let joined: Vec<String> = value
        .split_whitespace()
        .map(|w| value_tokens(w).concat())
        .filter(|w| !w.is_empty())
        .collect();
    let joined = value_tokens(&joined.join(" "));
    out.push(Alias {
        tokens: joined,
        leading_only: false,
    });
    let mut twin = base.clone();
    let last = twin.last_mut().expect("base is not empty");
    if last.chars().all(char::is_alphabetic) && last.chars().count() > 3 {
        if let Some(stem) = last.strip_suffix('s') {
            *last = stem.to_string();
        } else {
            last.push('s');
        }
        out.push(Alias {
            tokens: twin,
            leading_only: false,
        });
    }
    match kind {
        AnswerKind::Name => {}
        AnswerKind::TimeZone => {
            for suffix in [
                &["time"][..],
                &["time", "zone"],
                &["timezone"],
                &["standard", "time"],
            ] {
                let mut t = base.clone();
                t.extend(suffix.iter().map(|s| s.to_string()));
                out.push(Alias {
                    tokens: t,
                    leading_only: false,
                });
            }
        }
        AnswerKind::DstPolicy => {
            let (words, bare) = if is_no_dst(&base) {
                (NO, "no")
            } else {
                (YES, "yes")
            };
            out.extend(words.iter().map(|w| alias(w)));
            out.push(Alias {
                tokens: vec![bare.to_string()],
                leading_only: true,
            });
        }
    }
    out.dedup();
    out
}

/// How an answer reads against an item's candidates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reading {
    /// Indices of the candidates the answer's claims name (assert).
    pub mentioned: BTreeSet<usize>,
    /// Candidates the answer names only to deny them ("not Chicago", "you left X").
    pub denied: BTreeSet<usize>,
    /// Candidates the answer equals exactly after normalisation: all its claims, its
    /// first claim, or its `Answer:` label.
    pub exact: BTreeSet<usize>,
    /// Refusal to give a value: the flag, or, with no value asserted, a sentence that
    /// declines or a denied candidate.
    pub abstained: bool,
    /// A claim names a value that is none of the candidates.
    pub names_other: bool,
    /// The answer has no words at all.
    pub empty: bool,
}

impl Reading {
    /// Normalised match: names this candidate and no other.
    pub fn names_only(&self, candidate: usize) -> bool {
        self.mentioned.len() == 1 && self.mentioned.contains(&candidate)
    }

    /// Words, but no claim about the asked relation: no value, and no decline.
    pub fn no_answer(&self) -> bool {
        !self.empty && !self.abstained && !self.names_other && self.mentioned.is_empty()
    }
}

fn find(hay: &[Word], needle: &[String], masked: &[bool], leading_only: bool) -> Vec<usize> {
    if needle.is_empty() || needle.len() > hay.len() {
        return vec![];
    }
    let last = if leading_only {
        0
    } else {
        hay.len() - needle.len()
    };
    (0..=last)
        .filter(|&i| {
            hay[i..i + needle.len()]
                .iter()
                .zip(needle)
                .all(|(w, n)| w.text == *n)
                && !masked[i..i + needle.len()].iter().any(|m| *m)
        })
        .collect()
}

/// Read an answer against candidate values (each with its aliases), with no prompt to
/// recognise copies of.
pub fn read(answer: &Answer, candidates: &[Vec<Alias>]) -> Reading {
    read_reply(answer, candidates, &PromptEcho::default())
}

/// What one claim sentence says about the candidates.
#[derive(Default)]
struct SentenceReading {
    mentioned: BTreeSet<usize>,
    denied: BTreeSet<usize>,
    declines: bool,
    names_other: bool,
}

fn read_sentence(sentence: &str, all: &[(usize, &Alias)], first: bool) -> SentenceReading {
    let ws = words(sentence);
    let plain: Vec<String> = ws.iter().map(|w| w.text.clone()).collect();
    let mut masked = vec![false; ws.len()];
    let mut out = SentenceReading::default();
    for (i, a) in all {
        let hits = find(&ws, &a.tokens, &masked, a.leading_only);
        for start in &hits {
            masked[*start..*start + a.tokens.len()]
                .iter_mut()
                .for_each(|m| *m = true);
        }
        // An alias that itself negates ("does not observe") is not negated by itself.
        let self_negating = a.tokens.iter().any(|t| is_negation(t));
        for start in &hits {
            if denied(&plain, *start, a.tokens.len()) {
                out.denied.insert(*i);
            } else if self_negating || !negated(&ws, *start) {
                out.mentioned.insert(*i);
            }
        }
    }
    out.declines = declines(&plain);
    out.names_other =
        out.mentioned.is_empty() && !out.declines && names_a_value(&ws, &masked, first);
    out
}

/// Read a reply as a grader does: its claims only (see [`claims`]), each sentence for
/// the values it asserts, denies, or declines to give.
pub fn read_reply(answer: &Answer, candidates: &[Vec<Alias>], prompt: &PromptEcho) -> Reading {
    let mut all: Vec<(usize, &Alias)> = candidates
        .iter()
        .enumerate()
        .flat_map(|(i, a)| a.iter().map(move |x| (i, x)))
        .collect();
    // A reply that is one of the values word for word names it, though the user said
    // those words first ("stays on standard time all year"): a value is not an echo.
    let bare = value_tokens(answer.text.trim());
    let claims = if !bare.is_empty() && all.iter().any(|(_, a)| a.tokens == bare) {
        Claims {
            sentences: vec![answer.text.trim().to_string()],
            labelled: false,
        }
    } else {
        claims(&answer.text, prompt)
    };
    all.sort_by_key(|(_, a)| std::cmp::Reverse(a.tokens.len()));
    let mut mentioned = BTreeSet::new();
    let mut denials = BTreeSet::new();
    let (mut declined, mut names_other) = (false, false);
    for (k, s) in claims.sentences.iter().enumerate() {
        let r = read_sentence(s, &all, k == 0);
        mentioned.extend(r.mentioned);
        denials.extend(r.denied);
        declined |= r.declines;
        names_other |= r.names_other;
    }
    let denials: BTreeSet<usize> = denials.difference(&mentioned).copied().collect();
    let mut spans = vec![value_tokens(&claims.text())];
    if let Some(first) = claims.sentences.first() {
        spans.push(value_tokens(first));
    }
    let exact = candidates
        .iter()
        .enumerate()
        .filter(|(_, a)| a.iter().any(|x| spans.contains(&x.tokens)))
        .map(|(i, _)| i)
        .collect();
    let asserted = !mentioned.is_empty() || names_other;
    Reading {
        abstained: answer.abstain || (!asserted && (declined || !denials.is_empty())),
        names_other: names_other && mentioned.is_empty(),
        empty: tokens(&answer.text).is_empty(),
        mentioned,
        denied: denials,
        exact,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(values: &[&str]) -> Vec<Vec<Alias>> {
        values
            .iter()
            .map(|v| aliases(v, AnswerKind::Name))
            .collect()
    }

    #[test]
    fn either_or_answer_names_two_candidates_and_is_not_a_match() {
        let c = names(&["Denver", "Portland"]);
        let r = read(&Answer::text("Denver or Portland"), &c);
        assert_eq!(r.mentioned.len(), 2);
        assert!(!r.names_only(1));
        assert!(read(&Answer::text("You work in Portland now."), &c).names_only(1));
    }

    #[test]
    fn punctuation_case_and_articles_do_not_matter() {
        let c = names(&["Tempo Builder 16/45", "Galloway Run-Walk"]);
        for text in [
            "tempo builder 16/45",
            "TEMPO BUILDER 1645",
            "The Tempo Builder 16-45 plan.",
        ] {
            let r = read(&Answer::text(text), &c);
            assert!(r.names_only(0), "{text}: {r:?}");
        }
        assert!(read(&Answer::text("the Tempo Builder 16/45"), &c)
            .exact
            .contains(&0));
        assert!(!read(&Answer::text("Tempo Builder"), &c).names_only(0));
    }

    #[test]
    fn exact_match_reads_the_bare_answer_span() {
        let c = names(&["Boise", "Tulsa"]);
        assert!(read(&Answer::text("Final answer: Boise"), &c)
            .exact
            .contains(&0));
        assert!(read(&Answer::text("Boise\nBecause you said so."), &c)
            .exact
            .contains(&0));
        assert!(!read(&Answer::text("You live in Boise."), &c)
            .exact
            .contains(&0));
        // Characters whose lower case is longer must not shift the label's offset.
        assert!(read(&Answer::text("İİİİ ANSWER: Boise"), &c)
            .exact
            .contains(&0));
    }

    #[test]
    fn ampersand_and_word_and_are_the_same() {
        let c = names(&["Sable & Finch"]);
        assert!(read(&Answer::text("Sable and Finch"), &c)
            .exact
            .contains(&0));
    }

    #[test]
    fn time_zone_aliases() {
        let c = vec![
            aliases("Central", AnswerKind::TimeZone),
            aliases("Eastern", AnswerKind::TimeZone),
        ];
        for text in [
            "Central Time",
            "the Central time zone",
            "central timezone",
            "CENTRAL",
        ] {
            assert!(read(&Answer::text(text), &c).names_only(0), "{text}");
        }
    }

    #[test]
    fn yes_no_aliases_for_the_daylight_saving_question() {
        let yes = "observes daylight saving time";
        let no = "stays on standard time all year";
        let c = vec![
            aliases(yes, AnswerKind::DstPolicy),
            aliases(no, AnswerKind::DstPolicy),
        ];
        assert!(read(&Answer::text("Yes."), &c).names_only(0));
        assert!(read(&Answer::text("Yes, it observes DST"), &c).names_only(0));
        assert!(read(
            &Answer::text("No, it does not observe daylight saving."),
            &c
        )
        .names_only(1));
        assert!(read(&Answer::text("It doesn't observe DST"), &c).names_only(1));
        // "it does not" must not also be read as "it does".
        assert!(read(&Answer::text("It does not."), &c).names_only(1));
        // A bare "no" counts only as the first word.
        let r = read(&Answer::text("I have no idea"), &c);
        assert!(r.mentioned.is_empty() && r.abstained);
    }

    #[test]
    fn abstention_needs_the_phrase_or_the_flag_and_no_value() {
        let c = names(&["Chicago"]);
        assert!(read(&Answer::text("I don't know."), &c).abstained);
        assert!(read(&Answer::text("That's no longer known."), &c).abstained);
        assert!(
            read(
                &Answer {
                    text: "".into(),
                    abstain: true
                },
                &c
            )
            .abstained
        );
        assert!(!read(&Answer::text("Not sure, probably Chicago"), &c).abstained);
        assert!(!read(&Answer::text("Chicago"), &c).abstained);
        let empty = read(&Answer::text("  ...  "), &c);
        assert!(empty.empty && !empty.abstained);
    }

    #[test]
    fn answers_read_as_text_or_structured() {
        let a: Answer = serde_json::from_str("\"Chicago\"").unwrap();
        assert_eq!(a, Answer::text("Chicago"));
        let b: Answer = serde_json::from_str(r#"{"answer": null, "abstain": true}"#).unwrap();
        assert!(b.abstain && b.text.is_empty());
        let c: Answer = serde_json::from_str(r#"{"text": "Boise"}"#).unwrap();
        assert_eq!(c, Answer::text("Boise"));
        assert!(serde_json::from_str::<Answer>("42").is_err());
    }

    #[test]
    fn plural_twin_matches_days() {
        let c = names(&["Sundays", "Saturdays"]);
        assert!(read(&Answer::text("On Sunday"), &c).names_only(0));
    }

    #[test]
    fn hostile_text_names_no_candidate() {
        let c = names(&["Chicago", "x"]);
        for text in [
            "",
            " ",
            "\u{0}",
            "🙂🙂",
            "ﬁ ﬂ",
            &"a ".repeat(5000),
            "'''&&&///",
        ] {
            let r = read(&Answer::text(text), &c);
            assert!(
                r.mentioned.is_empty() && r.exact.is_empty(),
                "{text:?}: {r:?}"
            );
        }
        // No candidates: nothing can be named, whatever the text says.
        let none = read(&Answer::text("Chicago"), &[]);
        assert!(none.mentioned.is_empty() && none.denied.is_empty() && none.exact.is_empty());
        assert!(aliases("", AnswerKind::DstPolicy)
            .iter()
            .all(|a| a.tokens.iter().all(|w| !w.is_empty())));
    }
}
