//! The replies of issue 45, each scored as a grader reads it: a reply is read for its
//! claims about the asked relation, not for whether the gold value appears somewhere in
//! it (docs/probe-answers.md).

use probe::generator::{generate_pit, generate_probe};
use probe::record::{Gold, ProbeItem};
use probe::render::probe_prompts;
use probe::score::{score_pit_query, score_probe_item, Answer, Outcome, ProbeResponse};

/// An item asking for the employer (gold after the change a value), or any item whose
/// gold after the change is "unknown".
fn employer_item(gold_unknown: bool) -> ProbeItem {
    generate_probe()
        .into_iter()
        .find(|i| {
            if gold_unknown {
                i.gold_post.is_unknown()
            } else {
                i.question == "Who is my employer?"
            }
        })
        .expect("such an item")
}

fn pre(item: &ProbeItem, text: &str) -> Outcome {
    score_probe_item(
        item,
        &ProbeResponse {
            pre: Answer::text(text),
            ..ProbeResponse::default()
        },
    )
    .pre
}

fn post(item: &ProbeItem, text: &str) -> Outcome {
    score_probe_item(
        item,
        &ProbeResponse {
            post: Answer::text(text),
            ..ProbeResponse::default()
        },
    )
    .post
}

#[test]
fn a_negated_mention_asserts_nothing() {
    let it = employer_item(false);
    let v = it.gold_pre.as_str();
    let text = format!("I'm glad to know that you're not a customer of {v}. Have a nice day!");
    assert_eq!(pre(&it, &text), Outcome::NoAnswer);
    let text = format!("You no longer work at {v}.");
    assert_ne!(pre(&it, &text), Outcome::Correct);
    // The same value asserted is still credited.
    assert_eq!(pre(&it, &format!("You work at {v}.")), Outcome::Correct);
}

#[test]
fn an_invented_session_quoting_the_user_is_no_answer() {
    let it = employer_item(false);
    let v = it.gold_pre.as_str();
    let text =
        format!("Session 5 (2026-06-05):\nUser: Quick check, my employer is {v}.\nUser: Thanks!");
    assert_eq!(pre(&it, &text), Outcome::NoAnswer);
    let text = format!("Sure. Here is what you told me: \"my employer is {v}.\"");
    assert_eq!(pre(&it, &text), Outcome::NoAnswer);
    // An answer followed by an invented conversation is read up to the conversation.
    let text = format!("{v}\nUser: And where do I live?\nAssistant: Boise.");
    assert_eq!(pre(&it, &text), Outcome::Correct);
}

#[test]
fn a_restated_prompt_or_pasted_turns_are_no_answer() {
    let it = employer_item(false);
    let [pre_prompt, post_prompt] = probe_prompts(&it);
    assert_eq!(pre(&it, &pre_prompt.text), Outcome::NoAnswer);
    assert_eq!(post(&it, &post_prompt.text), Outcome::NoAnswer);
    // The turns without their markers: the user's words in the first person.
    let pasted: Vec<String> = it.sessions[..it.sessions.len() - 1]
        .iter()
        .flatten()
        .cloned()
        .collect();
    assert_eq!(pre(&it, &pasted.join("\n")), Outcome::NoAnswer);
    let unknown = employer_item(true);
    let pasted: Vec<String> = unknown.sessions.iter().flatten().cloned().collect();
    assert_eq!(post(&unknown, &pasted.join(" ")), Outcome::NoAnswer);
}

#[test]
fn a_phrase_inside_an_explanation_after_an_answer_is_not_a_decline() {
    let reply = "Let me think. Answer: New York City. This is a classic example of a \
                 \"missing information\" fallacy.";
    assert_eq!(post(&employer_item(true), reply), Outcome::Hallucinated);
    assert_eq!(post(&employer_item(false), reply), Outcome::Other);
    // A sentence that does decline still does.
    assert_eq!(
        post(
            &employer_item(true),
            "I'm missing information about that now."
        ),
        Outcome::Abstain
    );
}

#[test]
fn a_reply_naming_no_value_is_not_hallucinated() {
    let it = employer_item(true);
    assert_eq!(
        post(&it, "You've already answered the question."),
        Outcome::NoAnswer
    );
    assert_eq!(post(&it, "Acme Robotics hired you."), Outcome::Hallucinated);
}

#[test]
fn pit_queries_read_claims_too() {
    let items = generate_pit();
    let it = &items[0];
    let q = it
        .queries
        .iter()
        .find(|q| matches!(q.gold, Gold::Value(_)))
        .expect("a query with a value");
    let Gold::Value(v) = &q.gold else {
        unreachable!()
    };
    let quoted = format!("User: I started working for {v} in March.");
    assert_eq!(
        score_pit_query(it, q, &Answer::text(&quoted)).outcome,
        Outcome::NoAnswer
    );
    assert_eq!(
        score_pit_query(it, q, &Answer::text(format!("As of that date, {v}."))).outcome,
        Outcome::Correct
    );
}

#[test]
fn a_model_that_repeats_the_prompt_scores_nothing_and_the_headline_says_why() {
    let items = generate_probe();
    let responses: Vec<ProbeResponse> = items
        .iter()
        .map(|it| {
            let [pre, post] = probe_prompts(it);
            ProbeResponse {
                pre: Answer::text(pre.text),
                post: Answer::text(post.text),
                ..ProbeResponse::default()
            }
        })
        .collect();
    let pairs: Vec<(&ProbeItem, &ProbeResponse)> = items.iter().zip(&responses).collect();
    let r = probe::score::score_probe("echo", &pairs);
    assert_eq!(r.pre_acc.map(|e| e.mean), Some(0.0));
    assert_eq!(r.post_acc.map(|e| e.mean), Some(0.0));
    assert_eq!(r.stale_rate.map(|e| e.mean), Some(0.0));
    assert_eq!(r.unusable_rate.map(|e| e.mean), Some(1.0));
    let column = probe::report::words::HEADLINE
        .iter()
        .find(|m| m.path == "probe/unusable_rate")
        .expect("the headline has an unusable-replies column");
    assert_eq!((column.get)(&r).map(|e| e.mean), Some(1.0));
}
