//! Merchant events across a real process kill: `shops set-webhook` gives the
//! shop a URL and prints its signing secret once; a payment commits with its
//! event; the server is SIGKILLed while its relay's POST is in flight; a
//! second server on the same database delivers the event, with the same id
//! and a signature the printed secret verifies.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::process::Stdio;
use std::time::Duration;

use chargeonce_core::webhook::{self, WebhookSecret};
use chargeonce_testkit::{Received, Reply, TestDb, TestMerchant};
use common::{Server, ServerConfig};

async fn chargeonce(args: &[&str]) -> std::process::Output {
    tokio::process::Command::new(common::bin())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_event_committed_before_a_kill_is_delivered_by_the_next_process() {
    let db = TestDb::postgres().await;
    common::add_shop(db.url()).await;
    // The first delivery hangs (its sender gets killed meanwhile); later ones get 200.
    let merchant = TestMerchant::start(vec![Reply::Hang]).await;
    let url = merchant.url.clone();

    let nobody = chargeonce(&[
        "shops",
        "set-webhook",
        "--shop",
        "nobody",
        "--url",
        &url,
        "--database-url",
        db.url(),
    ])
    .await;
    assert!(!nobody.status.success(), "an unknown shop is an error");
    let bad_url = chargeonce(&[
        "shops",
        "set-webhook",
        "--shop",
        common::SHOP,
        "--url",
        "ftp://example.invalid/",
        "--database-url",
        db.url(),
    ])
    .await;
    assert!(!bad_url.status.success(), "only http(s) URLs");
    // Loopback is refused unless the operator allows it (and http too).
    let internal = chargeonce(&[
        "shops",
        "set-webhook",
        "--shop",
        common::SHOP,
        "--url",
        &url,
        "--webhook-allow-http",
        "--database-url",
        db.url(),
    ])
    .await;
    assert!(!internal.status.success(), "a loopback URL was accepted");
    assert!(
        String::from_utf8_lossy(&internal.stderr)
            .contains("--url: the URL's host does not resolve to a public address"),
        "{}",
        String::from_utf8_lossy(&internal.stderr)
    );
    let set = chargeonce(&[
        "shops",
        "set-webhook",
        "--shop",
        common::SHOP,
        "--url",
        &url,
        "--webhook-allow-http",
        "--webhook-allow-networks",
        "127.0.0.0/8,::1/128",
        "--database-url",
        db.url(),
    ])
    .await;
    assert!(
        set.status.success(),
        "{}",
        String::from_utf8_lossy(&set.stderr)
    );
    let stdout = String::from_utf8(set.stdout).unwrap();
    let secret = stdout
        .split_whitespace()
        .find(|word| word.starts_with("whsec_"))
        .unwrap_or_else(|| panic!("no secret printed: {stdout}"))
        .to_owned();
    assert_eq!(stdout.matches(&secret).count(), 1, "printed once");
    assert!(!String::from_utf8_lossy(&set.stderr).contains(&secret));
    // The shop's endpoints: the operator's one, every type, no secret.
    let listed = chargeonce(&[
        "shops",
        "webhook-endpoints",
        "--shop",
        common::SHOP,
        "--database-url",
        db.url(),
    ])
    .await;
    assert!(listed.status.success());
    let listed = String::from_utf8(listed.stdout).unwrap();
    assert_eq!(listed.lines().count(), 1, "{listed}");
    assert!(listed.starts_with("we_"), "{listed}");
    assert!(
        listed.contains(&format!("enabled {url} events=* by=operator")),
        "{listed}"
    );
    assert!(!listed.contains(&secret));

    let ledger = common::ledger_path(&db.dir());
    let relay_flags: &[&'static str] = &[
        "--relay-interval",
        "50ms",
        "--relay-timeout",
        "1s",
        "--webhook-allow-http",
        "--webhook-allow-networks",
        "127.0.0.0/8",
    ];
    let mut a = Server::start(ServerConfig::new("A").args(relay_flags), db.url(), &ledger).await;
    let client = common::client();
    let paid = common::pay(
        &client,
        &a.base,
        "order-1-pay",
        &common::payment_body("order-1", "tok_ok"),
    )
    .await;
    assert_eq!(paid.status, 201);
    // A's relay is mid-POST (the merchant hangs): kill A before it can record anything.
    common::eventually("the first delivery", Duration::from_secs(10), || async {
        (!merchant.received().is_empty()).then_some(())
    })
    .await;
    a.kill();

    let b = Server::start(ServerConfig::new("B").args(relay_flags), db.url(), &ledger).await;
    common::eventually("the redelivery", Duration::from_secs(15), || async {
        (merchant.received().len() >= 2).then_some(())
    })
    .await;
    let deliveries = merchant.received();
    let Received {
        event_id: first_id,
        body: first_body,
        ..
    } = &deliveries[0];
    let Received {
        event_id: second_id,
        signature,
        body: second_body,
        ..
    } = &deliveries[1];
    assert_eq!(first_id, second_id, "the same event id");
    assert_eq!(first_body, second_body, "the same bytes");
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    assert_eq!(
        webhook::verify(
            &WebhookSecret::new(secret.as_str()),
            signature,
            second_body,
            now,
            webhook::TOLERANCE
        ),
        Ok(())
    );
    let body: serde_json::Value = serde_json::from_slice(second_body).unwrap();
    assert_eq!(body["type"], "payment.succeeded");
    assert_eq!(body["data"]["payment"]["id"], paid.payment_id());

    let event: serde_json::Value = common::eventually("delivered", Duration::from_secs(10), || {
        let client = client.clone();
        let url = b.url(&format!("/v1/events/{first_id}"));
        async move {
            let event: serde_json::Value = client
                .get(url)
                .basic_auth(common::SHOP, Some(common::SECRET))
                .send()
                .await
                .ok()?
                .json()
                .await
                .ok()?;
            (event["delivery"]["state"] == "delivered").then_some(event)
        }
    })
    .await;
    assert_eq!(event["delivery"]["attempts"], 1, "A recorded no attempt");
}
