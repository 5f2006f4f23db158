//! What a reply claims, read as a grader reads it (the rule and its reasons:
//! `docs/probe-answers.md`).
//!
//! A reply answers with claims: an `Answer:` line, or sentences of its own. Lines that
//! write a turn of a conversation ("User: ...", "Session 3 (...)", "Question: ...") are
//! not claims; once the reply has said something of its own, such a line starts an
//! invented conversation and ends the reply. Questions are not claims, and neither is
//! text copied from the prompt: the instructions restated, or the user's own words in
//! the first person ("my employer is X", quoted or not), since repeating what the user
//! said is not answering what was asked.

use crate::record::{PitItem, ProbeItem, Session};
use crate::render::{INSTRUCTION, PIT_INSTRUCTION, PREAMBLE};
use crate::score::normalize::tokens;

/// The prompt's text as a reply might copy it: the instructions, and the user's turns
/// with the question.
#[derive(Debug, Clone, Default)]
pub struct PromptEcho {
    instructions: Vec<Vec<String>>,
    user: Vec<Vec<String>>,
    /// The asked question; empty when not known.
    question: Vec<String>,
}

/// Words by which a copied run speaks as the user.
const FIRST_PERSON: &[&str] = &["i", "my", "me", "mine", "im", "ive", "id", "ill", "myself"];

impl PromptEcho {
    fn new(sessions: &[Session], question: &str, instruction: &str) -> PromptEcho {
        let mut user: Vec<Vec<String>> = sessions.iter().flatten().map(|t| tokens(t)).collect();
        user.push(tokens(question));
        PromptEcho {
            instructions: [PREAMBLE, instruction].iter().map(|t| tokens(t)).collect(),
            user,
            question: tokens(question),
        }
    }

    pub fn probe(item: &ProbeItem) -> PromptEcho {
        PromptEcho::new(&item.sessions, &item.question, INSTRUCTION)
    }

    pub fn pit(item: &PitItem) -> PromptEcho {
        PromptEcho::new(&item.sessions, &item.question, PIT_INSTRUCTION)
    }

    /// Whether a `Question:` line the reply wrote asks something else than the prompt.
    fn other_question(&self, line: &str) -> bool {
        let asked = line.split_once(':').map_or("", |(_, q)| q);
        !self.question.is_empty() && tokens(asked) != self.question
    }

    /// Whether these words were copied from the prompt rather than said by the model.
    fn echoes(&self, words: &[String]) -> bool {
        // Bounded: a runaway sentence is judged by its start.
        let words = &words[..words.len().min(200)];
        let n = words.len();
        if n == 0 {
            return false;
        }
        let whole = |run: usize| run == n && n >= 6;
        // The instruction garbled ("If the conversation supports ..., reply "unknown"").
        let instructs = words
            .windows(2)
            .any(|w| w[0] == "reply" && w[1] == "unknown");
        instructs
            || self.instructions.iter().any(|line| {
                let run = longest_run(words, line).len();
                run >= 5 || whole(run)
            })
            || self.user.iter().any(|line| {
                let run = longest_run(words, line);
                (run.len() >= 3 && run.iter().any(|w| FIRST_PERSON.contains(&w.as_str())))
                    || whole(run.len())
            })
    }
}

/// The longest run of consecutive words `a` shares with `b`.
fn longest_run<'a>(a: &'a [String], b: &[String]) -> &'a [String] {
    let mut best = (0, 0);
    let mut prev = vec![0usize; b.len() + 1];
    for (i, word) in a.iter().enumerate() {
        let mut cur = vec![0usize; b.len() + 1];
        for (j, other) in b.iter().enumerate() {
            if word == other {
                cur[j + 1] = prev[j] + 1;
                if cur[j + 1] > best.1 {
                    best = (i + 1 - cur[j + 1], cur[j + 1]);
                }
            }
        }
        prev = cur;
    }
    &a[best.0..best.0 + best.1]
}

/// The claims of a reply.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Claims {
    /// The sentences the reply asserts, in order (for a labelled answer, its one
    /// sentence).
    pub sentences: Vec<String>,
    /// The answer came from an `Answer:` label.
    pub labelled: bool,
}

impl Claims {
    /// The claims as one text, a sentence per line.
    pub fn text(&self) -> String {
        self.sentences.join("\n")
    }
}

/// Markdown decoration or list numbering ("3. ", "2) ") a line may open with.
fn undecorated(line: &str) -> &str {
    let line = line.trim_start_matches(|c: char| {
        c.is_whitespace() || matches!(c, '*' | '#' | '>' | '-' | '_')
    });
    let digits = line.len() - line.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    let line = match line[digits..].strip_prefix(['.', ')']) {
        Some(rest) if digits > 0 && rest.starts_with(' ') => rest,
        _ => line,
    };
    line.trim().trim_start_matches(['*', '_']).trim()
}

/// A line that writes a turn of a conversation, or the prompt's own framing.
fn is_turn(line: &str) -> bool {
    let lower = line.to_lowercase();
    let session = lower
        .strip_prefix("session")
        .is_some_and(|rest| rest.trim_start().starts_with(|c: char| c.is_ascii_digit()));
    session
        || lower.starts_with("<|")
        || lower.starts_with("<start_of_turn")
        || [
            "user:",
            "user :",
            "human:",
            "system:",
            "question:",
            "reference date:",
            "statements:",
        ]
        .iter()
        .any(|m| lower.starts_with(m))
}

/// A line the model opened with its own role name: the rest is its answer.
fn without_own_role(line: &str) -> &str {
    for role in ["assistant:", "ai:", "model:", "bot:"] {
        if line
            .get(..role.len())
            .is_some_and(|p| p.eq_ignore_ascii_case(role))
        {
            return line[role.len()..].trim_start();
        }
    }
    line
}

/// Labels after which a line gives its answer: `Answer:` or a JSON `"answer":` /
/// `'answer':` field (strong), or "the answer is" (weak, read only where no strong
/// label is: "Answer: Albany" then "The answer is not provided" answers Albany).
const STRONG: &[&str] = &["answer:", "\"answer\":", "'answer':"];
const WEAK: &[&str] = &["the answer is", "my answer is", "final answer is"];

/// The text after the last label of a line (case-insensitive), and whether the label is
/// strong.
fn after_label(line: &str) -> Option<(&str, bool)> {
    // Searched in the original text: lower-casing can change byte offsets.
    let found = (0..line.len()).rev().find_map(|i| {
        let at = |labels: &[&str]| {
            labels.iter().find_map(|label| {
                line.get(i..i + label.len())
                    .filter(|s| s.eq_ignore_ascii_case(label))
                    .map(|_| i + label.len())
            })
        };
        at(STRONG)
            .map(|e| (e, true))
            .or_else(|| at(WEAK).map(|e| (e, false)))
    });
    found.map(|(at, strong)| {
        let rest =
            line[at..].trim_start_matches(|c: char| c.is_whitespace() || matches!(c, '*' | ':'));
        (rest, strong)
    })
}

/// Sentences of a line: split after `.`, `!` or `?` followed by a space, except after a
/// short capitalised abbreviation ("St. Louis").
pub fn sentences(line: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let chars: Vec<(usize, char)> = line.char_indices().collect();
    for (k, &(i, c)) in chars.iter().enumerate() {
        if !matches!(c, '.' | '!' | '?') {
            continue;
        }
        let next_is_space = chars.get(k + 1).is_none_or(|(_, n)| n.is_whitespace());
        if !next_is_space {
            continue;
        }
        let word = line[start..i]
            .rsplit(char::is_whitespace)
            .next()
            .unwrap_or("");
        let abbreviation = c == '.'
            && word.chars().count() <= 3
            && word.starts_with(|c: char| c.is_uppercase())
            && chars.get(k + 2).is_some_and(|(_, n)| n.is_uppercase());
        if abbreviation {
            continue;
        }
        out.push(line[start..i + c.len_utf8()].trim());
        start = i + c.len_utf8();
    }
    out.push(line[start..].trim());
    out.retain(|s| !s.is_empty());
    out
}

/// Words by which a sentence ending in `?` asks rather than guesses ("Albany?",
/// "maybe VoltPay?" are tentative answers).
const ASKING: &[&str] = &[
    "what", "which", "who", "whom", "whose", "where", "when", "why", "how", "do", "does", "did",
    "is", "are", "was", "were", "can", "could", "would", "will", "should", "shall", "have", "has",
    "may", "might", "am", "whats", "wheres", "whos", "hows", "any", "anything", "please",
];

/// A sentence that asks a question: it ends in `?` and opens with a question word (or
/// holds one after a comma or dash, "so, which one do you mean?").
fn asks(sentence: &str) -> bool {
    sentence
        .trim_end_matches(['"', '\'', '\u{201d}', ')'])
        .ends_with('?')
        && sentence
            .split([',', ';', ':', '-', '\u{2014}'])
            .any(|part| {
                tokens(part)
                    .first()
                    .is_some_and(|w| ASKING.contains(&w.as_str()))
            })
}

/// Quoted spans ("...", “...”) that copy the prompt, removed from a sentence.
fn without_quoted_echoes(sentence: &str, prompt: &PromptEcho) -> String {
    let mut out = String::new();
    let mut rest = sentence;
    loop {
        let open = rest.find(['"', '\u{201c}']);
        let Some(open) = open else { break };
        let quote_len = rest[open..].chars().next().map_or(1, char::len_utf8);
        let after = &rest[open + quote_len..];
        let Some(close) = after.find(['"', '\u{201d}']) else {
            break;
        };
        let inner = &after[..close];
        out.push_str(&rest[..open]);
        if !prompt.echoes(&tokens(inner)) {
            out.push_str(&rest[open..open + quote_len + close + 1]);
        }
        let close_len = after[close..].chars().next().map_or(1, char::len_utf8);
        rest = &after[close + close_len..];
    }
    out.push_str(rest);
    out
}

/// The sentences of the reply's own, before any invented conversation, and the last
/// `Answer:` label among them.
pub fn claims(reply: &str, prompt: &PromptEcho) -> Claims {
    let mut own: Vec<&str> = Vec::new();
    let mut label: Option<(usize, bool)> = None;
    // An `Answer:` line answers the `Question:` line before it, if the reply wrote one.
    let mut asked_elsewhere = false;
    for raw in reply.lines() {
        let line = undecorated(raw);
        // Blank lines and code fences (```json) carry no claim.
        if line.is_empty() || line.starts_with("```") {
            continue;
        }
        if line
            .get(..9)
            .is_some_and(|p| p.eq_ignore_ascii_case("question:"))
        {
            asked_elsewhere = prompt.other_question(line);
        }
        if is_turn(line) {
            // Before anything of its own, a restated prompt; after, an invented one.
            if own.is_empty() {
                continue;
            }
            break;
        }
        let line = without_own_role(line);
        if let Some((rest, strong)) = after_label(line) {
            if asked_elsewhere {
                // The answer to an invented question: part of an invented conversation.
                if own.is_empty() {
                    continue;
                }
                break;
            }
            if strong || !label.is_some_and(|(_, s)| s) {
                label = Some((own.len(), strong));
            }
            own.push(rest);
            continue;
        }
        let said = sentences(line)
            .iter()
            .any(|s| !asks(s) && !prompt.echoes(&tokens(s)));
        if said || !own.is_empty() {
            own.push(line);
        }
    }
    if let Some((at, _)) = label {
        // The label's text, or the next line when the label ends its line.
        let text = own[at..].iter().find(|l| !l.trim().is_empty()).copied();
        let first = text.and_then(|t| sentences(t).first().map(|s| s.to_string()));
        let sentences = first
            .filter(|s| !prompt.echoes(&tokens(s)))
            .into_iter()
            .collect();
        return Claims {
            sentences,
            labelled: true,
        };
    }
    let sentences = own
        .iter()
        .flat_map(|l| sentences(l))
        .filter(|s| !asks(s))
        .map(|s| without_quoted_echoes(s, prompt))
        .filter(|s| {
            let words = tokens(s);
            !words.is_empty() && !prompt.echoes(&words)
        })
        .collect();
    Claims {
        sentences,
        labelled: false,
    }
}
