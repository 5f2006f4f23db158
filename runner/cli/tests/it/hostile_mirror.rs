//! A hostile `HF_ENDPOINT` mirror (issue 43): it answers every file of a pinned model
//! with headers that name paths outside the cache (`ETag: ../../../escaped`,
//! `X-Repo-Commit: ../../x`) and with weights other than the pinned ones. Nothing may
//! be written outside the cache, and the weights must not run.

use super::common::{runner_exe, scratch, text};
use runner_engine::candle::fixture::{write_fixture, Arch, Size};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Answers one request for `/<repo>/resolve/<rev>/<file>` with `model`'s file of that
/// name and the hostile headers; a `Range` request gets its first byte, as a hub does.
fn answer(mut stream: TcpStream, model: &Path, commit: &str) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut first = String::new();
    if reader.read_line(&mut first).is_err() {
        return;
    }
    let mut ranged = false;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        ranged |= line.to_ascii_lowercase().starts_with("range:");
    }
    let path = first.split_whitespace().nth(1).unwrap_or("/");
    let file = path.rsplit('/').next().unwrap_or_default();
    let body = std::fs::read(model.join(file)).unwrap_or_default();
    let (status, sent) = match (body.is_empty(), ranged) {
        (true, _) => ("404 Not Found", Vec::new()),
        (false, true) => ("206 Partial Content", body[..1].to_vec()),
        (false, false) => ("200 OK", body.clone()),
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nETag: \"../../../escaped\"\r\nX-Repo-Commit: {commit}\r\n\
         Content-Range: bytes 0-0/{}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len(),
        sent.len()
    );
    let _ = stream.write_all(head.as_bytes());
    let _ = stream.write_all(&sent);
    let _ = stream.flush();
    let mut rest = Vec::new();
    let _ = reader.read_to_end(&mut rest);
}

/// A mirror serving `model`'s files on 127.0.0.1 as `commit`, until the test process
/// ends.
fn mirror(model: PathBuf, commit: &'static str) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let model = model.clone();
            std::thread::spawn(move || answer(stream, &model, commit));
        }
    });
    format!("http://127.0.0.1:{port}")
}

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() && !p.is_symlink() {
            out.extend(files_under(&p));
        } else {
            out.push(p);
        }
    }
    out
}

const PINNED: &str = "989aa7980e4cf806f80c7fef2b1adb7bc71aa306";

#[test]
fn a_hostile_mirror_writes_nothing_outside_the_cache_and_its_weights_do_not_run() {
    let dir = scratch("mirror");
    let model = dir.join("fixture");
    write_fixture(Arch::Qwen2, Size::Tiny, &model).unwrap();
    // A commit header that is a path, then the pinned one (so that the files arrive and
    // the pins must catch the weights).
    for commit in ["../../x", PINNED] {
        // The cache three folders down: `../../../escaped` from its blobs folder lands
        // in `dir/a`, beside the cache.
        let base = dir.join(format!("a-{}", commit.len()));
        let hub = base.join("hub");
        std::fs::create_dir_all(&hub).unwrap();
        let out = Command::new(runner_exe())
            .args([
                "generate",
                "--model",
                "qwen2.5-1.5b",
                "--prompt",
                "hi",
                "--device",
                "cpu",
            ])
            .env("HF_HUB_CACHE", &hub)
            .env("HF_ENDPOINT", mirror(model.clone(), commit))
            .env_remove("HF_HUB_OFFLINE")
            .env_remove("HF_TOKEN")
            .output()
            .unwrap();
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{commit}: {err}");
        let outside: Vec<PathBuf> = files_under(&base)
            .into_iter()
            .filter(|p| !p.starts_with(&hub))
            .collect();
        assert!(
            outside.is_empty(),
            "{commit}: written outside the cache: {outside:?}"
        );
        assert!(
            err.contains("the pin in models.toml") || err.contains("not the pinned"),
            "{commit}: {err}"
        );
        assert!(
            !text(&out.stdout).contains("\"text\""),
            "the mirror's model ran"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
