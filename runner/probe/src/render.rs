//! Prompts for Probe: the conversation so far plus the question.
//!
//! A core item is asked twice: after sessions 1..n-1 (`pre`) and after all n sessions
//! (`post`). Sessions are dated 2026-06-(i+1), the harness convention of the original
//! bench. A PIT query shows every session and asks about its reference date.

use crate::chains::chain;
use crate::record::{PitItem, ProbeItem, Session};
use serde::Serialize;
use std::fmt::Write;

/// Version of the prompt wording below; part of a run's identity.
pub const PROMPT_VERSION: &str = "probe-prompt-2";

pub(crate) const PREAMBLE: &str = "Below are earlier conversations with a user, oldest first. \
Use everything in them, including later corrections and updates.";
pub(crate) const INSTRUCTION: &str = "Answer with the value only. If the conversations no longer \
support any specific answer, reply \"unknown\".";
pub(crate) const PIT_INSTRUCTION: &str = "Answer for what was true on the reference date, given \
everything the user has said, including corrections made later. Answer with the value \
only; if nothing was true yet on that date, reply \"unknown\".";

const FOLLOWUP_INSTRUCTION: &str = "The last session changed something the user had \
said before. Which of the statements below does it make no longer current, and was it an \
update (the world changed; the old statement was true until then) or a correction (the \
old statement was wrong all along)? Statements:\n";
const FOLLOWUP_CONTRACT: &str = "Reply with one JSON object and nothing else: \
{\"invalidated\": [keys of the statements that are no longer current], \"axis\": \
\"update\" or \"correction\"}\n";

/// What each chain statement says, for the follow-up's list of keys.
fn describe(relation: &str) -> &'static str {
    match relation {
        "works_at" => "who the user's employer is",
        "located_in" => "which city the employer has its offices in",
        "workplace_city" => "which city the user's workplace is in",
        "city_timezone" => "which time zone that city is on",
        "work_timezone" => "which time zone the user's working hours are on",
        "tz_dst_policy" => "whether that time zone observes daylight saving time",
        "work_dst_policy" => "whether the user's working hours shift for daylight saving time",
        "lives_in" => "which city the user's home is in",
        "power_utility_of" => "which utility supplies that city's electricity",
        "home_utility" => "which utility provides the user's electricity",
        "billing_portal_of" => "which website that utility bills through",
        "utility_portal" => "which website the user pays the electric bill on",
        "portal_owner_of" => "which firm runs that website",
        "portal_owner" => "which firm runs the site where the user pays the electric bill",
        "training_for" => "which race the user is preparing for",
        "plan_of" => "which training schedule that race's entrants get",
        "training_plan" => "which training schedule the user follows",
        "long_run_day_of" => "which day that schedule puts the long run on",
        "current_long_run_day" => "which day the user does long runs",
        "blocked_slot_of" => "which slot must stay clear of meetings with long runs on that day",
        "current_blocked_slot" => "which slot in the user's week is kept free of meetings",
        _ => "a statement of the chain",
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Pre,
    Post,
    /// After the post question: which statements the last turn invalidated, and
    /// whether it was an update or a correction (a JSON answer contract).
    Followup,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Pre => "pre",
            Phase::Post => "post",
            Phase::Followup => "followup",
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

/// The follow-up prompt of a core item: every session, then the statements of the
/// item's chain as keys to choose from, and the answer contract.
pub fn followup_prompt(item: &ProbeItem) -> ProbePrompt {
    let mut tail = String::from(FOLLOWUP_INSTRUCTION);
    for relation in chain(item.domain).relations_up_to(item.hop_depth) {
        let _ = writeln!(tail, "- {relation}: {}", describe(relation));
    }
    tail.push_str(FOLLOWUP_CONTRACT);
    ProbePrompt {
        id: format!("{}/followup", item.probe_id),
        text: render(&item.sessions, None, &tail),
    }
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

/// Version of the request-id string below.
const REQUEST_ID_VERSION: &str = "probe-request-v1";

/// The request id of one question: the hash of what defines it.
pub fn request_id(
    file_sha256: &str,
    condition: &str,
    item: &str,
    ask: &str,
) -> runner_engine::id::RequestId {
    runner_engine::id::RequestId::new(runner_engine::digest::sha256_hex(
        format!("{REQUEST_ID_VERSION}\n{file_sha256}\n{condition}\n{item}\n{ask}").as_bytes(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generator::{generate_pit, generate_probe};

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
    fn followup_lists_the_chain_statements_and_the_contract() {
        for item in generate_probe() {
            let p = followup_prompt(&item);
            let last = &item.sessions.last().unwrap()[0];
            assert!(p.text.contains(last.as_str()));
            for r in chain(item.domain).relations_up_to(item.hop_depth) {
                assert!(p.text.contains(&format!("- {r}: ")), "{}", item.probe_id);
                assert_ne!(describe(r), "a statement of the chain", "{r}");
            }
            for g in &item.gold_invalidated {
                assert!(p.text.contains(&format!("- {}: ", g.as_str())));
            }
            assert!(p.text.ends_with(FOLLOWUP_CONTRACT));
        }
    }

    #[test]
    fn session_dates_follow_the_harness_convention() {
        assert_eq!(session_date(0), "2026-06-01");
        assert_eq!(session_date(8), "2026-06-09");
    }
}
