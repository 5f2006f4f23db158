//! Prompts for Probe: the conversation so far plus the question.
//!
//! A core item is asked twice: after sessions 1..n-1 (`pre`) and after all n sessions
//! (`post`). Sessions are dated 2026-06-(i+1), the harness convention of the original
//! bench. A PIT query shows every session and asks about its reference date.

use super::records::{PitItem, ProbeItem, Session};
use serde::Serialize;
use std::fmt::Write;

/// Version of the prompt wording below; part of a run's identity.
pub const PROMPT_VERSION: &str = "probe-prompt-1";

const PREAMBLE: &str = "Below are earlier conversations with a user, oldest first. \
Use everything in them, including later corrections and updates.";
const INSTRUCTION: &str = "Answer with the value only. If the conversations no longer \
support any specific answer, reply \"unknown\".";
const PIT_INSTRUCTION: &str = "Answer for what was true on the reference date, given \
everything the user has said, including corrections made later. Answer with the value \
only; if nothing was true yet on that date, reply \"unknown\".";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Pre,
    Post,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Pre => "pre",
            Phase::Post => "post",
        }
    }
}

/// One scored question of a Probe set, by position: a core item's question before
/// (`Pre`) or after (`Post`) the final turn, or query `query` of a PIT item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Question {
    Core { item: usize, phase: Phase },
    Pit { item: usize, query: usize },
}

/// One prompt, with what identifies it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ProbePrompt {
    /// `probe_id/pre`, `probe_id/post` or `pit_id/label`.
    pub id: String,
    pub text: String,
}

/// Harness date of session i (0-based).
pub fn session_date(i: usize) -> String {
    chrono::NaiveDate::from_ymd_opt(2026, 6, 1)
        .and_then(|d| d.checked_add_days(chrono::Days::new(i as u64)))
        .map(|d| d.format("%Y-%m-%d").to_string())
        .unwrap_or_default()
}

fn render(sessions: &[Session], dates: Option<&[String]>, tail: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{PREAMBLE}\n");
    for (i, session) in sessions.iter().enumerate() {
        let date = dates
            .and_then(|d| d.get(i).cloned())
            .unwrap_or_else(|| session_date(i));
        let _ = writeln!(s, "Session {} ({date}):", i + 1);
        for turn in session {
            let _ = writeln!(s, "User: {turn}");
        }
        s.push('\n');
    }
    s.push_str(tail);
    s
}

/// The pre and post prompts of a core item.
pub fn probe_prompts(item: &ProbeItem) -> [ProbePrompt; 2] {
    let n = item.sessions.len();
    let tail = format!("Question: {}\n{INSTRUCTION}\n", item.question);
    let pre = &item.sessions[..n.saturating_sub(1)];
    [
        ProbePrompt {
            id: format!("{}/pre", item.probe_id),
            text: render(pre, None, &tail),
        },
        ProbePrompt {
            id: format!("{}/post", item.probe_id),
            text: render(&item.sessions, None, &tail),
        },
    ]
}

/// One prompt per PIT query, in query order.
pub fn pit_prompts(item: &PitItem) -> Vec<ProbePrompt> {
    item.queries
        .iter()
        .map(|q| ProbePrompt {
            id: format!("{}/{}", item.pit_id, q.label),
            text: render(
                &item.sessions,
                item.session_dates.as_deref(),
                &format!(
                    "Reference date: {}\nQuestion: {}\n{PIT_INSTRUCTION}\n",
                    q.reference_time, item.question
                ),
            ),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::super::generator::{generate_pit, generate_probe};
    use super::*;

    #[test]
    fn pre_prompt_stops_before_the_final_turn_and_post_includes_it() {
        for item in generate_probe() {
            let [pre, post] = probe_prompts(&item);
            let last = &item.sessions.last().unwrap()[0];
            assert!(!pre.text.contains(last.as_str()), "{}", item.probe_id);
            assert!(post.text.contains(last.as_str()));
            assert!(pre.text.contains(&item.sessions[0][0]));
            assert!(post
                .text
                .ends_with(&format!("Question: {}\n{INSTRUCTION}\n", item.question)));
            let n = item.sessions.len();
            assert!(post
                .text
                .contains(&format!("Session {n} ({})", session_date(n - 1))));
            assert!(!pre.text.contains(&format!("Session {n} (")));
        }
    }

    #[test]
    fn pit_prompts_carry_the_reference_date() {
        for item in generate_pit() {
            let prompts = pit_prompts(&item);
            assert_eq!(prompts.len(), item.queries.len());
            for (p, q) in prompts.iter().zip(&item.queries) {
                assert!(p
                    .text
                    .contains(&format!("Reference date: {}", q.reference_time)));
                assert!(p.id.ends_with(q.label.as_str()));
            }
        }
    }

    #[test]
    fn session_dates_follow_the_harness_convention() {
        assert_eq!(session_date(0), "2026-06-01");
        assert_eq!(session_date(8), "2026-06-09");
    }
}
