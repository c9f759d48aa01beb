//! `chargeonce pay`, `chargeonce payment get`, `payment capture`, `payment
//! void`, `chargeonce payments list`,
//! `chargeonce keys get` and `chargeonce demo`: the
//! client crate from the command line, against a real server process.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::process::Output;
use std::time::{Duration, Instant};

use chargeonce_testkit::TestDb;
use common::{SECRET, SHOP, Server, ServerConfig};

async fn chargeonce(args: &[&str]) -> Output {
    let out = tokio::process::Command::new(common::bin())
        .args(args)
        .env_remove("CHARGEONCE_URL")
        .env_remove("CHARGEONCE_SHOP")
        .env_remove("CHARGEONCE_SECRET")
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .expect("run chargeonce");
    eprintln!(
        "$ chargeonce {}\n[exit {:?}]\n{}{}",
        args.join(" "),
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

async fn pay(base: &str, reference: &str, extra: &[&str]) -> Output {
    let mut args = vec![
        "pay",
        "--url",
        base,
        "--shop",
        SHOP,
        "--secret",
        SECRET,
        "--reference",
        reference,
        "--amount",
        "1500.00",
        "--currency",
        "RUB",
    ];
    args.extend_from_slice(extra);
    chargeonce(&args).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pay_and_payment_get_from_the_command_line() {
    let db = TestDb::sqlite();
    common::add_shop(db.url()).await;
    let ledger = common::ledger_path(&db.dir());
    let server = Server::start(ServerConfig::new("S"), db.url(), &ledger).await;
    let base = server.base.as_str();

    // Paid: exit 0, the key comes from the order, one attempt.
    let out = pay(base, "order-cli-1", &[]).await;
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    assert!(
        text.contains("with key order-cli-1-pay (from the reference)"),
        "{text}"
    );
    assert!(text.contains("paid: pay_"), "{text}");
    assert!(text.contains("attempts: 1"), "{text}");
    let id = text
        .split_whitespace()
        .find(|w| w.starts_with("pay_"))
        .unwrap()
        .to_owned();

    // Again: the check before paying finds it, nothing is sent.
    let out = pay(base, "order-cli-1", &[]).await;
    assert_eq!(out.status.code(), Some(0));
    assert!(stdout(&out).contains("found by the check before paying"));
    assert!(stdout(&out).contains("attempts: 0"));

    // Again without the check: the server replays the first answer.
    let out = pay(base, "order-cli-1", &["--no-check"]).await;
    assert_eq!(out.status.code(), Some(0));
    assert!(stdout(&out).contains("replayed"));

    // The same key with another amount: a client bug, exit 1, not retried.
    let out = chargeonce(&[
        "pay",
        "--url",
        base,
        "--shop",
        SHOP,
        "--secret",
        SECRET,
        "--reference",
        "order-cli-1",
        "--amount",
        "1350.00",
        "--currency",
        "RUB",
        "--no-check",
    ])
    .await;
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("first used for a different request"));

    // Metadata pairs are sent and shown back; other pairs under the same
    // key are another request (exit 1).
    let out = pay(
        base,
        "order-cli-4",
        &["--metadata", "customer=cus_42", "--metadata", "note=a=b"],
    )
    .await;
    assert_eq!(out.status.code(), Some(0));
    assert!(
        stdout(&out).contains("metadata customer=cus_42 note=a=b"),
        "{}",
        stdout(&out)
    );
    let out = pay(
        base,
        "order-cli-4",
        &["--metadata", "customer=cus_43", "--no-check"],
    )
    .await;
    assert_eq!(out.status.code(), Some(1));

    // Declined: exit 2.
    let out = pay(base, "order-cli-2", &["--token", "tok_declined"]).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(stdout(&out).contains("declined: pay_"));

    // The answer is pending and the budget too short: uncertain, exit 3; the
    // same command again resolves it to the same payment.
    let out = pay(
        base,
        "order-cli-3",
        &["--token", "tok_timeout", "--budget", "500ms"],
    )
    .await;
    assert_eq!(out.status.code(), Some(3));
    assert!(stdout(&out).contains("UNCERTAIN"));
    let out = pay(base, "order-cli-3", &["--token", "tok_timeout"]).await;
    assert_eq!(out.status.code(), Some(0));
    assert!(stdout(&out).contains("paid: pay_"));

    // payment get.
    let out = chargeonce(&[
        "payment", "get", &id, "--url", base, "--shop", SHOP, "--secret", SECRET,
    ])
    .await;
    assert_eq!(out.status.code(), Some(0));
    assert!(stdout(&out).contains(&format!("{id} succeeded 1500.00 RUB, order order-cli-1")));
    assert!(stdout(&out).contains("attempts: 1"));

    // payments list and keys get: JSON.
    let out = chargeonce(&[
        "payments",
        "list",
        "--reference",
        "order-cli-1",
        "--limit",
        "5",
        "--url",
        base,
        "--shop",
        SHOP,
        "--secret",
        SECRET,
    ])
    .await;
    assert_eq!(out.status.code(), Some(0));
    let list: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(list["object"], "list");
    assert_eq!(list["has_more"], false);
    assert_eq!(list["data"][0]["id"], id.as_str());
    let out = chargeonce(&[
        "keys",
        "get",
        "order-cli-1-pay",
        "--url",
        base,
        "--shop",
        SHOP,
        "--secret",
        SECRET,
    ])
    .await;
    assert_eq!(out.status.code(), Some(0));
    let key: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(key["object"], "idempotency_key");
    assert_eq!(key["state"], "finished");
    assert_eq!(key["payment_id"], id.as_str());
    let out = chargeonce(&[
        "keys",
        "get",
        "no-such-key",
        "--url",
        base,
        "--shop",
        SHOP,
        "--secret",
        SECRET,
    ])
    .await;
    assert_eq!(out.status.code(), Some(1));

    let ledger = common::ledger(&common::client(), &server.operator).await;
    assert_eq!(common::charges_for(&ledger, "order-cli-1").len(), 1);
    assert_eq!(common::charges_for(&ledger, "order-cli-3").len(), 1);
}

/// `pay --manual-capture`, then `payment capture` twice (one key per
/// shipment, the second final) and `payment void` of another
/// authorization; a capture run again with its key is the same capture.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn authorize_capture_and_void_from_the_command_line() {
    let db = TestDb::sqlite();
    common::add_shop(db.url()).await;
    let ledger = common::ledger_path(&db.dir());
    let server = Server::start(ServerConfig::new("S"), db.url(), &ledger).await;
    let base = server.base.as_str();
    let connect = ["--url", base, "--shop", SHOP, "--secret", SECRET];
    let word = |text: &str, prefix: &str| {
        text.split(|c: char| c.is_whitespace() || matches!(c, ',' | ':' | '(' | ')'))
            .find(|w| w.starts_with(prefix))
            .map(str::to_owned)
    };

    let out = pay(base, "order-cli-auth", &["--manual-capture"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(stdout(&out).contains("authorized"), "{}", stdout(&out));
    let id = word(&stdout(&out), "pay_").unwrap();
    let capture = |key: &str, amount: &str, last: bool| {
        let mut args = vec![
            "payment".to_owned(),
            "capture".to_owned(),
            id.clone(),
            "--idempotency-key".to_owned(),
            key.to_owned(),
            "--amount".to_owned(),
            amount.to_owned(),
            "--currency".to_owned(),
            "RUB".to_owned(),
        ];
        if last {
            args.push("--final".to_owned());
        }
        args.extend(connect.iter().map(|a| (*a).to_owned()));
        args
    };
    async fn run(args: Vec<String>) -> Output {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        chargeonce(&args).await
    }
    let first = run(capture("order-cli-auth-capture-1", "1000.00", false)).await;
    assert_eq!(first.status.code(), Some(0));
    assert!(
        stdout(&first).contains("captured 1000.00 RUB"),
        "{}",
        stdout(&first)
    );
    let again = run(capture("order-cli-auth-capture-1", "1000.00", false)).await;
    assert_eq!(again.status.code(), Some(0));
    assert!(stdout(&again).contains("replayed"), "{}", stdout(&again));
    assert_eq!(
        word(&stdout(&first), "cap_"),
        word(&stdout(&again), "cap_"),
        "the same capture"
    );
    let last = run(capture("order-cli-auth-capture-2", "500.00", true)).await;
    assert_eq!(last.status.code(), Some(0));
    // Used up: a third capture is refused (exit 1, nothing taken).
    let over = run(capture("order-cli-auth-capture-3", "1.00", false)).await;
    assert_eq!(over.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&over.stderr).contains("payment_not_capturable"),
        "{}",
        String::from_utf8_lossy(&over.stderr)
    );

    let out = pay(base, "order-cli-void", &["--manual-capture"]).await;
    let other = word(&stdout(&out), "pay_").unwrap();
    let mut args = vec!["payment", "void", other.as_str()];
    args.extend_from_slice(&connect);
    let voided = chargeonce(&args).await;
    assert_eq!(voided.status.code(), Some(0));
    assert!(
        stdout(&voided).contains("released: pay_"),
        "{}",
        stdout(&voided)
    );
    assert!(stdout(&voided).contains(" voided "), "{}", stdout(&voided));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_shows_one_charge_in_a_few_seconds() {
    let started = Instant::now();
    let out = tokio::time::timeout(Duration::from_secs(60), chargeonce(&["demo"]))
        .await
        .expect("the demo finishes");
    assert_eq!(out.status.code(), Some(0));
    let text = stdout(&out);
    for expected in [
        "1. An order: order-123, 1500.00 RUB",
        "click 2 <- 201 Created (payment succeeded), after waiting on the server",
        "click 1 <- 202 Accepted (payment pending)",
        "<- 422 idempotency_key_reused",
        "<- 200 OK (payment succeeded)",
        "total: 1500.00 RUB in 1 charge(s).",
        "1500.00 RUB charged once, not 3000.00",
    ] {
        assert!(text.contains(expected), "missing {expected:?} in:\n{text}");
    }
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "{:?}",
        started.elapsed()
    );
}
