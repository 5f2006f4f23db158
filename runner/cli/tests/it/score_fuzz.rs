//! Random and adversarial model outputs through the parser and the scorer: none may
//! panic, and none may take long (the extractor is linear in its input).

use creg::frozen::frozen_suite;
use creg::render::question::{questions, Question};
use creg::score::sample::score_text;
use runner_engine::FinishReason;
use std::time::{Duration, Instant};

/// xorshift64: deterministic, so a failure replays.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

const PIECES: [&str; 34] = [
    "{",
    "}",
    "[",
    "]",
    "\"",
    ":",
    ",",
    " ",
    "\n",
    "\\",
    "distribution",
    "anomalous",
    "normal",
    "top_state",
    "target",
    "gauge-1.condition",
    "supporting_evidence_ids",
    "active_contradictions",
    "action_type",
    "explanation",
    "0.5",
    "1e308",
    "-1",
    "NaN",
    "null",
    "true",
    "obs-1",
    "obs-distractor",
    "```json",
    "\u{1F600}",
    "\u{e9}",
    "%",
    ",}",
    "{\"distribution\": {\"anomalous\": ",
];

/// A mutation of a well-formed answer: cut, duplicated or spliced.
fn mutate(rng: &mut Rng, base: &str) -> String {
    let cut = |rng: &mut Rng, s: &str| {
        let mut at = rng.below(s.len() + 1);
        while !s.is_char_boundary(at) {
            at -= 1;
        }
        at
    };
    match rng.below(4) {
        0 => base[..cut(rng, base)].to_string(),
        1 => {
            let at = cut(rng, base);
            format!(
                "{}{}{}",
                &base[..at],
                PIECES[rng.below(PIECES.len())],
                &base[at..]
            )
        }
        2 => format!(
            "Let me think {{step}}. {base} and {}",
            &base[..cut(rng, base)]
        ),
        _ => base.replace(['0', '1'], PIECES[rng.below(PIECES.len())]),
    }
}

#[test]
fn a_hundred_thousand_hostile_outputs_parse_and_score_without_panic_or_stall() {
    let suite = frozen_suite().unwrap();
    let scenario = &suite[0];
    let qs = questions(scenario);
    let good = r#"{"target": "gauge-1.condition", "distribution": {"anomalous": 0.25, "normal": 0.75}, "top_state": "normal", "supporting_evidence_ids": ["obs-1"], "contradicting_evidence_ids": [], "active_contradictions": [{"involved_evidence_ids": ["obs-1", "obs-2"], "type": "direct"}]}"#;
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    // A bound against super-linear blow-ups only, not a speed measurement: the slowest
    // realistic sample takes microseconds, but CI runs tests in parallel on two busy
    // cores with little optimisation, where a 250 ms bound was once exceeded.
    let per_sample = Duration::from_secs(2);
    let mut slowest = (Duration::ZERO, String::new());
    let started = Instant::now();
    for i in 0..100_000usize {
        let text = match i % 5 {
            0 | 1 => {
                let n = rng.below(60);
                (0..n).map(|_| PIECES[rng.below(PIECES.len())]).collect()
            }
            2 | 3 => mutate(&mut rng, good),
            _ => {
                // Degenerate runs a stuck model writes, a few kilobytes long.
                let n = 1 + rng.below(4_000);
                let piece = ["{", "[", "{\"a\":", "\"", "{\"a\": [", ",", "{}"][rng.below(7)];
                format!("{}{}", &good[..rng.below(good.len() / 2)], piece.repeat(n))
            }
        };
        let q = qs[rng.below(qs.len())];
        let finish = if rng.below(2) == 0 {
            FinishReason::Stop
        } else {
            FinishReason::Length
        };
        let t = Instant::now();
        let score = score_text(scenario, q, &text, finish);
        let took = t.elapsed();
        assert!(score.is_some(), "every question of the scenario exists");
        if took > slowest.0 {
            slowest = (took, text.chars().take(80).collect());
        }
        assert!(
            took < per_sample,
            "sample {i} took {took:?}: {:?}",
            text.chars().take(80).collect::<String>()
        );
    }
    eprintln!(
        "100,000 samples in {:?}; slowest {:?} ({:?}...)",
        started.elapsed(),
        slowest.0,
        slowest.1
    );
}

#[test]
fn a_megabyte_of_braces_or_nested_arrays_scores_in_well_under_a_second() {
    let suite = frozen_suite().unwrap();
    let q = Question::Belief { step: 1 };
    let mb = 1 << 20;
    let cases = [
        "{".repeat(mb),
        format!("{{\"a\": {}{}}}", "[".repeat(mb / 2), "]".repeat(mb / 2)),
        format!("{{\"a\": {}", "[".repeat(mb)),
        "{\"a\":".repeat(mb / 5),
        "{\"a\": [1,]".repeat(mb / 10),
    ];
    for text in &cases {
        for finish in [FinishReason::Stop, FinishReason::Length] {
            let t = Instant::now();
            let score = score_text(&suite[0], q, text, finish).unwrap();
            let took = t.elapsed();
            // Milliseconds in a release build (`runner score --bench`); the bound is loose
            // for busy CI machines and the test profile. The old cubic extractor took
            // hours on a megabyte of `{`.
            assert!(took < Duration::from_secs(5), "{:?}: {took:?}", &text[..12]);
            assert_eq!(
                score.category(),
                if finish == FinishReason::Stop {
                    "invalid"
                } else {
                    "truncated"
                }
            );
        }
    }
}
