//! The fault proxy of the shared scenarios (`sdks/scenarios/README.md`,
//! "Faults"): a plain HTTP/1.1 proxy that handles one request per
//! connection (`Connection: close` both ways) and, for requests matching a
//! `lose_answers` rule, forwards the request, reads the server's whole answer
//! (so the server has executed it) and closes the client's connection without
//! sending a byte of it.
//!
//! It records every request it receives (method, path, `Idempotency-Key`,
//! the exact body bytes), before forwarding it, so a test can prove that
//! every retry carried the same key and the same body bytes.
#![allow(missing_docs)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// One `lose_answers` rule, its `order` already turned into the key.
#[derive(Debug, Clone)]
pub struct Rule {
    pub method: String,
    pub path: String,
    /// The `Idempotency-Key` the request must carry, when the rule names an order.
    pub key: Option<String>,
    /// Answers still to lose; `None`: without end.
    pub left: Option<u64>,
}

/// One request as the proxy received it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    pub method: String,
    /// The path, without the query.
    pub path: String,
    /// The `Idempotency-Key` header, trimmed.
    pub key: Option<String>,
    /// The body, byte for byte.
    pub body: Vec<u8>,
}

/// A running proxy; dropping it stops accepting.
pub struct LoseProxy {
    pub base: String,
    task: JoinHandle<()>,
    recorded: Arc<Mutex<Vec<Recorded>>>,
}

impl LoseProxy {
    pub async fn start(upstream: SocketAddr, rules: Vec<Rule>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the fault proxy");
        let addr = listener.local_addr().expect("proxy address");
        let rules = Arc::new(Mutex::new(rules));
        let recorded = Arc::new(Mutex::new(Vec::new()));
        let log = recorded.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    return;
                };
                tokio::spawn(handle(client, upstream, rules.clone(), log.clone()));
            }
        });
        Self {
            base: format!("http://{addr}"),
            task,
            recorded,
        }
    }

    /// Every request received so far, in the order they were read.
    pub fn recorded(&self) -> Vec<Recorded> {
        self.recorded.lock().expect("the recorded lock").clone()
    }

    /// The requests received so far that carried `key`.
    pub fn recorded_with_key(&self, key: &str) -> Vec<Recorded> {
        self.recorded()
            .into_iter()
            .filter(|r| r.key.as_deref() == Some(key))
            .collect()
    }
}

impl Drop for LoseProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Whether the request loses its answer: the first rule that matches
/// decides, and spends one of its `count`.
fn lose(rules: &Mutex<Vec<Rule>>, method: &str, path: &str, key: Option<&str>) -> bool {
    let mut rules = rules.lock().expect("the rules lock");
    let Some(rule) = rules.iter_mut().find(|r| {
        r.method == method && r.path == path && r.key.as_deref().is_none_or(|k| Some(k) == key)
    }) else {
        return false;
    };
    match &mut rule.left {
        None => true,
        Some(0) => false,
        Some(n) => {
            *n -= 1;
            true
        }
    }
}

async fn handle(
    mut client: TcpStream,
    upstream: SocketAddr,
    rules: Arc<Mutex<Vec<Rule>>>,
    recorded: Arc<Mutex<Vec<Recorded>>>,
) {
    let Some((head, body)) = read_request(&mut client).await else {
        return;
    };
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or_default().to_owned();
    let mut parts = request_line.split(' ');
    let method = parts.next().unwrap_or_default().to_owned();
    let target = parts.next().unwrap_or_default();
    let path = target.split('?').next().unwrap_or_default().to_owned();
    let mut key = None;
    let mut forwarded = format!("{request_line}\r\n");
    for line in lines.filter(|l| !l.is_empty()) {
        let name = line.split(':').next().unwrap_or_default().trim();
        if name.eq_ignore_ascii_case("connection") || name.eq_ignore_ascii_case("keep-alive") {
            continue;
        }
        if name.eq_ignore_ascii_case("idempotency-key") {
            key = line.split_once(':').map(|(_, v)| v.trim().to_owned());
        }
        forwarded.push_str(line);
        forwarded.push_str("\r\n");
    }
    forwarded.push_str("connection: close\r\n\r\n");
    recorded.lock().expect("the recorded lock").push(Recorded {
        method: method.clone(),
        path: path.clone(),
        key: key.clone(),
        body: body.clone(),
    });

    let Ok(mut server) = TcpStream::connect(upstream).await else {
        return;
    };
    let mut request = forwarded.into_bytes();
    request.extend_from_slice(&body);
    if server.write_all(&request).await.is_err() {
        return;
    }
    // The server closes after its answer (`Connection: close`): read it whole.
    let mut answer = Vec::new();
    let _ = server.read_to_end(&mut answer).await;
    if lose(&rules, &method, &path, key.as_deref()) {
        // The server executed the request; the client gets nothing.
        drop(client);
        return;
    }
    let _ = client.write_all(&answer).await;
    let _ = client.shutdown().await;
}

/// Reads one request: the head (up to the blank line) and a
/// `content-length` body.
async fn read_request(client: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut data = Vec::new();
    let mut buf = [0_u8; 8192];
    loop {
        if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&data[..end]).into_owned();
            let length = head
                .lines()
                .find_map(|l| {
                    let (name, value) = l.split_once(':')?;
                    name.trim()
                        .eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse::<usize>().ok())
                        .flatten()
                })
                .unwrap_or(0);
            if data.len() >= end + 4 + length {
                let body = data[end + 4..end + 4 + length].to_vec();
                return Some((head, body));
            }
        }
        let n = client.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        data.extend_from_slice(&buf[..n]);
    }
}
