//! The generator against the checker: determinism, design counts, and mutations that
//! the checker must catch by item and field.

use probe::checker::{check_pit, check_probe, unbalanced_gold_pre, Finding, Stats};
use probe::generator::{generate_pit, generate_probe, to_json};
use probe::load::{parse_pit, parse_probe};
use probe::record::{Axis, Gold, Relation};
use std::collections::BTreeMap;

fn counts(pairs: &[(&str, usize)]) -> BTreeMap<String, usize> {
    pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
}

#[test]
fn generation_is_deterministic_byte_for_byte() {
    assert_eq!(to_json(&generate_probe()), to_json(&generate_probe()));
    assert_eq!(to_json(&generate_pit()), to_json(&generate_pit()));
}

#[test]
fn generated_files_match_their_frozen_hashes() {
    use probe::generator::{PIT_SHA256, PROBE_SHA256};
    use runner_engine::digest::sha256_hex;
    assert_eq!(
        sha256_hex(to_json(&generate_probe()).as_bytes()),
        PROBE_SHA256
    );
    assert_eq!(sha256_hex(to_json(&generate_pit()).as_bytes()), PIT_SHA256);
}

#[test]
fn generated_files_pass_the_checker() {
    let probe = generate_probe();
    let findings = check_probe(&probe);
    assert!(findings.is_empty(), "{findings:#?}");
    let pit = generate_pit();
    let findings = check_pit(&pit);
    assert!(findings.is_empty(), "{findings:#?}");
}

#[test]
fn generated_counts_follow_the_design() {
    let probe = generate_probe();
    let s = Stats::of(&probe);
    assert_eq!(s.items, 168);
    assert_eq!(
        s.hop_depth,
        counts(&[("1", 24), ("2", 48), ("3", 48), ("4", 48)])
    );
    assert_eq!(s.contradicted, counts(&[("asserted", 96), ("derived", 72)]));
    assert_eq!(s.axis, counts(&[("correction", 84), ("update", 84)]));
    assert_eq!(s.confidence, counts(&[("hedged", 84), ("high", 84)]));
    assert_eq!(s.density, counts(&[("adjacent", 84), ("distant", 84)]));
    assert_eq!(
        s.domain,
        counts(&[("employment", 56), ("residence", 56), ("training", 56)])
    );
    // 72 asserted items at k >= 2 plus the 4 training withdrawals.
    assert_eq!(s.gold_post_unknown, 76);
    assert_eq!(
        s.sessions,
        counts(&[("2", 84), ("3", 12), ("5", 24), ("7", 24), ("9", 24)])
    );
    let pit = generate_pit();
    assert_eq!(pit.len(), 8);
    assert_eq!(pit.iter().map(|i| i.queries.len()).sum::<usize>(), 24);
    let unknown = pit
        .iter()
        .flat_map(|i| &i.queries)
        .filter(|q| q.gold.is_unknown())
        .count();
    assert_eq!(unknown, 8);
}

#[test]
fn generated_files_round_trip_through_the_loader() {
    let probe = generate_probe();
    assert_eq!(
        parse_probe(to_json(&probe).as_bytes(), "probe.json").unwrap(),
        probe
    );
    let pit = generate_pit();
    assert_eq!(
        parse_pit(to_json(&pit).as_bytes(), "probe_pit.json").unwrap(),
        pit
    );
}

#[test]
fn correction_history_answers_the_corrected_value_in_the_past() {
    for item in generate_pit() {
        let first = &item.queries[1];
        let values: Vec<&str> = item
            .oracle_facts
            .iter()
            .flatten()
            .map(|f| f.object.as_str())
            .collect();
        let want = match item.scenario {
            probe::record::Scenario::DoubleUpdate => values[0],
            probe::record::Scenario::CorrectionThenUpdate => values[1],
        };
        assert_eq!(first.gold, Gold::Value(want.to_string()), "{}", item.pit_id);
    }
}

fn only(findings: &[Finding]) -> Vec<(String, String)> {
    findings
        .iter()
        .map(|f| (f.item.clone(), f.field.clone()))
        .collect()
}

#[test]
fn checker_names_the_item_and_field_of_a_mutated_gold() {
    let base = generate_probe();
    let target = 100;
    let id = base[target].probe_id.to_string();

    let mut items = base.clone();
    let other = match &items[target].gold_post {
        Gold::Unknown => Gold::Value("Somewhere Else".into()),
        Gold::Value(_) => Gold::Unknown,
    };
    items[target].gold_post = other;
    assert_eq!(
        only(&check_probe(&items)),
        vec![(id.clone(), "gold_post".to_string())]
    );

    let mut items = base.clone();
    items[target].gold_pre = Gold::Value("Not The Chain End".into());
    assert!(only(&check_probe(&items)).contains(&(id.clone(), "gold_pre".to_string())));

    let mut items = base.clone();
    items[target]
        .gold_invalidated
        .push(Relation("lives_in".into()));
    assert_eq!(
        only(&check_probe(&items)),
        vec![(id.clone(), "gold_invalidated".to_string())]
    );

    let mut items = base.clone();
    items[target].gold_axis = match items[target].axis {
        Axis::Update => Axis::Correction,
        Axis::Correction => Axis::Update,
    };
    let found = only(&check_probe(&items));
    assert!(
        found.contains(&(id.clone(), "gold_axis".to_string())),
        "{found:?}"
    );

    // gold_pre equal to gold_post is caught even where both are wrong.
    let mut items = base.clone();
    items[target].gold_post = items[target].gold_pre.clone();
    assert!(only(&check_probe(&items)).contains(&(id.clone(), "gold_post".to_string())));
}

#[test]
fn checker_catches_an_oracle_fact_edit_against_the_golds() {
    let mut items = generate_probe();
    // Rewrite the object of the last link of a deep item: the chain end no longer
    // matches gold_pre.
    let target = items.iter().position(|i| i.hop_depth.get() == 4).unwrap();
    let id = items[target].probe_id.to_string();
    let session = items[target]
        .oracle_facts
        .iter()
        .rposition(|f| f.iter().any(|x| x.subject != "user"))
        .unwrap();
    items[target].oracle_facts[session][0].object = "Elsewhere".into();
    assert!(only(&check_probe(&items)).contains(&(id, "gold_pre".to_string())));
}

#[test]
fn checker_catches_set_level_defects() {
    let base = generate_probe();
    let mut items = base.clone();
    items[5].probe_id = items[4].probe_id.clone();
    assert!(only(&check_probe(&items))
        .contains(&(base[4].probe_id.to_string(), "probe_id".to_string())));

    let mut items = base.clone();
    items.pop();
    let found = only(&check_probe(&items));
    assert!(found.contains(&("<file>".to_string(), "items".to_string())));
    assert!(found.contains(&("<file>".to_string(), "cells".to_string())));
}

#[test]
fn pit_checker_catches_a_mutated_query_gold() {
    let mut items = generate_pit();
    let id = items[3].pit_id.to_string();
    items[3].queries[1].gold = Gold::Value("Nowhere".into());
    assert_eq!(
        only(&check_pit(&items)),
        vec![(id.clone(), "queries[1].gold".to_string())]
    );
    let mut items = generate_pit();
    items[3].queries[0].gold = items[3].queries[2].gold.clone();
    assert!(only(&check_pit(&items)).contains(&(id, "queries[0].gold".to_string())));
}

#[test]
fn gold_pre_values_are_balanced_within_every_hop_and_domain_cell() {
    use probe::record::Domain;
    let items = generate_probe();
    assert!(unbalanced_gold_pre(&items).is_empty());
    // The daylight-saving question: half "yes", half "no", so always "yes" gets 50%.
    let dst: Vec<&str> = items
        .iter()
        .filter(|i| i.domain == Domain::Employment && i.hop_depth.get() == 4)
        .map(|i| i.gold_pre.as_str())
        .collect();
    assert_eq!(dst.len(), 16);
    let observes = dst.iter().filter(|v| v.contains("observes")).count();
    assert_eq!(observes, 8, "{dst:?}");
    // The Aleutian part of Hawaii-Aleutian observes DST; the zone is no longer used.
    let text = to_json(&items);
    assert!(!text.contains("Aleutian"));
    // One value pushed over its share is named with its cell.
    let mut skewed = items.clone();
    let at = skewed
        .iter()
        .position(|i| {
            i.domain == Domain::Employment
                && i.hop_depth.get() == 4
                && i.gold_pre.as_str().contains("standard")
        })
        .unwrap();
    skewed[at].gold_pre = Gold::Value("observes daylight saving time".into());
    let found = unbalanced_gold_pre(&skewed);
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(
        found[0].starts_with("cell employment/4 has unbalanced values"),
        "{found:?}"
    );
    assert!(only(&check_probe(&skewed)).contains(&("<file>".to_string(), "gold_pre".to_string())));
}
