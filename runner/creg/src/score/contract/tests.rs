use crate::score::contract::*;

const GOOD: &str = r#"{"target": "gauge-1.condition",
    "distribution": {"anomalous": 0.25, "normal": 0.75}, "top_state": "normal",
    "supporting_evidence_ids": ["obs-1"], "contradicting_evidence_ids": [], "active_contradictions": []}"#;

#[test]
fn a_clean_answer_is_valid() {
    let p = parse_belief(GOOD, FinishReason::Stop);
    assert_eq!(p.category, Category::Valid);
    let a = p.answer.unwrap();
    assert_eq!(a.p_anomalous, 0.25);
    assert_eq!(a.top_state, ReferenceState::Normal);
    assert_eq!(a.supporting_evidence, vec![EvidenceId::new("obs-1")]);
}

#[test]
fn an_unnormalized_distribution_is_renormalized_and_flagged() {
    let text = GOOD.replace("0.25", "25").replace("0.75", "75");
    let p = parse_belief(&text, FinishReason::Stop);
    assert_eq!(
        p.category,
        Category::Repaired {
            repairs: vec![Repair::RenormalizedDistribution]
        }
    );
    assert!((p.answer.unwrap().p_anomalous - 0.25).abs() < 1e-12);
}

#[test]
fn huge_figures_renormalize_without_overflow() {
    for (a, n, want) in [("1e308", "1e308", 0.5), ("1.5e308", "0.5e308", 0.75)] {
        let text = GOOD.replace("0.25", a).replace("0.75", n);
        let p = parse_belief(&text, FinishReason::Stop);
        assert_eq!(
            p.category,
            Category::Repaired {
                repairs: vec![Repair::RenormalizedDistribution]
            },
            "{text}"
        );
        let got = p.answer.unwrap().p_anomalous;
        assert!((got - want).abs() < 1e-12, "{a}/{n}: {got}");
    }
}

#[test]
fn a_cut_off_answer_is_truncated_whatever_it_recovers() {
    let cut = &GOOD[..GOOD.find("\"active_contradictions\"").unwrap() + 26];
    let p = parse_belief(cut, FinishReason::Length);
    assert_eq!(p.category, Category::Truncated { recovered: true });
    assert_eq!(p.answer.unwrap().top_state, ReferenceState::Normal);
    let p = parse_belief("{\"distribution\": {\"anom", FinishReason::Length);
    assert_eq!(p.category, Category::Truncated { recovered: false });
    assert!(p.category.is_failure());
}

#[test]
fn contract_breaches_say_why() {
    let cases = [
        ("I think it is normal.", Invalid::NoObject(NoObject::NoBrace)),
        (
            "{\"target\": \"gauge-1.condition\", \"top_state\": \"normal\"}",
            Invalid::MissingField("distribution".into()),
        ),
        (
            "{\"distribution\": {\"anomalous\": 0.5, \"normal\": 0.5}, \"top_state\": \"normal\"}",
            Invalid::MissingField("target".into()),
        ),
        (
            "{\"target\": \"gauge-1.condition\", \"distribution\": {\"anomalous\": 0.5, \"normal\": 0.5}, \"top_state\": \"broken\"}",
            Invalid::UnknownValue("top_state broken".into()),
        ),
        (
            "{\"target\": \"gauge-1.condition\", \"distribution\": {\"anomalous\": 0, \"normal\": 0}, \"top_state\": \"normal\"}",
            Invalid::BadDistribution("the probabilities sum to 0".into()),
        ),
        (
            "{\"target\": \"gauge-1.condition\", \"distribution\": {\"anomalous\": 0.5, \"normal\": 0.5}, \"top_state\": 3}",
            Invalid::WrongType("top_state".into()),
        ),
    ];
    for (text, why) in cases {
        let p = parse_belief(text, FinishReason::Stop);
        assert_eq!(p.category, Category::Invalid { why }, "{text}");
        assert!(p.answer.is_none());
    }
}

#[test]
fn other_field_names_and_extra_fields_are_repairs() {
    let renamed = GOOD.replace("supporting_evidence_ids", "supporting_evidence");
    let p = parse_belief(&renamed, FinishReason::Stop);
    assert_eq!(
        p.category,
        Category::Repaired {
            repairs: vec![Repair::RenamedField]
        }
    );
    let extra = GOOD.replace(
        "\"top_state\"",
        "\"confidence_note\": \"high\", \"top_state\"",
    );
    let p = parse_belief(&extra, FinishReason::Stop);
    assert_eq!(
        p.category,
        Category::Repaired {
            repairs: vec![Repair::ExtraField]
        }
    );
    let missing = GOOD.replace(", \"active_contradictions\": []", "");
    let p = parse_belief(&missing, FinishReason::Stop);
    assert_eq!(
        p.category,
        Category::Invalid {
            why: Invalid::MissingField("active_contradictions".into())
        }
    );
}

#[test]
fn spelling_variants_are_repaired_not_rejected() {
    let p = parse_action(
        "{\"action_type\": \" Request Observation\", \"target_entity_id\": \"gauge-1\"}",
        FinishReason::Stop,
    );
    assert_eq!(
        p.answer.unwrap().action_type,
        ActionType::RequestObservation
    );
    assert_eq!(
        p.category,
        Category::Repaired {
            repairs: vec![Repair::NormalizedSpelling]
        }
    );
    let p = parse_action(
        "{\"action_type\": \"shutdown\", \"target_entity_id\": \"gauge-1\"}",
        FinishReason::Stop,
    );
    assert_eq!(
        p.answer.unwrap().action_type,
        ActionType::Shutdown,
        "unsafe actions still parse"
    );
}

#[test]
fn no_input_panics_any_parser() {
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let pieces = [
        "{",
        "}",
        "[",
        "]",
        "\"",
        ":",
        ",",
        "distribution",
        "anomalous",
        "normal",
        "top_state",
        "0.5",
        "-1",
        "1e309",
        "null",
        "true",
        "\\",
        "obs-1",
        "contradictions",
        "\u{1F600}",
        " ",
        "action_type",
        "explanation",
        "disregarded_evidence",
        "evidence_id",
        "NaN",
    ];
    for _ in 0..20_000 {
        let mut s = String::new();
        for _ in 0..(state % 30) {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            s.push_str(pieces[(state % pieces.len() as u64) as usize]);
        }
        for finish in [FinishReason::Stop, FinishReason::Length] {
            let _ = parse_belief(&s, finish);
            let _ = parse_contradiction(&s, finish);
            let _ = parse_action(&s, finish);
            let _ = parse_explanation(&s, finish);
        }
    }
}
