//! The loader on bad input (errors name file, item and field) and on the published v0
//! file, which is read from `../shared` and skipped when that is absent.

use probe::checker::{check_probe, Stats};
use probe::generator::{generate_pit, generate_probe, to_json};
use probe::load::{load_probe, parse_any, parse_pit, parse_probe, LoadError, ProbeFile};
use serde_json::{json, Value};
use std::path::PathBuf;

fn generated() -> Value {
    serde_json::from_str(&to_json(&generate_probe())).unwrap()
}

fn item_error(bytes: &[u8]) -> (String, String, String) {
    match parse_probe(bytes, "bad.json") {
        Err(LoadError::Item {
            file, item, field, ..
        }) => (file, item, field),
        other => panic!("expected an item error, got {other:?}"),
    }
}

#[test]
fn truncated_file_is_a_syntax_error_naming_the_file() {
    let text = to_json(&generate_probe());
    let cut = &text.as_bytes()[..text.len() / 2];
    match parse_probe(cut, "probe.json") {
        Err(e @ LoadError::Syntax { .. }) => {
            let msg = e.to_string();
            assert!(
                msg.starts_with("probe.json: not valid JSON (line "),
                "{msg}"
            );
        }
        other => panic!("expected a syntax error, got {other:?}"),
    }
}

#[test]
fn missing_field_names_item_and_field() {
    let mut v = generated();
    let id = v[7]["probe_id"].as_str().unwrap().to_string();
    v[7].as_object_mut().unwrap().remove("gold_post");
    let bytes = serde_json::to_vec(&v).unwrap();
    assert_eq!(
        item_error(&bytes),
        ("bad.json".into(), id.clone(), "gold_post".into())
    );
    let msg = parse_probe(&bytes, "bad.json").unwrap_err().to_string();
    assert!(
        msg.contains(&id) && msg.contains("`gold_post`") && msg.contains("missing field"),
        "{msg}"
    );
}

#[test]
fn missing_nested_field_names_its_path() {
    let mut v = generated();
    let id = v[20]["probe_id"].as_str().unwrap().to_string();
    v[20]["oracle_facts"][0][0]
        .as_object_mut()
        .unwrap()
        .remove("is_correction");
    let bytes = serde_json::to_vec(&v).unwrap();
    assert_eq!(item_error(&bytes).1, id);
    assert_eq!(item_error(&bytes).2, "oracle_facts[0][0].is_correction");
}

#[test]
fn wrong_type_names_item_and_field() {
    let mut v = generated();
    let id = v[3]["probe_id"].as_str().unwrap().to_string();
    v[3]["hop_depth"] = json!("two");
    assert_eq!(
        item_error(&serde_json::to_vec(&v).unwrap()),
        ("bad.json".into(), id.clone(), "hop_depth".into())
    );

    let mut v = generated();
    v[3]["oracle_facts"][0][0]["confidence"] = json!("high");
    assert_eq!(
        item_error(&serde_json::to_vec(&v).unwrap()).2,
        "oracle_facts[0][0].confidence"
    );

    let mut v = generated();
    v[3]["density"] = json!("nearby");
    assert_eq!(item_error(&serde_json::to_vec(&v).unwrap()).2, "density");

    let mut v = generated();
    v[3]["hop_depth"] = json!(5);
    assert_eq!(item_error(&serde_json::to_vec(&v).unwrap()).2, "hop_depth");
}

#[test]
fn item_without_readable_id_is_named_by_index() {
    let mut v = generated();
    v[11]["probe_id"] = json!(42);
    assert_eq!(
        item_error(&serde_json::to_vec(&v).unwrap()),
        ("bad.json".into(), "#11".into(), "probe_id".into())
    );
}

#[test]
fn item_of_the_wrong_shape_is_named() {
    let mut v = generated();
    v[2] = json!(17);
    let (_, item, field) = item_error(&serde_json::to_vec(&v).unwrap());
    assert_eq!((item.as_str(), field.as_str()), ("#2", "<item>"));
}

#[test]
fn top_level_must_be_an_array() {
    assert!(matches!(
        parse_probe(b"{\"a\": 1}", "x.json"),
        Err(LoadError::NotAnArray { .. })
    ));
}

#[test]
fn pit_errors_name_the_query_field() {
    let mut v: Value = serde_json::from_str(&to_json(&generate_pit())).unwrap();
    let id = v[2]["pit_id"].as_str().unwrap().to_string();
    v[2]["queries"][1].as_object_mut().unwrap().remove("gold");
    match parse_pit(&serde_json::to_vec(&v).unwrap(), "pit.json") {
        Err(LoadError::Item { item, field, .. }) => {
            assert_eq!((item, field), (id, "queries[1].gold".to_string()))
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn kind_is_told_apart_by_the_id_field() {
    let pit = to_json(&generate_pit());
    assert!(matches!(parse_any(pit.as_bytes(), "p").unwrap(), ProbeFile::Pit(v) if v.len() == 8));
    let probe = to_json(&generate_probe());
    assert!(
        matches!(parse_any(probe.as_bytes(), "p").unwrap(), ProbeFile::Probe(v) if v.len() == 168)
    );
}

#[test]
fn io_error_names_the_file() {
    let e = load_probe(std::path::Path::new("no/such/probe.json")).unwrap_err();
    assert!(
        e.to_string().starts_with("no/such/probe.json: cannot read"),
        "{e}"
    );
}

/// The published v0 file beside the project; it is always there, so its absence fails.
pub fn v0_path() -> PathBuf {
    let p = crate::common::repo_root().join("../shared/reference/probe_v0.json");
    assert!(
        p.exists(),
        "{} is missing: the published v0 file must sit in the shared reference folder",
        p.display()
    );
    p
}

#[test]
fn published_v0_file_loads_and_passes_the_checker() {
    let path = v0_path();
    let items = load_probe(&path).unwrap();
    assert_eq!(items.len(), 168);
    let s = Stats::of(&items);
    // v0 writes hedged confidence as `low`; it must read as hedged.
    assert_eq!(s.confidence.get("hedged"), Some(&84));
    assert_eq!(s.gold_post_unknown, 76);
    let findings = check_probe(&items);
    assert!(findings.is_empty(), "{findings:#?}");
}
