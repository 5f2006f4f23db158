//! What one sentence of a reply asserts: which words it negates, and whether it names a
//! value at all when it names none of the item's candidates (the rule and its reasons:
//! `docs/probe-answers.md`).

use crate::score::normalize::tokens;

/// A normalised word, whether it was written capitalised, and its clause in the
/// sentence (clauses end at `,` `;` `:` and before "but").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Word {
    pub text: String,
    pub capitalised: bool,
    pub clause: usize,
}

pub fn words(sentence: &str) -> Vec<Word> {
    let mut out = Vec::new();
    let mut clause = 0;
    for raw in sentence.split_whitespace() {
        let capitalised = raw
            .trim_start_matches(|c: char| !c.is_alphanumeric())
            .starts_with(char::is_uppercase);
        for (k, text) in tokens(raw).into_iter().enumerate() {
            if matches!(text.as_str(), "but" | "although" | "though" | "however") {
                clause += 1;
            }
            out.push(Word {
                text,
                capitalised: capitalised && k == 0,
                clause,
            });
        }
        if raw.ends_with([',', ';', ':', '\u{2014}', '\u{2013}', ')']) || raw == "-" {
            clause += 1;
        }
    }
    out
}

/// Negating words, as normalised tokens ("don't" reads "dont").
const NEGATIONS: &[&str] = &[
    "not", "never", "no", "nor", "neither", "none", "without", "cannot", "dont", "doesnt", "didnt",
    "isnt", "arent", "wasnt", "werent", "cant", "wont", "havent", "hasnt", "hadnt", "couldnt",
    "wouldnt", "shouldnt", "aint",
];

pub fn is_negation(word: &str) -> bool {
    NEGATIONS.contains(&word)
}

/// Whether a negation earlier in the same clause governs the words from `start`:
/// "you're not a customer of X", "you don't work at X any more".
pub fn negated(words: &[Word], start: usize) -> bool {
    let Some(clause) = words.get(start).map(|w| w.clause) else {
        return false;
    };
    words[..start]
        .iter()
        .rev()
        .take_while(|w| w.clause == clause)
        .any(|w| is_negation(&w.text))
}

/// Capitalised words that are not names of a value.
const NOT_NAMES: &[&str] = &[
    "i",
    "im",
    "ive",
    "id",
    "ill",
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
    "user",
    "assistant",
    "session",
    "question",
    "answer",
    "ok",
    "okay",
    "note",
    "dst",
];

/// Words that carry no value: what a short phrase must hold more than.
const EMPTY_WORDS: &[&str] = &[
    "ok",
    "okay",
    "sure",
    "thanks",
    "thank",
    "you",
    "hello",
    "hi",
    "hey",
    "great",
    "certainly",
    "of",
    "course",
    "got",
    "it",
    "understood",
    "noted",
    "welcome",
    "youre",
    "the",
    "a",
    "an",
    "is",
    "its",
    "this",
    "that",
    "here",
    "there",
    "i",
    "im",
    "see",
    "yes",
    "no",
    "right",
    "well",
    "so",
    "and",
    "or",
    "done",
    "absolutely",
    "of",
    "again",
    "sorry",
    "please",
    "let",
    "me",
    "know",
    "for",
    "to",
    "in",
    "on",
    "at",
    "be",
    "will",
    "can",
    "do",
    "we",
    "they",
    "my",
    "your",
    "question",
    "answer",
    "correct",
    "true",
    "false",
    "fine",
    "good",
    "nice",
];

/// Whether a sentence speaks of the model itself rather than of the user: its role
/// ("You are a helpful AI assistant named SmolLM", a chat template's system prompt
/// restated) or its own state ("I'm sorry for any confusion"). A first-person sentence
/// that speaks of the user ("I think you work at X") is not one.
fn about_the_model(words: &[Word]) -> bool {
    let t: Vec<&str> = words.iter().map(|w| w.text.as_str()).collect();
    let has = |w: &str| t.contains(&w);
    let role = ["assistant", "chatbot", "ai", "bot"].iter().any(|w| has(w))
        && (has("you") || has("youre") || has("i") || has("im") || has("as"));
    // "I'd say X", "I think X" are hedged answers, not the model speaking of itself.
    let hedge = t.get(1).is_some_and(|w| HEDGES.contains(w));
    let speaker = matches!(t.first(), Some(&("i" | "im" | "ive" | "ill" | "id")))
        && !hedge
        && !has("you")
        && !has("your")
        && !has("youre");
    role || speaker
}

/// Verbs by which a first-person sentence hedges an answer.
const HEDGES: &[&str] = &[
    "say",
    "think",
    "believe",
    "guess",
    "suppose",
    "reckon",
    "assume",
    "bet",
    "recall",
    "remember",
    "would",
    "gather",
    "understand",
];

/// Words that open sentences without naming anything ("What is ...", "Everything is").
const STARTERS: &[&str] = &[
    "what",
    "which",
    "who",
    "where",
    "when",
    "why",
    "how",
    "everything",
    "nothing",
    "someone",
    "something",
    "everyone",
    "nobody",
    "one",
    "each",
    "all",
    "both",
    "today",
    "now",
    "currently",
    "based",
    "according",
    "as",
    "since",
    "your",
    "his",
    "her",
    "their",
    "our",
    "he",
    "she",
    "unfortunately",
    "however",
    "also",
    "then",
    "note",
    "but",
    "if",
    "while",
    "after",
    "before",
    "same",
    "different",
    "new",
    "old",
    "next",
    "other",
    "another",
    "sounds",
    "looks",
    "seems",
];

/// Verbs after which a sentence's capitalised first word reads as a name ("Acme hired
/// you", "Denver is your city").
const NAMING_VERBS: &[&str] = &[
    "is", "was", "remains", "has", "hired", "employs", "runs", "bills", "supplies", "provides", "s",
];

/// Whether a sentence that names no candidate still names a value: a capitalised
/// word that is not negated, or, as the reply's first claim (`first`), a short phrase
/// of content words ("New York City."; a closing "Have a nice day!" is not one).
/// `masked` marks words already read as (negated or denied) candidates.
pub fn names_a_value(words: &[Word], masked: &[bool], first: bool) -> bool {
    if about_the_model(words) {
        return false;
    }
    let free = |i: usize| !masked.get(i).copied().unwrap_or(false) && !negated(words, i);
    let name = |i: usize| {
        let w = &words[i];
        w.capitalised && !NOT_NAMES.contains(&w.text.as_str()) && !is_negation(&w.text) && free(i)
    };
    let first_is_name = words.len() > 1
        && name(0)
        && !EMPTY_WORDS.contains(&words[0].text.as_str())
        && !STARTERS.contains(&words[0].text.as_str())
        && (words[1].capitalised || NAMING_VERBS.contains(&words[1].text.as_str()));
    let later_name = (1..words.len()).any(name);
    let content = |i: usize| {
        let t = words[i].text.as_str();
        free(i) && !EMPTY_WORDS.contains(&t) && !STARTERS.contains(&t) && !NOT_NAMES.contains(&t)
    };
    // The first clause stands for the phrase: "Pfitzinger 18/55 - you mentioned it".
    let lead = words.iter().take_while(|w| w.clause == 0).count();
    let short = first
        && (1..=4).contains(&lead)
        && (0..lead).any(|i| content(i) && (words[i].capitalised || lead == 1))
        && !words[..lead].iter().any(|w| is_negation(&w.text));
    first_is_name || later_name || short
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(s: &str) -> bool {
        let w = words(s);
        names_a_value(&w, &vec![false; w.len()], true)
    }

    #[test]
    fn negation_reaches_to_the_start_of_its_clause_only() {
        let w = words("I'm glad that you're not a customer of Copperleaf Foods.");
        let at = w.iter().position(|x| x.text == "copperleaf").unwrap();
        assert!(negated(&w, at));
        let w = words("You don't work at Boise Labs any more, you work at Acme now.");
        let at = w.iter().position(|x| x.text == "acme").unwrap();
        assert!(!negated(&w, at));
        let w = words("I'm not sure but you work at Acme.");
        let at = w.iter().position(|x| x.text == "acme").unwrap();
        assert!(!negated(&w, at));
    }

    #[test]
    fn a_sentence_names_a_value_by_a_name_or_a_short_phrase() {
        assert!(named("You now work for Acme Robotics."));
        assert!(named("Denver is your city now."));
        assert!(named("Denver"));
        assert!(named("New York City."));
        assert!(!named("You've already answered the question."));
        assert!(!named("Congratulations on your new job!"));
        assert!(!named("Thank you."));
        assert!(!named(
            "I'm glad that you're not a customer of Copperleaf Foods."
        ));
        assert!(!named("Your employer changed in June."));
        assert!(!named(
            "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
        ));
        assert!(!named("I'm sorry, I'm not a chatbot. I'm a human."));
        assert!(!named("Same user, different session."));
        assert!(named("I think you work at Acme Robotics now."));
        assert!(named("I'd say BillBridge."));
        assert!(named("Pfitzinger 18/55 - you mentioned it recently."));
        assert!(!named("Not Eastern any more, that's all I know."));
    }
}
