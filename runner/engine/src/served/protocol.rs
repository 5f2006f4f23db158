//! The OpenAI-compatible request and response bodies: what one (request, seed) sends,
//! and what the runner reads back.

use crate::digest::sha256_hex;
use crate::served::wire::Unreadable;
use crate::{FinishReason, Message, Sampling};
use serde::Deserialize;
use serde_json::{json, Map, Value};

/// How prompts reach the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromptMode {
    /// The runner renders the chat template with its own tokenizer files and sends the
    /// text to `/completions`: token for token what the embedded engine would decode.
    Completions,
    /// The chat turns go to `/chat/completions`; the server's chat template applies.
    Chat,
}

impl PromptMode {
    pub fn name(self) -> &'static str {
        match self {
            PromptMode::Completions => "completions",
            PromptMode::Chat => "chat",
        }
    }

    pub fn path(self) -> &'static str {
        match self {
            PromptMode::Completions => "/completions",
            PromptMode::Chat => "/chat/completions",
        }
    }
}

/// How the sampling settings the protocol fixes beyond temperature and top-p (no top-k,
/// no min-p, no repetition penalty) are said to a server, so that a model's
/// generation_config defaults cannot change them. Servers differ: the first one a
/// server accepts is used, and the manifest records it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// `top_k`, `min_p` and `repetition_penalty` as extra body fields (vLLM, SGLang,
    /// llama.cpp's server), top-k off as -1.
    ExtraFields,
    /// The same fields with top-k off as 0, for servers that refuse -1
    /// (llama-cpp-python's, which otherwise defaults to a top-k of 40).
    ExtraFieldsTopKZero,
    /// A `generation_config` JSON string (transformers' `serve`, which refuses unknown
    /// fields); unset values there fall back to the model's own config, so every
    /// setting that matters is given.
    GenerationConfig,
    /// Only the OpenAI fields: the server's defaults for the rest apply.
    Plain,
}

impl Dialect {
    pub const ALL: [Dialect; 4] = [
        Dialect::ExtraFields,
        Dialect::ExtraFieldsTopKZero,
        Dialect::GenerationConfig,
        Dialect::Plain,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Dialect::ExtraFields => "extra_fields",
            Dialect::ExtraFieldsTopKZero => "extra_fields_top_k_0",
            Dialect::GenerationConfig => "generation_config",
            Dialect::Plain => "plain",
        }
    }
}

/// What goes to the server besides the prompt.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BodySpec {
    pub sampling: Sampling,
    pub max_tokens: usize,
    pub dialect: Dialect,
}

/// The seed sent for sample `seed` of request `request_id`: distinct prompts get
/// distinct seeds, and 31 bits fit every server's seed type (some take int32).
pub fn server_seed(request_id: &str, seed: u64) -> u64 {
    let hex = sha256_hex(format!("{request_id}:{seed}").as_bytes());
    u64::from_str_radix(&hex[..8], 16).unwrap_or(0) & 0x7fff_ffff
}

pub const SEED_RULE: &str =
    "first 31 bits of sha256(\"<request id>:<protocol seed>\"), one request per (prompt, seed)";

/// The body's sampling fields (everything but model, prompt and seed).
pub fn sampling_fields(spec: &BodySpec) -> Map<String, Value> {
    let mut body = Map::new();
    let typed = |x: f32| json!(x.to_string().parse::<f64>().unwrap_or(f64::from(x)));
    let (do_sample, temperature, top_p) = match spec.sampling {
        Sampling::Greedy => (false, json!(0.0), None),
        Sampling::TopP { temperature, top_p } => (true, typed(temperature), Some(typed(top_p))),
    };
    body.insert("temperature".into(), temperature);
    if let Some(p) = top_p {
        body.insert("top_p".into(), p);
    }
    body.insert("max_tokens".into(), json!(spec.max_tokens));
    match spec.dialect {
        Dialect::ExtraFields | Dialect::ExtraFieldsTopKZero => {
            let off = match spec.dialect {
                Dialect::ExtraFields => -1,
                _ => 0,
            };
            body.insert("top_k".into(), json!(off));
            body.insert("min_p".into(), json!(0.0));
            body.insert("repetition_penalty".into(), json!(1.0));
        }
        Dialect::GenerationConfig => {
            let config = json!({
                "do_sample": do_sample,
                "top_k": 0,
                "min_p": 0.0,
                "repetition_penalty": 1.0,
                "max_new_tokens": spec.max_tokens,
            });
            body.insert("generation_config".into(), json!(config.to_string()));
        }
        Dialect::Plain => {}
    }
    body
}

/// The prompt as sent: rendered text, or chat turns.
#[derive(Debug, Clone, PartialEq)]
pub enum Payload {
    Text(String),
    Chat(Vec<Message>),
}

pub fn body(model: &str, payload: &Payload, spec: &BodySpec, seed: Option<u64>) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    match payload {
        Payload::Text(t) => body.insert("prompt".into(), json!(t)),
        Payload::Chat(m) => body.insert("messages".into(), json!(m)),
    };
    body.extend(sampling_fields(spec));
    if let Some(s) = seed {
        body.insert("seed".into(), json!(s));
    }
    body.insert("stream".into(), json!(false));
    Value::Object(body)
}

/// One answer, as read from the server.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub text: String,
    pub finish_reason: FinishReason,
    pub prompt_tokens: Option<usize>,
    pub completion_tokens: Option<usize>,
    /// Generated ids, where the server returns them (vLLM's `return_token_ids`).
    pub token_ids: Option<Vec<u32>>,
    /// The model the server says answered.
    pub model: Option<String>,
}

#[derive(Deserialize)]
struct Response {
    #[serde(default)]
    model: Option<String>,
    choices: Vec<Choice>,
    #[serde(default)]
    usage: Option<Usage>,
}

#[derive(Deserialize)]
struct Choice {
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    message: Option<ChatMessage>,
    #[serde(default)]
    finish_reason: Option<String>,
    #[serde(default)]
    token_ids: Option<Vec<u32>>,
}

#[derive(Deserialize)]
struct ChatMessage {
    #[serde(default)]
    content: Option<String>,
}

#[derive(Deserialize)]
struct Usage {
    #[serde(default)]
    prompt_tokens: Option<usize>,
    #[serde(default)]
    completion_tokens: Option<usize>,
}

/// The largest token count believed from a server's `usage`: no context holds more,
/// and sums of such counts cannot overflow.
pub const MAX_USAGE_TOKENS: usize = 1 << 31;

/// Reads a 2xx body; `Err` says what is wrong with it. A body cut off by a dropped
/// connection (it ends early), or a sample the server says it aborted, is worth another
/// try. A complete answer that cannot be used (malformed JSON such as a lone surrogate
/// escape, another shape, no choice, a content-filter finish, a negative or implausible
/// token count) is what the server answers every time: the sample is kept as failed.
pub fn parse_answer(text: &str) -> Result<Answer, Unreadable> {
    parse(text, true)
}

/// Like [`parse_answer`] for the one-token request that finds the server's dialect: a
/// chat message without content is a completion of the right shape there (a reasoning
/// model's one token goes to its reasoning, not its content), though not a sample.
pub fn parse_probe_answer(text: &str) -> Result<Answer, Unreadable> {
    parse(text, false)
}

fn parse(text: &str, content_required: bool) -> Result<Answer, Unreadable> {
    let r: Response = serde_json::from_str(text).map_err(|e| {
        let message = format!(
            "the server's answer is not a completion ({e}): {}",
            clip(text)
        );
        match e.classify() {
            serde_json::error::Category::Syntax | serde_json::error::Category::Data => {
                Unreadable::permanent(message)
            }
            serde_json::error::Category::Eof | serde_json::error::Category::Io => {
                Unreadable::retry(message)
            }
        }
    })?;
    let Some(c) = r.choices.into_iter().next() else {
        return Err(Unreadable::permanent(format!(
            "the server's answer has no choice: {}",
            clip(text)
        )));
    };
    let text = match (c.text, c.message) {
        (Some(t), _) => t,
        (None, Some(ChatMessage { content: Some(t) })) => t,
        // `content: null` (or none) is not an empty answer: nothing was said to score.
        (None, Some(_)) if content_required => {
            return Err(Unreadable::permanent(
                "the server's message has no content (content is null or missing)",
            ))
        }
        (None, Some(_)) => String::new(),
        (None, None) => {
            return Err(Unreadable::permanent(
                "the server's choice has neither text nor message",
            ))
        }
    };
    let finish_reason = match c.finish_reason.as_deref() {
        Some("length") => FinishReason::Length,
        Some("stop" | "eos" | "eos_token" | "stop_sequence") => FinishReason::Stop,
        // vLLM's word for a request it dropped (a restart, a preemption): ask again.
        Some("abort") => {
            return Err(Unreadable::retry(
                "the server aborted the sample (finish reason \"abort\")",
            ))
        }
        other => {
            return Err(Unreadable::permanent(format!(
                "the server ended the sample with finish reason {other:?} (expected stop or length)"
            )))
        }
    };
    let count = |name: &str, n: Option<usize>| match n {
        Some(n) if n > MAX_USAGE_TOKENS => Err(Unreadable::permanent(format!(
            "the server's usage counts {n} {name} tokens, more than any context holds"
        ))),
        n => Ok(n),
    };
    let usage = r.usage.as_ref();
    Ok(Answer {
        text,
        finish_reason,
        prompt_tokens: count("prompt", usage.and_then(|u| u.prompt_tokens))?,
        completion_tokens: count("completion", usage.and_then(|u| u.completion_tokens))?,
        token_ids: c.token_ids,
        model: r.model,
    })
}

/// The server's own words from an error body: OpenAI's `error.message`, FastAPI's
/// `detail`, or the raw text.
pub fn server_message(text: &str) -> String {
    let v: Option<Value> = serde_json::from_str(text).ok();
    let found = v.as_ref().and_then(|v| {
        [
            v.pointer("/error/message"),
            v.pointer("/detail"),
            v.pointer("/message"),
            v.pointer("/error"),
        ]
        .into_iter()
        .flatten()
        .next()
        .map(|m| match m {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
    });
    found.unwrap_or_else(|| clip(text))
}

fn clip(text: &str) -> String {
    let t = text.trim();
    match t.char_indices().nth(300) {
        Some((i, _)) => format!("{}...", &t[..i]),
        None => t.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocol_sampling_is_sent_as_typed_with_explicit_overrides() {
        let spec = BodySpec {
            sampling: Sampling::TopP {
                temperature: 0.2,
                top_p: 0.9,
            },
            max_tokens: 512,
            dialect: Dialect::ExtraFields,
        };
        let b = body("m", &Payload::Text("hi".into()), &spec, Some(7));
        assert_eq!(b["temperature"], json!(0.2));
        assert_eq!(b["top_p"], json!(0.9));
        assert_eq!(b["max_tokens"], json!(512));
        assert_eq!(b["top_k"], json!(-1));
        assert_eq!(b["repetition_penalty"], json!(1.0));
        let zero = sampling_fields(&BodySpec {
            dialect: Dialect::ExtraFieldsTopKZero,
            ..spec
        });
        assert_eq!(
            zero["top_k"],
            json!(0),
            "top-k off as llama-cpp-python says it"
        );
        assert_eq!(zero["min_p"], json!(0.0));
        assert_eq!(b["seed"], json!(7));
        let g = sampling_fields(&BodySpec {
            dialect: Dialect::GenerationConfig,
            ..spec
        });
        let inner: Value = serde_json::from_str(g["generation_config"].as_str().unwrap()).unwrap();
        assert_eq!(inner["top_k"], json!(0));
        assert_eq!(inner["do_sample"], json!(true));
        assert!(g.get("top_k").is_none());
        let plain = sampling_fields(&BodySpec {
            dialect: Dialect::Plain,
            ..spec
        });
        assert_eq!(
            plain.keys().collect::<Vec<_>>(),
            ["temperature", "top_p", "max_tokens"]
        );
    }

    #[test]
    fn seeds_differ_between_prompts_and_fit_31_bits() {
        let a = server_seed("r1", 0);
        assert_eq!(a, server_seed("r1", 0));
        assert_ne!(a, server_seed("r2", 0));
        assert_ne!(a, server_seed("r1", 1));
        assert!([a, server_seed("r2", 5)].iter().all(|&s| s < 1 << 31));
    }

    #[test]
    fn answers_and_errors_are_read_from_either_endpoint() {
        let c = parse_answer(
            r#"{"choices":[{"text":"ok","finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":4}}"#,
        )
        .unwrap();
        assert_eq!(
            (c.text.as_str(), c.finish_reason, c.completion_tokens),
            ("ok", FinishReason::Length, Some(4))
        );
        let m =
            parse_answer(r#"{"choices":[{"message":{"content":"yo"},"finish_reason":"stop"}]}"#)
                .unwrap();
        assert_eq!(
            (m.text.as_str(), m.finish_reason),
            ("yo", FinishReason::Stop)
        );
        // Cut off, or aborted by the server: asked again. Complete but unusable: never
        // asked again.
        assert!(
            !parse_answer(r#"{"choices":[{"text":"x"#)
                .unwrap_err()
                .permanent
        );
        assert!(
            !parse_answer(r#"{"choices":[{"text":"x","finish_reason":"abort"}]}"#)
                .unwrap_err()
                .permanent
        );
        let deep = format!(
            r#"{{"choices":[{{"text":{}"x"{}}}]}}"#,
            "[".repeat(5000),
            "]".repeat(5000)
        );
        for bad in [
            r#"{"choices":[{"text":"\ud800 x","finish_reason":"stop"}]}"#,
            r#"{"choices":[{"text":"\q","finish_reason":"stop"}]}"#,
            "<html>busy</html>",
            r#"{"choices":[{"text":"x","finish_reason":"content_filter"}]}"#,
            r#"{"choices":[],"usage":{"completion_tokens":3}}"#,
            r#"{"content":"x","stop":true}"#,
            r#"{"choices":[{"text":"x","finish_reason":"stop"}],"usage":{"completion_tokens":-4}}"#,
            r#"{"choices":[{"text":"x","finish_reason":"stop"}],"usage":{"prompt_tokens":18446744073709551615}}"#,
            r#"{"choices":[{"text":"x","finish_reason":"stop"}],"usage":{"completion_tokens":1e300}}"#,
            &deep,
        ] {
            let e = parse_answer(bad).unwrap_err();
            assert!(e.permanent, "{bad}: {}", e.message);
        }
        let named =
            parse_answer(r#"{"model":"m2","choices":[{"text":"ok","finish_reason":"stop"}]}"#)
                .unwrap();
        assert_eq!(named.model.as_deref(), Some("m2"));
        assert_eq!(
            server_message(r#"{"error":{"message":"model x does not exist"}}"#),
            "model x does not exist"
        );
        assert_eq!(server_message(r#"{"detail":"pinned"}"#), "pinned");
        assert_eq!(server_message("plain"), "plain");
    }

    #[test]
    fn a_message_without_content_is_a_failed_sample_but_a_probe_answer() {
        for body in [
            r#"{"choices":[{"message":{"role":"assistant","content":null},"finish_reason":"stop"}]}"#,
            r#"{"choices":[{"message":{"role":"assistant"},"finish_reason":"length"}]}"#,
        ] {
            let e = parse_answer(body).unwrap_err();
            assert!(e.permanent, "{body}");
            assert!(e.message.contains("no content"), "{}", e.message);
            assert_eq!(parse_probe_answer(body).unwrap().text, "");
        }
        // An empty string is an answer (scored as what it is).
        let empty = r#"{"choices":[{"message":{"content":""},"finish_reason":"stop"}]}"#;
        assert_eq!(parse_answer(empty).unwrap().text, "");
    }
}
