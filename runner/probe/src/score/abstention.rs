//! How models decline to give a value, and when a named value is denied rather than
//! asserted.
//!
//! Both work on normalised tokens (lower case, apostrophes dropped: "hasn't" reads
//! "hasnt"). A decline is a curated phrase ("I don't know", "not specified", "none")
//! or a negation pattern ("you had no employer yet", "it hasn't been mentioned",
//! "you are not entered in any race"). A denied mention is a value right after a
//! negating cue ("Boise, not Chicago", "no longer Chicago", "you left Halvorsen"): it
//! does not count as naming that value. The labelled corpus in
//! `runner/tests/data/probe_abstention.jsonl` measures both.

use regex::RegexSet;
use std::sync::LazyLock;

/// Version of the decline phrases, negation patterns and negating cues.
pub const ABSTENTION_VERSION: &str = "probe-abstain-3";

/// Verbs of finding out or answering, after "cannot", "no way to" and the like.
const KNOW: &str = "know|tell|say|determine|be determined|be sure|answer|be answered|confirm|\
infer|be inferred|work out|figure out|identify|be identified|be known|specify|pin down|recall";
/// Verbs of telling, after "you never" / "hasnt been".
const TOLD: &str = "mention|mentioned|say|said|tell|told|specify|specified|state|stated|share|\
shared|give|given|provide|provided|name|named|indicate|indicated|clarify|clarified|update|\
updated|confirm|confirmed|establish|established|record|recorded|disclose|disclosed";
/// States a user can be out of: employed, entered, living somewhere.
const STATE: &str = "employed|working|entered|registered|signed up|enrolled|training|racing|\
living|based|following|on any|in any|with any|at any|attached|assigned|currently";

fn patterns() -> Vec<String> {
    vec![
        // Bare declines.
        r"\b(unknown|unspecified|undetermined|undeterminable|indeterminate|unclear|uncertain|unsure|unanswerable|unverifiable)\b".into(),
        r"^(none|nothing|nobody|nowhere|n a|na|nil|null|no answer|no one|no idea|not applicable)\b".into(),
        r"\b(none|nothing) (yet|currently|at the moment|right now|now|anymore|any more|so far|known|stated|mentioned|specified|confirmed|that i know of|is known|has been)\b".into(),
        r"\bno idea\b".into(),
        r"\b(is|its|it s|remains|stays) (now )?(blank|empty|open)\b".into(),
        // "I can't tell", "there is no way to know", "impossible to say".
        format!(r"\b(dont|do not|cannot|cant|can not|couldnt|could not|unable to|no way to|not possible to|impossible to|hard to|not able to|no longer possible to|wont|will not|am not able to|have no basis to|no basis to|nothing to) (really |reliably |now |yet |currently |honestly |safely )?({KNOW})\b"),
        r"\b(i|we) (dont|do not) have (that|this|the|any|enough|a) (information|info|detail|details|answer|record|data)\b".into(),
        // "no information", "not enough info", "no longer any basis".
        r"\b(no|not enough|insufficient|no longer any|no longer enough|lack of|missing|no current|no reliable|no updated|no new|no valid) (information|info|data|record|records|details|detail|basis|mention|indication|answer|evidence|knowledge|replacement|value)\b".into(),
        r"\bnot (specified|mentioned|stated|given|provided|known|available|clear|certain|sure|determinable|said|indicated|recorded|established|confirmed|told|defined|set|listed|shared|disclosed|in the conversation|in the conversations|covered|answerable|possible to say)\b".into(),
        format!(r"\b(hasnt|has not|havent|have not|hadnt|had not|wasnt|was not|werent|were not|isnt|is not|arent|are not|never) (been )?(yet )?(explicitly |actually |clearly |since )?({TOLD})\b"),
        format!(r"\b(you|user|they) (didnt|did not|never|havent|have not|hasnt|has not|hadnt|had not|dont|do not) (yet |actually |explicitly |ever |since |really )?({TOLD})\b"),
        r"\bno longer (known|applies|applicable|valid|true|holds|the case|relevant|defined|determined|determinable|clear|stated|available|certain|established|supported|answerable)\b".into(),
        r"\b(conversations?|chats?|record|records|messages?|history|context|notes) (do not|dont|does not|doesnt|did not|didnt|no longer) (say|mention|state|tell|specify|support|show|cover|contain|include|give|establish)\b".into(),
        // Negation patterns: the user has no such thing, or is not in any.
        r"\b(you|user|they) (have|had|has|hold|held|have got|now have|currently have) no\b".into(),
        format!(r"\b(you|user|they|youre|you are|you were) (are |were |is )?(not|no longer|not yet|not currently|arent|werent|isnt) (yet )?({STATE})\b"),
        r"\b(you|user|they) (didnt|did not|dont|do not|no longer|dont currently|do not currently) (yet )?(have|work|live|train|follow|run|race)\b".into(),
        r"\b(theres|there is|there was|there are|there were|there s) (now )?(no|not any|nothing|none)\b".into(),
        r"\bno (longer )?(current|known|specific|confirmed|stated|valid|active|new|updated|such|race|employer|job|company|city|home|utility|portal|plan|schedule|workplace|zone|time zone|day|slot|goal race|firm|owner|site|website|provider|supplier|long run|longer any)\b".into(),
        r"\b(cannot|cant|can not|could not|couldnt) (be )?(answered|determined|known|inferred|said|told|identified)\b".into(),
        r"\b(not|isnt|is not|its not) (something|a thing) (i|we) (can|could) (know|tell|say|determine)\b".into(),
        r"\bwithout (a|any|more|further|new) (information|info|details|replacement|employer|race|basis)\b".into(),
        r"\bno way of (knowing|telling|saying)\b".into(),
        r"\b(isnt|is not|arent|are not|wasnt|was not) (available|known|clear|certain|determinable|on record)\b".into(),
        r"\b(would|will) (have|need) to (ask|check)\b".into(),
        // Refusals: "I'm unable to assist with questions ...".
        r"\b(i|im|i am) (unable to|cannot|cant|can not|not able to|not capable of) (assist|help|provide|answer|give|share)(ing)?\b".into(),
        r"\b(depends|it depends) on (your|the) new\b".into(),
    ]
}

static DECLINES: LazyLock<RegexSet> =
    LazyLock::new(|| RegexSet::new(patterns()).expect("the decline patterns are valid"));

/// Confusion about the question itself: not a decline to give the value.
static META: LazyLock<RegexSet> = LazyLock::new(|| {
    RegexSet::new([
        r"\b(not sure|unsure|dont know|do not know|unclear|dont understand|do not understand) (what|which) (you|youre|your)\b",
        r"\b(dont|do not|didnt|did not) understand (the|your) question\b",
    ])
    .expect("the confusion patterns are valid")
});

/// Whether the normalised words hold a decline phrase or negation pattern, and not
/// only confusion about what was asked ("I'm not sure what you're asking").
pub fn declines(words: &[String]) -> bool {
    let text = words.join(" ");
    DECLINES.is_match(&text) && !META.is_match(&text)
}

/// Words that may stand between a negating cue and the value it denies.
const FILLER: &[&str] = &[
    "the",
    "a",
    "an",
    "in",
    "at",
    "on",
    "for",
    "with",
    "of",
    "to",
    "from",
    "by",
    "working",
    "work",
    "worked",
    "works",
    "living",
    "live",
    "lived",
    "based",
    "following",
    "follow",
    "followed",
    "training",
    "entered",
    "is",
    "its",
    "it",
    "be",
    "anymore",
    "any",
    "more",
    "longer",
];

/// Negating cues, as the words that end right before the fillers.
const CUES: &[&[&str]] = &[
    &["not"],
    &["never"],
    &["no", "longer"],
    &["isnt"],
    &["arent"],
    &["wasnt"],
    &["nor"],
    &["instead", "of"],
    &["instead"],
    &["previously"],
    &["formerly"],
    &["earlier"],
    &["originally"],
    &["rather", "than"],
    &["left"],
    &["leaving"],
    &["quit"],
    &["withdrew"],
    &["withdrawn"],
    &["pulled", "out"],
    &["dropped", "out"],
    &["backed", "out"],
    &["moved", "out"],
    &["away"],
    &["switched"],
    &["replaced"],
    &["dropped"],
    &["than"],
];

/// Whether the value starting at token `start` is denied by a cue before it ("not X",
/// "no longer in X", "you left X", "instead of X"), or followed by "no longer"
/// ("X no longer applies").
pub fn denied(words: &[String], start: usize, len: usize) -> bool {
    let mut end = start;
    let mut skipped = 0;
    while end > 0 && skipped < 3 && FILLER.contains(&words[end - 1].as_str()) {
        // "no longer" is a cue even though "longer" may be skipped as filler.
        if words[end - 1] == "longer" && end >= 2 && words[end - 2] == "no" {
            return true;
        }
        // So is "used to", though "to" may be skipped too ("you used to work at X").
        if words[end - 1] == "to" && end >= 2 && words[end - 2] == "used" {
            return true;
        }
        end -= 1;
        skipped += 1;
    }
    let before = &words[..end];
    let cue = CUES
        .iter()
        .any(|c| before.len() >= c.len() && before[before.len() - c.len()..].iter().eq(c.iter()));
    let after = &words[(start + len).min(words.len())..];
    let trailing = after.len() >= 2
        && ((after[0] == "no" && after[1] == "longer")
            || (after[0] == "is"
                && after[1] == "no"
                && after.get(2).is_some_and(|w| w == "longer"))
            || (after[0] == "anymore"));
    cue || trailing
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::score::normalize::tokens;

    #[test]
    fn the_issue_examples_decline() {
        for text in [
            "None",
            "Not specified",
            "It hasn't been mentioned.",
            "You had no employer yet.",
            "unknown",
            "I can't tell from the conversations.",
        ] {
            assert!(declines(&tokens(text)), "{text}");
        }
        for text in ["Chicago", "Probably Chicago", "It's in Chicago now"] {
            assert!(!declines(&tokens(text)), "{text}");
        }
    }

    #[test]
    fn cues_deny_the_value_right_after_them_only() {
        let w = tokens("Boise, not Chicago");
        assert!(!denied(&w, 0, 1) && denied(&w, 2, 1));
        let w = tokens("I'm not sure, probably Chicago");
        assert!(!denied(&w, 4, 1));
        let w = tokens("You no longer work at Halvorsen Robotics");
        assert!(denied(&w, 5, 2));
        let w = tokens("Chicago no longer applies");
        assert!(denied(&w, 0, 1));
    }
}
