//! `chargeonce findings list` and `findings resolve`: the reconciler's
//! persisted findings, read and resolved from the command line.
#![allow(clippy::unwrap_used, missing_docs)]

use std::process::Output;

use chargeonce_core::findings::{FindingKind, NewFinding};
use chargeonce_core::{Money, Reference, ShopId};
use serde_json::Value;

async fn chargeonce(args: &[&str]) -> Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_chargeonce"))
        .args(args)
        .env_remove("CHARGEONCE_DATABASE_URL")
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .expect("run chargeonce")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

async fn list(url: &str, state: &str) -> Vec<Value> {
    let out = chargeonce(&[
        "findings",
        "list",
        "--state",
        state,
        "--json",
        "--database-url",
        url,
    ])
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    serde_json::from_str(&stdout(&out)).unwrap()
}

#[tokio::test]
async fn findings_are_listed_and_resolved_by_hand() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("findings.db").display());
    let out = chargeonce(&[
        "shops",
        "add",
        "demo",
        "--secret",
        "sk_0123456789abcdef",
        "--database-url",
        &url,
    ])
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    {
        // A pass's finding, as the reconciler records it.
        let store = chargeonce_store::connect(&url, &chargeonce_store::PoolConfig::default())
            .await
            .unwrap();
        let ids = store
            .record_findings(&[NewFinding {
                kind: FindingKind::OrphanCharge,
                shop_id: ShopId::new("demo").unwrap(),
                reference: Reference::new("order-1").unwrap(),
                payment_id: None,
                charge_ids: vec!["ch_orphan".into()],
                amount: Some(Money::parse("15.00", "RUB").unwrap()),
                detail: "15.00 RUB charged for a payment we do not have".into(),
                refunded: Vec::new(),
            }])
            .await
            .unwrap();
        assert_eq!(ids.len(), 1);
    }

    let open = list(&url, "open").await;
    assert_eq!(open.len(), 1, "{open:?}");
    assert_eq!(open[0]["kind"], "orphan_charge");
    assert_eq!(open[0]["amount"]["value"], "15.00");
    assert_eq!(open[0]["resolved"], Value::Null);
    let id = open[0]["id"].as_i64().unwrap().to_string();

    let text = chargeonce(&["findings", "list", "--database-url", &url]).await;
    assert!(stdout(&text).contains("orphan_charge"), "{}", stdout(&text));
    assert!(stdout(&text).contains("ch_orphan"), "{}", stdout(&text));

    // A note is required, and must say something.
    let out = chargeonce(&["findings", "resolve", &id, "--database-url", &url]).await;
    assert!(!out.status.success());
    let out = chargeonce(&[
        "findings",
        "resolve",
        &id,
        "--note",
        " ",
        "--database-url",
        &url,
    ])
    .await;
    assert!(!out.status.success());
    assert!(stderr(&out).contains("--note"), "{}", stderr(&out));

    let out = chargeonce(&[
        "findings",
        "resolve",
        &id,
        "--note",
        "refunded by hand at the acquirer",
        "--database-url",
        &url,
    ])
    .await;
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stdout(&out).contains("by cli"), "{}", stdout(&out));

    assert!(list(&url, "open").await.is_empty());
    let resolved = list(&url, "resolved").await;
    assert_eq!(resolved.len(), 1, "{resolved:?}");
    assert_eq!(resolved[0]["resolved"]["how"], "manual");
    assert_eq!(resolved[0]["resolved"]["by"], "cli");
    assert_eq!(
        resolved[0]["resolved"]["note"],
        "refunded by hand at the acquirer"
    );
    assert_eq!(list(&url, "all").await.len(), 1);
    let text = chargeonce(&["findings", "list", "--database-url", &url]).await;
    assert!(stdout(&text).contains("no findings"), "{}", stdout(&text));

    // No such finding: an error.
    let out = chargeonce(&[
        "findings",
        "resolve",
        "999999",
        "--note",
        "nothing",
        "--database-url",
        &url,
    ])
    .await;
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("no finding 999999"),
        "{}",
        stderr(&out)
    );
}
