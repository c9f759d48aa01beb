//! Processes for the network tests: `chargeonce acquirer` and `chargeonce
//! serve --acquirer-url`, always killed when dropped.
#![allow(dead_code, clippy::unwrap_used, missing_docs)]

use std::process::{Command, Stdio};

use chargeonce_testkit::TestDb;
use serde_json::Value;

/// The webhook secret the tests share between acquirer and service.
pub const WEBHOOK_SECRET: &str = "whsec_e2e_0123456789";

pub use crate::common::Process as Proc;

/// Spawns `chargeonce ARGS` and waits for its listening line.
async fn start(name: &'static str, args: &[String]) -> Proc {
    let mut command = Command::new(env!("CARGO_BIN_EXE_chargeonce"));
    command.args(args).env(
        "RUST_LOG",
        std::env::var("E2E_LOG").unwrap_or_else(|_| "warn,chargeonce_core::engine=error".into()),
    );
    Proc::spawn(command, name).await
}

/// A port free right now (bound, then released) for a process the test
/// starts later, taken below the kernel's ephemeral range: a port that
/// `127.0.0.1:0` handed out and took back could be handed out again before
/// the test binds it, to another process or to the service's own listeners
/// (seen once in CI: the service's operator listener got the port its
/// acquirer was to listen on). Tests run in processes of their own, so each
/// starts its search at a place of its own.
pub fn free_port() -> u16 {
    let ephemeral = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32768);
    let low = ephemeral.saturating_sub(8000).max(1024);
    let span = u32::from(ephemeral - low);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let start = (std::process::id() ^ nanos) % span;
    (0..span)
        .map(|i| low + u16::try_from((start + i) % span).unwrap())
        .find(|port| std::net::TcpListener::bind(("127.0.0.1", *port)).is_ok())
        .expect("a free port below the ephemeral range")
}

pub fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|s| (*s).to_owned()).collect()
}

/// `chargeonce acquirer` on a ledger file, with extra flags.
pub async fn acquirer(dir: &std::path::Path, listen: &str, extra: &[&str]) -> Proc {
    let mut args = strings(&["acquirer", "--listen", listen, "--database"]);
    args.push(dir.join("acquirer.db").display().to_string());
    args.extend(strings(extra));
    start("acquirer", &args).await
}

/// `chargeonce serve --acquirer-url URL` on a test database, with extra
/// flags; its test mode's simulator keeps its ledger in the database's
/// scratch folder (removed with it).
pub async fn service(name: &'static str, db: &TestDb, acquirer_url: &str, extra: &[&str]) -> Proc {
    let mut args = strings(&[
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--operator-listen",
        "127.0.0.1:0",
        "--database-url",
        db.url(),
        "--acquirer-url",
        acquirer_url,
        "--no-demo-shop",
        "--webhook-secret",
        WEBHOOK_SECRET,
    ]);
    // Test mode's simulator: a ledger of this service's own, not a file
    // every test's services would share in the working directory, nor one
    // left behind in the system's temporary folder.
    static SERVICES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = SERVICES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let ledger = db.dir().join(format!("test-sim-{n}.db"));
    args.extend(strings(&[
        "--test-sim-ledger",
        &ledger.display().to_string(),
    ]));
    args.extend(strings(extra));
    start(name, &args).await
}

/// PUT /admin/faults on the acquirer.
pub async fn set_faults(acquirer: &Proc, faults: Value) {
    let response = reqwest::Client::new()
        .put(acquirer.url("/admin/faults"))
        .json(&faults)
        .send()
        .await
        .unwrap();
    assert_eq!(
        response.status().as_u16(),
        200,
        "{}",
        response.text().await.unwrap()
    );
}

/// The acquirer's ledger rows.
pub async fn ledger_rows(acquirer: &Proc) -> Vec<Value> {
    let ledger: Value = reqwest::get(acquirer.url("/ledger"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    ledger["charges"].as_array().cloned().unwrap_or_default()
}

/// `chargeonce reconcile ... --json`: exit code and report.
pub async fn reconcile(database_url: &str, acquirer_url: &str, extra: &[&str]) -> (i32, Value) {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_chargeonce"))
        .args([
            "reconcile",
            "--database-url",
            database_url,
            "--acquirer-url",
            acquirer_url,
            "--window",
            "1h",
            "--json",
        ])
        .args(extra)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap();
    let code = out.status.code().unwrap_or(-1);
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprintln!(
        "[reconcile stderr] {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = serde_json::from_str(&stdout)
        .unwrap_or_else(|e| panic!("reconcile printed no JSON ({e}), exit {code}: {stdout}"));
    (code, report)
}

/// The kinds of a report's findings.
pub fn finding_kinds(report: &Value) -> Vec<String> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["kind"].as_str().unwrap().to_owned())
        .collect()
}
