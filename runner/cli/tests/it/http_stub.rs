//! A tiny HTTP server inside a test, for the served paths where the fault is the
//! server's own answer (a 404, another API's JSON, a content-filter finish): each
//! connection is read for one request, answered by the handler, and closed. Every
//! connection gets its own thread, so requests in flight together are served together.

use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;

/// One request as the handler sees it.
pub struct Call {
    pub method: String,
    /// The request's path, e.g. `/v1/models`.
    pub path: String,
    /// The JSON body of a POST; `Null` for a GET.
    pub body: Value,
}

pub struct Stub {
    pub port: u16,
}

impl Stub {
    /// Serves `handler`'s (status, body) for every request, until the test ends.
    pub fn start(handler: impl Fn(&Call) -> (u16, String) + Send + Sync + 'static) -> Stub {
        Stub::start_with_headers(move |c| {
            let (status, body) = handler(c);
            (status, Vec::new(), body)
        })
    }

    /// Like [`Stub::start`], the handler also naming headers to send (a `Location`).
    pub fn start_with_headers(
        handler: impl Fn(&Call) -> (u16, Vec<(String, String)>, String) + Send + Sync + 'static,
    ) -> Stub {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let handler = Arc::new(handler);
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let handler = handler.clone();
                std::thread::spawn(move || answer(stream, &*handler));
            }
        });
        Stub { port }
    }

    /// The address with `path` after it, e.g. `url("/v1")`.
    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

type Handler = dyn Fn(&Call) -> (u16, Vec<(String, String)>, String);

fn answer(stream: TcpStream, handler: &Handler) {
    let mut reader = BufReader::new(stream);
    let mut head = String::new();
    if reader.read_line(&mut head).is_err() {
        return;
    }
    let mut parts = head.split_whitespace();
    let method = parts.next().unwrap_or_default().to_string();
    let path = parts.next().unwrap_or_default().to_string();
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line.trim().is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            if name.eq_ignore_ascii_case("content-length") {
                length = value.trim().parse().unwrap_or(0);
            }
        }
    }
    let mut body = vec![0; length];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let call = Call {
        method,
        path,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    };
    let (status, headers, text) = handler(&call);
    let extra: String = headers
        .iter()
        .map(|(name, value)| format!("{name}: {value}\r\n"))
        .collect();
    let response = format!(
        "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         {extra}Connection: close\r\n\r\n{text}",
        text.len()
    );
    let _ = reader.get_mut().write_all(response.as_bytes());
}

/// The model list of a server that serves `model`, as vLLM writes it.
pub fn model_list(model: &str) -> String {
    serde_json::json!({"object": "list", "data": [{"id": model, "object": "model"}]}).to_string()
}

/// A chat completion of `text`, ended by a stop, one token long.
pub fn chat_answer(text: &str) -> String {
    serde_json::json!({
        "choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 1}
    })
    .to_string()
}
