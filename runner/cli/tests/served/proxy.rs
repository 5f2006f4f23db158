//! A small HTTP/1.1 proxy in front of the real server that injects faults by request
//! number: error statuses, a connection cut mid-response, a stalled response. One
//! exchange per connection (it answers `Connection: close`).

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fault {
    Status(u16),
    /// The server's answer, cut off halfway.
    CutMidResponse,
    /// No answer for this long, then the connection closes.
    Stall(Duration),
}

pub struct Proxy {
    pub port: u16,
    /// Generation requests seen (each POST counts, faulted or not).
    pub posts: Arc<AtomicUsize>,
    /// Generation requests the server answered through the proxy.
    pub answered: Arc<AtomicUsize>,
    pub injected: Arc<Mutex<Vec<Fault>>>,
    stop: Arc<AtomicBool>,
}

impl Proxy {
    /// Forwards to `127.0.0.1:upstream`; POST number n (from 1) gets `faults[n]`.
    pub fn start(upstream: u16, faults: HashMap<usize, Fault>) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let proxy = Proxy {
            port,
            posts: Arc::default(),
            answered: Arc::default(),
            injected: Arc::default(),
            stop: Arc::default(),
        };
        let (posts, answered, injected, stop) = (
            proxy.posts.clone(),
            proxy.answered.clone(),
            proxy.injected.clone(),
            proxy.stop.clone(),
        );
        let faults = Arc::new(faults);
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let (posts, answered, injected, faults) = (
                    posts.clone(),
                    answered.clone(),
                    injected.clone(),
                    faults.clone(),
                );
                std::thread::spawn(move || {
                    let _ = serve(conn, upstream, &posts, &answered, &injected, &faults);
                });
            }
        });
        proxy
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// One request: headers and a Content-Length body.
fn read_request(conn: &mut TcpStream) -> std::io::Result<(String, Vec<u8>)> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = find(&buf, b"\r\n\r\n") {
            break i + 4;
        }
        let n = conn.read(&mut chunk)?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let length = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0);
    while buf.len() < head_end + length {
        let n = conn.read(&mut chunk)?;
        if n == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    Ok((head, buf[head_end..].to_vec()))
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// `head` with its Connection header replaced by `Connection: close`.
fn closing(head: &str) -> String {
    let mut out: Vec<&str> = head
        .trim_end()
        .split("\r\n")
        .filter(|l| !l.to_ascii_lowercase().starts_with("connection:"))
        .collect();
    out.push("Connection: close");
    format!("{}\r\n\r\n", out.join("\r\n"))
}

fn serve(
    mut conn: TcpStream,
    upstream: u16,
    posts: &AtomicUsize,
    answered: &AtomicUsize,
    injected: &Mutex<Vec<Fault>>,
    faults: &HashMap<usize, Fault>,
) -> std::io::Result<()> {
    let (head, body) = read_request(&mut conn)?;
    let fault = if head.starts_with("POST") {
        let n = posts.fetch_add(1, Ordering::SeqCst) + 1;
        faults.get(&n).copied()
    } else {
        None
    };
    if let Some(f) = fault {
        injected.lock().unwrap().push(f);
    }
    match fault {
        Some(Fault::Status(code)) => {
            let text = format!("{{\"error\":{{\"message\":\"injected {code}\"}}}}");
            write!(
                conn,
                "HTTP/1.1 {code} Injected\r\nContent-Type: application/json\r\nRetry-After: 0\r\n\
                 Content-Length: {}\r\nConnection: close\r\n\r\n{text}",
                text.len()
            )?;
            return conn.shutdown(Shutdown::Both);
        }
        Some(Fault::Stall(d)) => {
            std::thread::sleep(d);
            return conn.shutdown(Shutdown::Both);
        }
        _ => {}
    }
    // The server down (killed, restarting): the client sees the connection dropped.
    let mut up = TcpStream::connect(("127.0.0.1", upstream))?;
    up.write_all(closing(&head).as_bytes())?;
    up.write_all(&body)?;
    let mut answer = Vec::new();
    up.read_to_end(&mut answer)?;
    let Some(split) = find(&answer, b"\r\n\r\n") else {
        return conn.shutdown(Shutdown::Both);
    };
    let head = closing(&String::from_utf8_lossy(&answer[..split + 4]));
    let rest = &answer[split + 4..];
    conn.write_all(head.as_bytes())?;
    if fault == Some(Fault::CutMidResponse) {
        conn.write_all(&rest[..rest.len() / 2])?;
    } else {
        conn.write_all(rest)?;
        if head.starts_with("HTTP/1.1 200") && head.contains("application/json") {
            answered.fetch_add(1, Ordering::SeqCst);
        }
    }
    conn.flush()?;
    conn.shutdown(Shutdown::Both)
}
