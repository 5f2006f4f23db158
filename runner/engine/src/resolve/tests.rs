use super::served::{check_endpoint, server};
use super::*;
use crate::panel::Panel;
use crate::served::client::RetryPolicy;

/// The built-in panel plus `served-m`, a copy of a local entry that a server serves.
fn panel() -> Panel {
    let mut panel = Panel::builtin().unwrap();
    let mut entry = panel.models.values().next().unwrap().clone();
    entry.repo = "org/Served-M".into();
    entry.endpoint = Some("http://panel-host:8000/v1".into());
    panel.models.insert("served-m".into(), entry);
    panel
}

fn settings(endpoint: Option<&str>, tokenizer: Option<&str>) -> ServedSettings {
    ServedSettings {
        endpoint: endpoint.map(String::from),
        api_key: None,
        tokenizer: tokenizer.map(String::from),
        concurrency: 4,
        server_deterministic: false,
        policy: RetryPolicy::default(),
        traffic: Arc::default(),
    }
}

#[test]
fn an_endpoint_makes_any_name_served_a_baselines_and_a_local_panel_models_too() {
    let panel = panel();
    let local = panel.models.keys().find(|k| *k != "served-m").unwrap();
    for name in ["oracle", local.as_str(), "org/Some Model"] {
        let found = server(name, &settings(Some("http://h/v1"), None), &panel).unwrap();
        let found = found.unwrap_or_else(|| panic!("{name} is not served"));
        assert_eq!(found.endpoint, "http://h/v1");
        assert_eq!(found.model, name, "asked for under its own name");
        assert_eq!(found.tokenizer, None, "chat mode without --tokenizer");
    }
    // A served name labels the run by its last part, safe as a folder name; a panel
    // name as the panel has it.
    let s = |name| server(name, &settings(Some("http://h/v1"), None), &panel);
    assert_eq!(s("org/Some Model").unwrap().unwrap().label, "Some_Model");
    assert_eq!(s(local).unwrap().unwrap().label, *local);
}

#[test]
fn a_panel_entry_with_an_endpoint_is_served_under_its_repo_with_its_own_tokenizer() {
    let panel = panel();
    let found = server("served-m", &settings(None, None), &panel)
        .unwrap()
        .unwrap();
    assert_eq!(
        found,
        Server {
            endpoint: "http://panel-host:8000/v1".into(),
            model: "org/Served-M".into(),
            tokenizer: Some("served-m".into()),
            label: "served-m".into(),
        }
    );
    let other = server("served-m", &settings(None, Some("t")), &panel).unwrap();
    assert_eq!(other.unwrap().tokenizer.as_deref(), Some("t"));
    // --endpoint wins over the entry's, and the name is then asked for as typed.
    let flag = server("served-m", &settings(Some("http://h/v1"), None), &panel).unwrap();
    let flag = flag.unwrap();
    assert_eq!(
        (flag.endpoint.as_str(), flag.model.as_str()),
        ("http://h/v1", "served-m")
    );
}

#[test]
fn without_an_endpoint_a_name_is_local_and_served_only_flags_are_refused() {
    let panel = panel();
    let local = panel.models.keys().find(|k| *k != "served-m").unwrap();
    for name in ["oracle", local.as_str(), "some/folder"] {
        assert_eq!(server(name, &settings(None, None), &panel).unwrap(), None);
        let err = server(name, &settings(None, Some("t")), &panel).unwrap_err();
        assert_eq!(
            err.to_string(),
            "--tokenizer and --api-key-env apply to served models: give --endpoint"
        );
    }
    let mut keyed = settings(None, None);
    keyed.api_key = Some(ApiKey {
        var: "K".into(),
        value: Some("v".into()),
    });
    assert!(server("oracle", &keyed, &panel).is_err());
}

#[test]
fn an_endpoint_without_a_scheme_or_host_is_refused_before_connecting() {
    for bad in [
        "localhost:8000/v1",
        "http://",
        "http://:8000/v1",
        "http://h /v1",
    ] {
        assert!(check_endpoint(bad).is_err(), "{bad}");
    }
    for good in ["http://localhost:8000/v1", "https://user:k@h/v1"] {
        assert!(check_endpoint(good).is_ok(), "{good}");
    }
}
