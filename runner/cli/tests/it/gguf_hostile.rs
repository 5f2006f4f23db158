//! GGUF files built to break the header reader and the tokenizer (issue 64, item 5),
//! written byte by byte here: an alignment of 0, huge metadata arrays, a 1 MB token,
//! duplicate keys and tensors, overlapping tensors, tensor dims that wrap, a context
//! length of 2^63, a NaN epsilon, a template over its bound. Each is refused by
//! `runner generate` with exit 2 in a few seconds, naming the file and the key or
//! tensor: no panic (101), no backtrace, no minutes of work.

use super::common::{runner_exe, s, scratch_dir, text, within_a_minute};
use runner_engine::candle::fixture::{write_fixture, Arch, Size};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

/// A metadata value as GGUF stores it.
enum V {
    U32(u32),
    U64(u64),
    F32(f32),
    Str(String),
    Strs(Vec<String>),
    /// An array of `n` zero bytes.
    Bytes(usize),
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend((s.len() as u64).to_le_bytes());
    out.extend(s.as_bytes());
}

fn put_value(out: &mut Vec<u8>, v: &V) {
    let ty: u32 = match v {
        V::U32(_) => 4,
        V::U64(_) => 10,
        V::F32(_) => 6,
        V::Str(_) => 8,
        V::Strs(_) | V::Bytes(_) => 9,
    };
    out.extend(ty.to_le_bytes());
    match v {
        V::U32(x) => out.extend(x.to_le_bytes()),
        V::U64(x) => out.extend(x.to_le_bytes()),
        V::F32(x) => out.extend(x.to_le_bytes()),
        V::Str(s) => put_str(out, s),
        V::Strs(items) => {
            out.extend(8u32.to_le_bytes());
            out.extend((items.len() as u64).to_le_bytes());
            for s in items {
                put_str(out, s);
            }
        }
        V::Bytes(n) => {
            out.extend(0u32.to_le_bytes());
            out.extend((*n as u64).to_le_bytes());
            out.resize(out.len() + n, 0);
        }
    }
}

/// A GGUF v3 file: metadata, tensor infos (name, GGUF-order dims, type id, data offset),
/// padding to 32 and `data` zero bytes of tensor data.
struct Gguf {
    kv: Vec<(String, V)>,
    tensors: Vec<(String, Vec<u64>, u32, u64)>,
    data: usize,
}

impl Gguf {
    /// A small qwen2 file with a byte-level vocabulary and one f32 tensor.
    fn base() -> Self {
        let kv = vec![
            ("general.architecture", V::Str("qwen2".into())),
            ("qwen2.context_length", V::U32(64)),
            ("qwen2.block_count", V::U32(1)),
            ("qwen2.embedding_length", V::U32(8)),
            ("qwen2.feed_forward_length", V::U32(16)),
            ("qwen2.attention.head_count", V::U32(2)),
            ("qwen2.attention.layer_norm_rms_epsilon", V::F32(1e-6)),
            ("tokenizer.ggml.model", V::Str("gpt2".into())),
            (
                "tokenizer.ggml.tokens",
                V::Strs(["a", "b", "ab"].map(String::from).to_vec()),
            ),
            ("tokenizer.ggml.merges", V::Strs(vec!["a b".into()])),
        ];
        Gguf {
            kv: kv.into_iter().map(|(k, v)| (k.to_string(), v)).collect(),
            tensors: vec![("token_embd.weight".into(), vec![8, 3], 0, 0)],
            data: 96,
        }
    }

    fn set(mut self, key: &str, v: V) -> Self {
        self.kv.retain(|(k, _)| k != key);
        self.kv.push((key.into(), v));
        self
    }

    fn bytes(&self) -> Vec<u8> {
        let mut out = b"GGUF".to_vec();
        out.extend(3u32.to_le_bytes());
        out.extend((self.tensors.len() as u64).to_le_bytes());
        out.extend((self.kv.len() as u64).to_le_bytes());
        for (k, v) in &self.kv {
            put_str(&mut out, k);
            put_value(&mut out, v);
        }
        for (name, dims, ty, offset) in &self.tensors {
            put_str(&mut out, name);
            out.extend((dims.len() as u32).to_le_bytes());
            for d in dims {
                out.extend(d.to_le_bytes());
            }
            out.extend(ty.to_le_bytes());
            out.extend(offset.to_le_bytes());
        }
        out.resize(out.len().div_ceil(32) * 32 + self.data, 0);
        out
    }

    fn write(&self, name: &str) -> PathBuf {
        let path = scratch_dir(name).join("model.gguf");
        std::fs::write(&path, self.bytes()).unwrap();
        path
    }
}

/// `runner generate` on `model` with RUST_BACKTRACE=1 (a backtrace must not print),
/// killed past a minute; returns the output and the time it took.
fn generate(model: &Path, extra: &[&str]) -> (Output, Duration) {
    let mut cmd = Command::new(runner_exe());
    cmd.args([
        "generate",
        "--model",
        s(model),
        "--device",
        "cpu",
        "--greedy",
    ])
    .args(["--prompt", "hi", "--max-new-tokens", "4"])
    .args(extra)
    .env("RUST_BACKTRACE", "1");
    within_a_minute(&mut cmd)
}

/// The error of a file that must be refused: exit 2 within 10 s, no panic or
/// backtrace, the file named in a message of bounded length, and each of `needles`.
#[track_caller]
fn refused(file: &Path, needles: &[&str]) -> String {
    refused_with(file, &[], needles)
}

#[track_caller]
fn refused_with(file: &Path, extra: &[&str], needles: &[&str]) -> String {
    let (out, took) = generate(file, extra);
    let err = text(&out.stderr);
    let head: String = err.chars().take(2000).collect();
    assert_eq!(
        out.status.code(),
        Some(2),
        "not refused cleanly after {took:?}:\n{head}"
    );
    assert!(took < Duration::from_secs(10), "took {took:?}: {head}");
    assert!(
        !err.contains("panicked") && !err.contains("backtrace"),
        "{head}"
    );
    assert!(err.len() < 4096, "{} bytes of stderr: {head}", err.len());
    assert!(err.contains(s(file)), "the file is named: {err}");
    for n in needles {
        assert!(err.contains(n), "{n:?} is not in: {err}");
    }
    let _ = std::fs::remove_dir_all(file.parent().unwrap());
    err
}

#[test]
fn a_gguf_alignment_of_0_or_not_a_power_of_two_is_refused_not_a_panic() {
    for a in [0, 3, 48] {
        let file = Gguf::base()
            .set("general.alignment", V::U32(a))
            .write(&format!("align-{a}"));
        refused(
            &file,
            &["general.alignment", &format!("is {a}"), "power of two"],
        );
    }
}

#[test]
fn a_huge_metadata_array_is_refused_before_candle_builds_it() {
    for mb in [16, 64] {
        let file = Gguf::base()
            .set("general.padding", V::Bytes(mb << 20))
            .write(&format!("array-{mb}"));
        refused(&file, &["general.padding", "over the bound of 1048576"]);
    }
}

#[test]
fn a_sentencepiece_token_of_1_mb_is_refused_naming_its_index() {
    let mut tokens: Vec<String> = ["<unk>", "a", "b"].map(String::from).to_vec();
    tokens.push("ab".repeat(1 << 19));
    let file = Gguf::base()
        .set("tokenizer.ggml.model", V::Str("llama".into()))
        .set("tokenizer.ggml.tokens", V::Strs(tokens))
        .write("long-token");
    refused(
        &file,
        &["tokenizer.ggml.tokens", "token 3 is 1048576 bytes", "4096"],
    );
}

#[test]
fn duplicate_keys_and_tensor_names_and_overlapping_tensors_are_refused_by_name() {
    let mut g = Gguf::base();
    g.kv.push(("qwen2.block_count".into(), V::U32(40)));
    refused(
        &g.write("dup-key"),
        &["metadata key qwen2.block_count appears twice"],
    );

    let mut g = Gguf::base();
    g.tensors.push(("token_embd.weight".into(), vec![8], 0, 96));
    g.data += 32;
    refused(
        &g.write("dup-tensor"),
        &["tensor token_embd.weight appears twice"],
    );

    let mut g = Gguf::base();
    g.tensors
        .push(("output_norm.weight".into(), vec![8], 0, 64));
    refused(
        &g.write("overlap"),
        &["token_embd.weight", "output_norm.weight", "overlap"],
    );
}

#[test]
fn a_chat_template_over_1_mib_in_a_gguf_is_refused_naming_the_key_and_bound() {
    let template = "{{ 1 }}".repeat((1 << 20) / 7 + 1);
    let file = Gguf::base()
        .set("tokenizer.chat_template", V::Str(template))
        .write("template");
    refused(
        &file,
        &["tokenizer.chat_template", "over the bound of 1 MiB"],
    );
}

#[test]
fn a_context_length_of_2_pow_63_and_a_nan_epsilon_are_refused_naming_key_and_value() {
    let file = Gguf::base()
        .set("qwen2.context_length", V::U64(1 << 63))
        .write("context");
    refused(
        &file,
        &[
            "qwen2.context_length",
            "9223372036854775808",
            "bound of 1 to 4294967296",
        ],
    );
    let file = Gguf::base()
        .set("qwen2.attention.layer_norm_rms_epsilon", V::F32(f32::NAN))
        .write("eps");
    refused(
        &file,
        &[
            "key qwen2.attention.layer_norm_rms_epsilon is NaN",
            "finite",
        ],
    );
}

#[test]
fn tensor_dims_whose_product_wraps_are_refused_without_a_backtrace() {
    let mut g = Gguf::base();
    g.tensors[0].1 = vec![1 << 32, 1 << 32, 2];
    refused(
        &g.write("wrap"),
        &[
            "tensor token_embd.weight",
            "[4294967296, 4294967296, 2]",
            "overflows",
        ],
    );
}

/// A template with a syntax error at the end of 1 MiB (the bound) of one line: the
/// message says where, with an excerpt, and not the whole source (the old error echoed
/// every byte of it, 20 MB for a 20 MB template).
#[test]
fn a_template_syntax_error_reports_line_and_column_and_an_excerpt_only() {
    let dir = scratch_dir("syntax");
    let model = dir.join("model");
    write_fixture(Arch::Qwen2, Size::Tiny, &model).unwrap();
    let template = dir.join("t.jinja");
    let mut source = "x".repeat((1 << 20) - 64);
    source.push_str("{% if %}");
    std::fs::write(&template, &source).unwrap();
    let (out, took) = generate(&model, &["--chat-template", s(&template)]);
    let err = text(&out.stderr);
    let head: String = err.chars().take(2000).collect();
    assert_eq!(out.status.code(), Some(2), "{head}");
    assert!(took < Duration::from_secs(30), "took {took:?}");
    assert!(err.len() < 4096, "{} bytes of stderr: {head}", err.len());
    assert!(err.contains("syntax error"), "{err}");
    assert!(err.contains(":1") && err.contains("column"), "{err}");
    assert!(err.contains("{% if %}"), "an excerpt: {err}");
    let _ = std::fs::remove_dir_all(dir);
}
