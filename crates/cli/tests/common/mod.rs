//! Helpers shared by the end-to-end tests of the `chargeonce` binary: a shop,
//! `chargeonce` processes that are always killed, an HTTP client with Basic
//! auth, and readers of the simulator's ledger.
//!
//! Not every test binary uses every helper.
#![allow(dead_code, clippy::unwrap_used, missing_docs)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use reqwest::header::HeaderMap;
use serde_json::Value;

/// The shop every test registers.
pub const SHOP: &str = "shop_e2e";
/// Its secret key.
pub const SECRET: &str = "sk_e2e_0123456789abcdef";

/// What precedes the address in the line `chargeonce serve` (or
/// `chargeonce acquirer`) prints once it listens.
const LISTENING: &str = "listening on http://";
/// The line `chargeonce serve` prints for its operator listener (before the
/// listening line).
const OPERATOR: &str = "operator listener at http://";

/// How long a process may take to start.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// The binary under test.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_chargeonce")
}

/// `chargeonce shops add SHOP --secret SECRET --database-url URL` (also runs
/// the migrations). Run once per database, before any server starts.
pub async fn add_shop(database_url: &str) {
    let out = tokio::process::Command::new(bin())
        .args([
            "shops",
            "add",
            SHOP,
            "--secret",
            SECRET,
            "--database-url",
            database_url,
        ])
        .stdin(Stdio::null())
        .output()
        .await
        .expect("run `chargeonce shops add`");
    assert!(
        out.status.success(),
        "`chargeonce shops add` failed ({}): stdout={} stderr={}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Flags of one server process.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// A label for its log lines (`A`, `B`, ...).
    pub name: &'static str,
    /// `--sim-slow`.
    pub sim_slow: &'static str,
    /// `--lease`.
    pub lease: &'static str,
    /// More flags.
    pub extra: Vec<&'static str>,
    /// The file limit (`ulimit -n`) to start it under.
    pub nofile: Option<u32>,
}

impl ServerConfig {
    pub fn new(name: &'static str) -> Self {
        Self {
            name,
            sim_slow: "3s",
            lease: "30s",
            extra: Vec::new(),
            nofile: None,
        }
    }

    /// Starts the server under `ulimit -n LIMIT` (through `sh`, which then
    /// `exec`s it: the process is the server itself).
    pub fn nofile(mut self, limit: u32) -> Self {
        self.nofile = Some(limit);
        self
    }

    pub fn sim_slow(mut self, value: &'static str) -> Self {
        self.sim_slow = value;
        self
    }

    pub fn lease(mut self, value: &'static str) -> Self {
        self.lease = value;
        self
    }

    pub fn args(mut self, args: &[&'static str]) -> Self {
        self.extra.extend_from_slice(args);
        self
    }
}

/// A `chargeonce` child process that printed the address it listens on.
/// Dropping it kills the process (also when the test panics), so no process
/// outlives its test.
pub struct Process {
    child: Option<Child>,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    /// The operator listener (`serve` only; empty otherwise).
    pub operator: String,
    pub name: &'static str,
}

/// A running `chargeonce serve` process.
pub type Server = Process;

impl Process {
    /// Starts `chargeonce serve` on a free port and waits for its
    /// "listening" line.
    pub async fn start(config: ServerConfig, database_url: &str, ledger: &Path) -> Self {
        let mut command = match config.nofile {
            Some(limit) => {
                let mut sh = Command::new("sh");
                sh.args([
                    "-c",
                    &format!("ulimit -n {limit} && exec \"$0\" \"$@\""),
                    bin(),
                ]);
                sh
            }
            None => Command::new(bin()),
        };
        command
            .arg("serve")
            .args(["--listen", "127.0.0.1:0"])
            .args(["--operator-listen", "127.0.0.1:0"])
            .args(["--database-url", database_url])
            .arg("--sim-ledger")
            .arg(ledger)
            .args(["--sim-slow", config.sim_slow])
            .args(["--lease", config.lease])
            .args(["--key-ttl", "24h"])
            .arg("--no-demo-shop")
            .args(&config.extra)
            .env("RUST_LOG", "info");
        Self::spawn(command, config.name).await
    }

    /// Spawns `command` with its output piped, forwards its log lines
    /// labelled with `name` (the test harness captures them), and waits for
    /// the line `... listening on http://ADDR ...` on its standard output.
    pub async fn spawn(mut command: Command, name: &'static str) -> Self {
        let mut child = command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("spawn {name}: {e}"));
        // Guard first: from here on, a panic kills the child.
        let stdout = child.stdout.take().expect("piped stdout");
        let stderr = child.stderr.take().expect("piped stderr");
        let mut process = Self {
            child: Some(child),
            base: String::new(),
            operator: String::new(),
            name,
        };

        // Keep draining both pipes so the child never blocks on a full pipe.
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                eprintln!("[{name}] {line}");
            }
        });
        let (tx, rx) = tokio::sync::oneshot::channel::<(SocketAddr, Option<SocketAddr>)>();
        std::thread::spawn(move || {
            let mut tx = Some(tx);
            let mut operator = None;
            let address = |rest: &str| {
                rest.split_whitespace()
                    .next()
                    .unwrap_or_default()
                    .parse::<SocketAddr>()
                    .ok()
            };
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                eprintln!("[{name} stdout] {line}");
                if let Some((_, rest)) = line.split_once(OPERATOR) {
                    operator = address(rest);
                } else if let Some((_, rest)) = line.split_once(LISTENING)
                    && let (Some(addr), Some(tx)) = (address(rest), tx.take())
                {
                    let _ = tx.send((addr, operator));
                }
            }
        });

        let (addr, operator) = match tokio::time::timeout(START_TIMEOUT, rx).await {
            Ok(Ok(addrs)) => addrs,
            Ok(Err(_)) => {
                let status = process.child.as_mut().and_then(|c| c.wait().ok());
                panic!("{name} exited before listening (status {status:?})");
            }
            Err(_) => panic!("{name} printed no listening line within {START_TIMEOUT:?}"),
        };
        assert_ne!(addr.port(), 0, "{name} must print the port it chose");
        process.base = format!("http://{addr}");
        process.operator = operator.map(|a| format!("http://{a}")).unwrap_or_default();
        process
    }

    /// SIGKILL (on unix `Child::kill` sends SIGKILL), then reap.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGTERM (a clean stop), then waits for the process to exit.
    pub fn terminate(&mut self) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("process is running");
        let sent = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .expect("run kill -TERM");
        assert!(sent.success(), "kill -TERM failed");
        child.wait().expect("wait for the process")
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(child) => matches!(child.try_wait(), Ok(None)),
            None => false,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// `path` on the operator listener (the console, `/metrics`, `/sim`).
    pub fn operator_url(&self, path: &str) -> String {
        assert!(
            !self.operator.is_empty(),
            "{} has no operator listener",
            self.name
        );
        format!("{}{path}", self.operator)
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A fresh ledger file path in the test's scratch folder.
pub fn ledger_path(dir: &Path) -> PathBuf {
    dir.join("acquirer-ledger.sqlite3")
}

/// A client without a timeout.
pub fn client() -> reqwest::Client {
    reqwest::Client::builder().build().expect("reqwest client")
}

/// The body of `POST /v1/payments` for 1500.00 RUB.
pub fn payment_body(reference: &str, token: &str) -> String {
    serde_json::json!({
        "amount": {"value": "1500.00", "currency": "RUB"},
        "reference": reference,
        "payment_method": {"token": token},
    })
    .to_string()
}

/// One HTTP answer, whole.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// Carries `Idempotent-Replayed: true`.
    pub fn is_replay(&self) -> bool {
        self.header("idempotent-replayed") == Some("true")
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("answer {} is not JSON ({e}): {}", self.status, self.text()))
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// `status` of a payment body.
    pub fn payment_status(&self) -> String {
        self.json()["status"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    /// `id` of a payment body.
    pub fn payment_id(&self) -> String {
        let id = self.json()["id"].as_str().unwrap_or_default().to_owned();
        assert!(!id.is_empty(), "payment body without id: {}", self.text());
        id
    }

    /// Asserts a 409 `request_in_progress` problem with `Retry-After`.
    pub fn assert_in_progress(&self) {
        assert_eq!(
            self.status,
            409,
            "expected 409, got {}: {}",
            self.status,
            self.text()
        );
        assert_eq!(
            self.header("content-type"),
            Some("application/problem+json"),
            "409 must be problem+json"
        );
        assert_eq!(
            self.json()["code"],
            "request_in_progress",
            "409 body: {}",
            self.text()
        );
        let retry_after = self
            .header("retry-after")
            .expect("409 must carry Retry-After");
        assert!(
            retry_after.parse::<u64>().is_ok(),
            "Retry-After is delta-seconds: {retry_after}"
        );
        assert!(!self.is_replay(), "a 409 is not a replay");
    }

    /// Asserts this is a replay of `first`: same status, same body byte for
    /// byte, same content headers, plus `Idempotent-Replayed: true`.
    pub fn assert_replay_of(&self, first: &Answer) {
        assert!(
            self.is_replay(),
            "expected Idempotent-Replayed: true on {} {}",
            self.status,
            self.text()
        );
        assert_eq!(self.status, first.status, "a replay keeps the first status");
        assert_eq!(
            self.body,
            first.body,
            "a replay is byte-identical:\n first: {}\nreplay: {}",
            first.text(),
            self.text()
        );
        assert_eq!(self.header("content-type"), first.header("content-type"));
        assert_eq!(self.header("location"), first.header("location"));
    }
}

/// `POST /v1/payments` with Basic auth and an `Idempotency-Key`.
pub async fn try_pay(
    client: &reqwest::Client,
    base: &str,
    key: &str,
    body: &str,
) -> Result<Answer, reqwest::Error> {
    let response = client
        .post(format!("{base}/v1/payments"))
        .basic_auth(SHOP, Some(SECRET))
        .header("Idempotency-Key", key)
        .header("Content-Type", "application/json")
        .body(body.to_owned())
        .send()
        .await?;
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response.bytes().await?.to_vec();
    Ok(Answer {
        status,
        headers,
        body,
    })
}

/// [`try_pay`] that must get an HTTP answer.
pub async fn pay(client: &reqwest::Client, base: &str, key: &str, body: &str) -> Answer {
    try_pay(client, base, key, body)
        .await
        .unwrap_or_else(|e| panic!("POST {base}/v1/payments (key {key}) failed: {e:?}"))
}

/// `GET /v1/payments/{id}`.
/// Pays with the same key and body until the answer is no longer 202
/// pending (a parked key waits out its settle window), within `timeout`.
pub async fn pay_until_definite(
    client: &reqwest::Client,
    base: &str,
    key: &str,
    body: &str,
    timeout: Duration,
) -> Answer {
    eventually("an answer other than 202", timeout, || async move {
        let answer = pay(client, base, key, body).await;
        (answer.status != 202).then_some(answer)
    })
    .await
}

pub async fn get_payment(client: &reqwest::Client, base: &str, id: &str) -> Answer {
    let response = client
        .get(format!("{base}/v1/payments/{id}"))
        .basic_auth(SHOP, Some(SECRET))
        .send()
        .await
        .expect("GET payment");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response.bytes().await.expect("payment body").to_vec();
    Answer {
        status,
        headers,
        body,
    }
}

/// `GET /sim/ledger` (no auth): the acquirer's ledger.
pub async fn ledger(client: &reqwest::Client, base: &str) -> Value {
    get_json(client, &format!("{base}/sim/ledger")).await
}

/// `GET url` (no auth), answered 200 with a JSON body: the body.
pub async fn get_json(client: &reqwest::Client, url: &str) -> Value {
    let response = client
        .get(url)
        .send()
        .await
        .unwrap_or_else(|e| panic!("GET {url}: {e}"));
    assert_eq!(response.status().as_u16(), 200, "GET {url}");
    response
        .json()
        .await
        .unwrap_or_else(|e| panic!("GET {url}: not JSON: {e}"))
}

/// Every charge row of the ledger.
pub fn charges(ledger: &Value) -> Vec<Value> {
    ledger["charges"].as_array().cloned().unwrap_or_default()
}

/// The ledger's charge rows for one order reference.
pub fn charges_for(ledger: &Value, reference: &str) -> Vec<Value> {
    charges(ledger)
        .into_iter()
        .filter(|c| c["reference"] == reference)
        .collect()
}

/// Asserts the ledger holds exactly one succeeded charge for `reference`, and
/// that it is the charge of the payment `payment` (a payment JSON body).
pub fn assert_one_charge_of(ledger: &Value, reference: &str, payment: &Value) -> Value {
    let rows = charges_for(ledger, reference);
    assert_eq!(
        rows.len(),
        1,
        "exactly one charge for {reference}; ledger: {ledger:#}"
    );
    let charge = rows.into_iter().next().unwrap();
    assert_eq!(charge["status"], "succeeded", "charge: {charge:#}");
    assert_eq!(charge["shop_id"], SHOP);
    assert_eq!(
        charge["payment_id"], payment["id"],
        "the charge belongs to the payment"
    );
    assert_eq!(
        charge["id"], payment["provider_payment_id"],
        "the payment names the acquirer's charge"
    );
    assert_eq!(charge["amount"]["value"], "1500.00");
    assert_eq!(charge["amount"]["currency"], "RUB");
    charge
}

/// A unique-enough key for one test.
pub fn new_key(label: &str) -> String {
    format!("{label}-{}", uuid::Uuid::new_v4().simple())
}

/// The stored payment row: `(status, acquirer_key)`, read straight from
/// PostgreSQL; the key as the store reads it (a row keeps no copy since
/// migration 0025: it is derived from the id).
pub async fn pg_payment(database_url: &str, payment_id: &str) -> Option<(String, String)> {
    use sqlx::Connection as _;
    let mut conn = sqlx::PgConnection::connect(database_url)
        .await
        .expect("connect to the test database");
    let row: Option<(String, Option<String>)> =
        sqlx::query_as("SELECT status, acquirer_key FROM payments WHERE id = $1")
            .bind(payment_id)
            .fetch_optional(&mut conn)
            .await
            .expect("read payment");
    let _ = conn.close().await;
    let derived = || {
        let id = chargeonce_core::PaymentId::parse(payment_id).expect("a payment id");
        chargeonce_core::AcquirerKey::for_payment(&id)
            .as_str()
            .to_owned()
    };
    row.map(|(status, key)| (status, key.unwrap_or_else(derived)))
}

/// The key row's recovery point and its payment's status, read straight from
/// PostgreSQL: `(recovery_point, payment_status)`.
pub async fn pg_key_state(database_url: &str, key: &str) -> Option<(String, String)> {
    use sqlx::Connection as _;
    let mut conn = sqlx::PgConnection::connect(database_url)
        .await
        .expect("connect to the test database");
    let row: Option<(String, String)> = sqlx::query_as(
        "SELECT k.recovery_point, p.status FROM idempotency_keys k \
         JOIN payments p ON p.id = k.payment_id WHERE k.shop_id = $1 AND k.key = $2",
    )
    .bind(SHOP)
    .bind(key)
    .fetch_optional(&mut conn)
    .await
    .expect("read key");
    let _ = conn.close().await;
    row
}

/// Polls `check` every 50 ms until it yields a value; panics after `timeout`.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
