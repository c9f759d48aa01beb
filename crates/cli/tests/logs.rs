//! `chargeonce serve --log-format json`: one JSON object per line on
//! standard error, each line of a request with the request's `request_id`.

#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::Value;

/// Kills the server when the test ends, however it ends.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Sends every line `from` gives to `to`, until either ends.
fn forward(
    from: impl std::io::Read + Send + 'static,
    to: mpsc::Sender<String>,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        for line in BufReader::new(from).lines().map_while(Result::ok) {
            if to.send(line).is_err() {
                break;
            }
        }
    })
}

/// Whether a JSON log line is inside the span of the request with this id.
fn in_request(line: &Value, id: &str) -> bool {
    line["spans"]
        .as_array()
        .is_some_and(|spans| spans.iter().any(|span| span["request_id"] == id))
}

#[tokio::test]
async fn json_logs_carry_the_request_id_on_every_line_of_a_request() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("logs.db").display());
    common::add_shop(&url).await;
    let mut child = Command::new(common::bin())
        .arg("serve")
        .args(["--listen", "127.0.0.1:0", "--operator-listen", "off"])
        .args(["--database-url", &url])
        .arg("--sim-ledger")
        .arg(common::ledger_path(dir.path()))
        .args(["--no-demo-shop", "--log-format", "json"])
        // Traces on (to an endpoint nobody listens on: the spans are
        // dropped), so each line also carries the request's trace id.
        .args(["--otlp-endpoint", "http://127.0.0.1:9"])
        .env("RUST_LOG", "info,tower_http=debug,chargeonce_core=debug")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let stderr = child.stderr.take().unwrap();
    let _server = Killed(child);
    let (lines_tx, lines) = mpsc::channel::<String>();
    forward(stderr, lines_tx);
    let (addr_tx, addr) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Some((_, rest)) = line.split_once("listening on http://") {
                let _ = addr_tx.send(rest.split_whitespace().next().unwrap_or("").to_owned());
            }
        }
    });
    let addr = addr.recv_timeout(Duration::from_secs(30)).unwrap();

    let answer = common::client()
        .post(format!("http://{addr}/v1/payments"))
        .basic_auth(common::SHOP, Some(common::SECRET))
        .header("idempotency-key", "log-1")
        .header("content-type", "application/json")
        .header("request-id", "cli-log-1")
        .header(
            "traceparent",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        )
        .body(common::payment_body("order-log", "tok_ok"))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status(), 201);
    assert_eq!(answer.headers()["request-id"], "cli-log-1");

    // Read the log until the request's last line (its response), every
    // line a JSON object.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut mine = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = lines
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("no response line of the request; its lines: {mine:?}"));
        let json: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("not one JSON object per line ({e}): {line}"));
        assert!(!line.contains(common::SECRET), "no credentials: {line}");
        if in_request(&json, "cli-log-1") {
            let done = json["fields"]["message"] == "finished processing request";
            mine.push(json);
            if done {
                break;
            }
        }
    }
    assert!(
        mine.iter()
            .any(|line| line["fields"]["message"] == "key claimed"),
        "the engine's line is in the request's span: {mine:?}"
    );
    let span = &mine[0]["span"];
    assert_eq!(span["request_id"], "cli-log-1");
    assert_eq!(span["method"], "POST");
    assert_eq!(span["path"], "/v1/payments");
    for line in &mine {
        assert!(
            line["spans"]
                .as_array()
                .unwrap()
                .iter()
                .any(|span| span["trace_id"] == "4bf92f3577b34da6a3ce929d0e0e4736"),
            "every line of the request carries the caller's trace id: {line}"
        );
    }
}

/// Credentials for the acquirer never reach the output: the userinfo of
/// `--acquirer-url` and its query are redacted on the listening line, and
/// `--acquirer-credentials` is printed nowhere, also with debug logs on.
#[tokio::test]
async fn acquirer_credentials_are_never_printed() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("creds.db").display());
    common::add_shop(&url).await;
    let mut child = Command::new(common::bin())
        .arg("serve")
        .args(["--listen", "127.0.0.1:0", "--operator-listen", "off"])
        .args(["--database-url", &url, "--no-demo-shop"])
        .args([
            "--acquirer-url",
            "http://acq-user:url-pa55word@127.0.0.1:9/v1?token=query-t0ken",
        ])
        .args(["--acquirer-credentials", "flag-user:flag-pa55word"])
        .arg("--test-sim-ledger")
        .arg(dir.path().join("test-sim.db"))
        .env("RUST_LOG", "debug")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let stderr = child.stderr.take().unwrap();
    let server = Killed(child);
    let (tx, lines) = mpsc::channel::<String>();
    let err_tx = tx.clone();
    let readers = [forward(stderr, err_tx), forward(stdout, tx)];
    let mut seen = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    let addr = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = lines
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("no listening line: {seen:?}"));
        seen.push(line.clone());
        if let Some((_, rest)) = line.split_once("listening on http://") {
            break rest.split_whitespace().next().unwrap_or("").to_owned();
        }
    };
    // A payment makes the service call the (absent) acquirer: its errors
    // are logged too.
    let answer = common::client()
        .post(format!("http://{addr}/v1/payments"))
        .basic_auth(common::SHOP, Some(common::SECRET))
        .header("idempotency-key", "creds-1")
        .header("content-type", "application/json")
        .body(common::payment_body("order-creds", "tok_ok"))
        .send()
        .await
        .unwrap();
    assert!(answer.status().as_u16() >= 400, "no acquirer there");
    // Killed: both pipes end, and every line is in.
    drop(server);
    for reader in readers {
        reader.join().unwrap();
    }
    seen.extend(lines.try_iter());
    let all = seen.join("\n");
    assert!(all.contains("acquirer: http://127.0.0.1:9/v1?…"), "{all}");
    for secret in ["url-pa55word", "flag-pa55word", "query-t0ken", "acq-user:"] {
        assert!(!all.contains(secret), "`{secret}` was printed:\n{all}");
    }
}
