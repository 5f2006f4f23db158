//! Pinned models (issue 43): the SHA-256 of models.toml checked against the bytes in
//! the cache, whatever the blobs are named, and revisions that must be commits.

use super::common::{runner_exe, s, scratch, text};
use runner_engine::candle::fixture::{write_fixture, Arch, Size};
use runner_engine::digest::sha256_hex;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub(super) const REVISION: &str = "0123456789abcdef0123456789abcdef01234567";

/// `model`'s files laid out as the Hugging Face cache holds `repo` at `revision`, the
/// weights a link to a blob named `blob`.
pub(super) fn cache(hub: &Path, model: &Path, repo: &str, revision: &str, blob: &str) -> PathBuf {
    let root = hub.join(format!("models--{}", repo.replace('/', "--")));
    let snap = root.join("snapshots").join(revision);
    std::fs::create_dir_all(&snap).unwrap();
    std::fs::create_dir_all(root.join("blobs")).unwrap();
    for entry in std::fs::read_dir(model).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        if name == "model.safetensors" {
            std::fs::copy(entry.path(), root.join("blobs").join(blob)).unwrap();
            std::os::unix::fs::symlink(format!("../../blobs/{blob}"), snap.join(&name)).unwrap();
        } else {
            std::fs::copy(entry.path(), snap.join(&name)).unwrap();
        }
    }
    root.join("blobs").join(blob)
}

fn sha256(path: &Path) -> String {
    sha256_hex(&std::fs::read(path).unwrap())
}

/// A panel of one model, `pinned`, in the cache as `org/fixture` at [`REVISION`].
pub(super) fn panel(dir: &Path, revision: &str, bytes: u64, digest: &str) -> PathBuf {
    let path = dir.join("panel.toml");
    std::fs::write(
        &path,
        format!(
            r#"[models.pinned]
repo = "org/fixture"
revision = "{revision}"
tokenizer_repo = "org/fixture"
tokenizer_revision = "{REVISION}"
arch = "qwen2"
dtype = "f32"
gated = false
license = "test"
files = [{{ name = "model.safetensors", bytes = {bytes}, sha256 = "{digest}" }}]

[models.pinned.chat]
rendered_system_user = "unused"
"#
        ),
    )
    .unwrap();
    path
}

fn runner_in(hub: &Path, args: &[&str]) -> Output {
    Command::new(runner_exe())
        .args(args)
        .env("HF_HUB_CACHE", hub)
        .env("HF_HUB_OFFLINE", "1")
        .env_remove("HF_ENDPOINT")
        .output()
        .unwrap()
}

#[track_caller]
fn refused(out: &Output) -> String {
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "not refused cleanly:\n{err}");
    err
}

fn find<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    match v {
        Value::Object(o) => o.get(key).or_else(|| o.values().find_map(|x| find(x, key))),
        _ => None,
    }
}

#[test]
fn a_cached_blob_named_by_the_pin_but_holding_a_fixture_does_not_run_as_the_panel_model() {
    let dir = scratch("forged");
    let model = dir.join("fixture");
    write_fixture(Arch::Qwen2, Size::Tiny, &model).unwrap();
    let hub = dir.join("hub");
    let pinned = "dd924a11b4c220f385b51ffa522daea7c9f3d850e31b162bb5661df483c6d3ee";
    let blob = cache(
        &hub,
        &model,
        "Qwen/Qwen2.5-1.5B-Instruct",
        "989aa7980e4cf806f80c7fef2b1adb7bc71aa306",
        pinned,
    );
    let out = runner_in(
        &hub,
        &[
            "generate",
            "--model",
            "qwen2.5-1.5b",
            "--prompt",
            "hi",
            "--device",
            "cpu",
        ],
    );
    let err = refused(&out);
    let size = std::fs::metadata(&blob).unwrap().len();
    let listed = text(&runner_in(&hub, &["models", "qwen2.5-1.5b"]).stdout);
    assert!(
        listed.contains(&format!("cached, but {size} bytes: not the pinned file")),
        "`runner models` calls a fixture in the pin's place cached: {listed}"
    );
    for part in [
        format!("holds {size} bytes"),
        "3087467144 bytes".into(),
        pinned.into(),
        blob.display().to_string(),
        "runner generate --model qwen2.5-1.5b".into(),
    ] {
        assert!(err.contains(&part), "{part:?} missing from: {err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_manifest_records_the_digest_computed_and_a_blob_changed_later_is_refused() {
    let dir = scratch("digest");
    let model = dir.join("fixture");
    super::common::write_suite_fixture(&model);
    let real = sha256(&model.join("model.safetensors"));
    let bytes = std::fs::metadata(model.join("model.safetensors"))
        .unwrap()
        .len();
    let hub = dir.join("hub");
    // The blob's name is not its hash: the name is no evidence of the content.
    let named = "0".repeat(64);
    let blob = cache(&hub, &model, "org/fixture", REVISION, &named);
    let panel = panel(&dir, REVISION, bytes, &real);
    let out = dir.join("out");
    let args = [
        "--model",
        "pinned",
        "--panel",
        s(&panel),
        "--condition",
        "full_graph",
        "--tasks",
        "belief",
        "--limit",
        "1",
        "--seeds",
        "42",
        "--max-new-tokens",
        "2",
        "--device",
        "cpu",
        "--quiet",
        "--out",
        s(&out),
    ];
    let o = runner_in(&hub, &args);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(out.join("pinned/creg-v1.0/manifest.json")).unwrap())
            .unwrap();
    let digests = find(&manifest, "weights_sha256").expect("weights_sha256 in the manifest");
    assert_eq!(digests["model.safetensors"], real.as_str());
    let models = |hub: &Path| {
        let o = runner_in(hub, &["models", "pinned", "--panel", s(&panel)]);
        assert!(o.status.success(), "{}", text(&o.stderr));
        text(&o.stdout)
    };
    let listed = models(&hub);
    assert!(listed.contains("cached, sha256 verified"), "{listed}");

    // The same bytes rewritten with one changed: same size, another digest.
    let mut content = std::fs::read(&blob).unwrap();
    let last = content.len() - 1;
    content[last] ^= 1;
    std::fs::write(&blob, &content).unwrap();
    let changed = sha256_hex(&content);
    let listed = models(&hub);
    assert!(
        listed.contains("cached, sha256 checked at first use"),
        "{listed}"
    );
    let err = refused(&runner_in(&hub, &args));
    for part in [&real, &changed, "runner generate --model pinned"] {
        assert!(err.contains(part), "{part:?} missing from: {err}");
    }
    let listed = models(&hub);
    assert!(
        listed.contains(&format!(
            "cached, but sha256 {changed}: not the pinned file"
        )),
        "{listed}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_panel_revision_that_is_a_path_is_refused_not_loaded() {
    let dir = scratch("revision");
    let model = dir.join("fixture");
    write_fixture(Arch::Qwen2, Size::Tiny, &model).unwrap();
    let digest = sha256(&model.join("model.safetensors"));
    let bytes = std::fs::metadata(model.join("model.safetensors"))
        .unwrap()
        .len();
    let hub = dir.join("hub");
    std::fs::create_dir_all(&hub).unwrap();
    // An absolute path replaces the cache folder it is joined to: the old lookup
    // loaded this folder as the pinned model.
    for revision in [s(&model), "../../.."] {
        let panel = panel(&dir, revision, bytes, &digest);
        let out = runner_in(
            &hub,
            &[
                "generate",
                "--model",
                "pinned",
                "--panel",
                s(&panel),
                "--prompt",
                "hi",
            ],
        );
        let err = refused(&out);
        assert!(
            err.contains("panel.toml") && err.contains("40-hex"),
            "{revision}: {err}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
