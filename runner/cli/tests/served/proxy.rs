//! A small HTTP/1.1 proxy in front of the real server that injects faults by request
//! number: error statuses, a connection cut mid-response, a stalled response. One
//! exchange per connection (it answers `Connection: close`). A sticky proxy gives every
//! later POST with the same body as a faulted one the same fault (an answer that can
//! never succeed, however often it is asked).

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
    /// This status with this `Retry-After` header.
    RetryAfter(u16, &'static str),
    /// A 200 with this JSON body instead of the server's answer.
    Answer(&'static str),
    /// A 200 whose JSON body is over 10 MiB.
    Huge,
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
        Proxy::start_with(upstream, faults, false)
    }

    /// [`Proxy::start`], and every later POST whose body equals a faulted one's gets
    /// the same fault.
    pub fn start_sticky(upstream: u16, faults: HashMap<usize, Fault>) -> Proxy {
        Proxy::start_with(upstream, faults, true)
    }

    fn start_with(upstream: u16, faults: HashMap<usize, Fault>, sticky: bool) -> Proxy {
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
        let bodies: Faulted = Arc::default();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(conn) = conn else { continue };
                let counters = Counters {
                    posts: posts.clone(),
                    answered: answered.clone(),
                    injected: injected.clone(),
                    faults: faults.clone(),
                    bodies: sticky.then(|| bodies.clone()),
                };
                std::thread::spawn(move || {
                    let _ = serve(conn, upstream, &counters);
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

/// The request bodies faulted so far, with their fault.
type Faulted = Arc<Mutex<Vec<(Vec<u8>, Fault)>>>;

/// What one connection's thread shares with the proxy.
struct Counters {
    posts: Arc<AtomicUsize>,
    answered: Arc<AtomicUsize>,
    injected: Arc<Mutex<Vec<Fault>>>,
    faults: Arc<HashMap<usize, Fault>>,
    /// Sticky: the bodies faulted so far, with their fault.
    bodies: Option<Faulted>,
}

/// A JSON answer of 200 with `text` as its body.
fn answer(conn: &mut TcpStream, text: &[u8]) -> std::io::Result<()> {
    write!(
        conn,
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n",
        text.len()
    )?;
    conn.write_all(text)?;
    conn.flush()?;
    conn.shutdown(Shutdown::Both)
}

fn serve(mut conn: TcpStream, upstream: u16, c: &Counters) -> std::io::Result<()> {
    let (head, body) = read_request(&mut conn)?;
    let fault = if head.starts_with("POST") {
        let n = c.posts.fetch_add(1, Ordering::SeqCst) + 1;
        let again = c.bodies.as_ref().and_then(|b| {
            let b = b.lock().unwrap();
            b.iter().find(|(x, _)| *x == body).map(|(_, f)| *f)
        });
        let fault = again.or_else(|| c.faults.get(&n).copied());
        if let (Some(f), Some(b)) = (fault, &c.bodies) {
            b.lock().unwrap().push((body.clone(), f));
        }
        fault
    } else {
        None
    };
    if let Some(f) = fault {
        c.injected.lock().unwrap().push(f);
    }
    let answered = &c.answered;
    match fault {
        Some(Fault::RetryAfter(code, after)) => {
            let text = format!("{{\"error\":{{\"message\":\"injected {code}\"}}}}");
            write!(
                conn,
                "HTTP/1.1 {code} Injected\r\nContent-Type: application/json\r\nRetry-After: {after}\r\n\
                 Content-Length: {}\r\nConnection: close\r\n\r\n{text}",
                text.len()
            )?;
            return conn.shutdown(Shutdown::Both);
        }
        Some(Fault::Answer(text)) => return answer(&mut conn, text.as_bytes()),
        Some(Fault::Huge) => {
            let pad = "x".repeat(11 << 20);
            let text =
                format!("{{\"choices\":[{{\"text\":\"{pad}\",\"finish_reason\":\"length\"}}]}}");
            return answer(&mut conn, text.as_bytes());
        }
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
