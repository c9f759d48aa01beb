//! Webhook endpoint management by the client against a real server
//! (PostgreSQL and SQLite): a make answers the signing secret once and a
//! repeat under the same idempotency key answers the same endpoint without
//! it; list and get never show a secret; an update sets only what it names;
//! a secret roll answers the new secret once and says until when the old
//! one signs; a delete answers the endpoint and a second one is `404`.

#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::time::Duration;

use chargeonce_client::{
    Error, IdempotencyKey, ProblemCode, WebhookEndpoint, WebhookEndpointUpdate,
};
use chargeonce_testkit::on_both_stores;
use common::{Backend, Fault, FaultProxy, Served};

/// The code of a refusal, and its status.
fn refusal(error: &Error) -> (u16, ProblemCode) {
    match error {
        Error::Rejected { problem, .. } => (problem.status, problem.code.known().unwrap()),
        other => panic!("a refusal: {other:?}"),
    }
}

/// A loopback URL the test service accepts (it allows loopback, over http).
fn hook_url(path: &str) -> String {
    format!("http://127.0.0.1:9/{path}")
}

async fn endpoints_are_made_changed_rolled_and_deleted(backend: Backend) {
    let server = common::start(backend).await;
    let client = server.client();
    let url = hook_url("orders");

    // Make one: its secret comes once.
    let make = IdempotencyKey::for_operation(&common::order("orders-ep"), "make").unwrap();
    let made = client
        .create_webhook_endpoint(
            &url,
            &["refund.succeeded", "payment.succeeded"],
            Some("orders service"),
            &make,
        )
        .await
        .unwrap();
    assert!(made.id.starts_with("we_"), "{made:?}");
    assert_eq!(made.url, url);
    assert_eq!(
        made.enabled_events,
        ["payment.succeeded", "refund.succeeded"],
        "sorted"
    );
    assert_eq!(made.description.as_deref(), Some("orders service"));
    assert!(made.enabled && !made.managed_by_operator && !made.replayed);
    assert_eq!(made.previous_secret_expires_at, None);
    let secret = made.secret.clone().expect("the secret, once");
    assert!(secret.starts_with("whsec_"), "a signing secret");
    assert!(!format!("{made:?}").contains(&secret), "Debug hides it");

    // The same make again: the same endpoint, no secret, nothing made.
    let again = client
        .create_webhook_endpoint(
            &url,
            &["refund.succeeded", "payment.succeeded"],
            Some("orders service"),
            &make,
        )
        .await
        .unwrap();
    assert_eq!(again.id, made.id);
    assert_eq!(again.secret, None);
    assert!(again.replayed);
    // The same key with another request is the caller's bug.
    let other = client
        .create_webhook_endpoint(&url, &["*"], None, &make)
        .await
        .unwrap_err();
    assert!(matches!(other, Error::KeyReused { .. }), "{other:?}");

    // A second endpoint, for every type.
    let all = client
        .create_webhook_endpoint(
            &hook_url("all"),
            &["*"],
            None,
            &IdempotencyKey::for_operation(&common::order("all-ep"), "make").unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(all.enabled_events, ["*"]);
    assert_eq!(all.description, None);

    let listed = client.list_webhook_endpoints().await.unwrap();
    let ids: Vec<&str> = listed
        .iter()
        .map(|e| e.id.as_str())
        .filter(|id| *id == made.id || *id == all.id)
        .collect();
    assert_eq!(ids, [made.id.as_str(), all.id.as_str()], "oldest first");
    assert!(listed.iter().all(|e| e.secret.is_none()), "{listed:?}");
    let read = client.webhook_endpoint(&made.id).await.unwrap();
    assert_eq!(
        (read.id.as_str(), read.secret.as_deref(), read.replayed),
        (made.id.as_str(), None, false)
    );
    assert_eq!(read.created_at, made.created_at);

    // Update: only what it names changes.
    let pause = WebhookEndpointUpdate {
        enabled: Some(false),
        ..WebhookEndpointUpdate::default()
    };
    let update_key = IdempotencyKey::for_operation(&made.id, "pause").unwrap();
    let paused = client
        .update_webhook_endpoint(&made.id, &pause, &update_key)
        .await
        .unwrap();
    assert!(!paused.enabled);
    assert_eq!(paused.enabled_events, made.enabled_events);
    assert_eq!(paused.description, made.description);
    assert_eq!(paused.secret, None);
    let change = WebhookEndpointUpdate {
        enabled_events: Some(vec!["payment.declined".to_owned()]),
        enabled: Some(true),
        description: Some(String::new()),
    };
    let changed = client
        .update_webhook_endpoint(
            &made.id,
            &change,
            &IdempotencyKey::for_operation(&made.id, "change").unwrap(),
        )
        .await
        .unwrap();
    assert!(changed.enabled);
    assert_eq!(changed.enabled_events, ["payment.declined"]);
    assert_eq!(changed.description, None, "\"\" clears it");
    let unknown = WebhookEndpointUpdate {
        enabled_events: Some(vec!["payment.exploded".to_owned()]),
        ..WebhookEndpointUpdate::default()
    };
    let refused = client
        .update_webhook_endpoint(
            &made.id,
            &unknown,
            &IdempotencyKey::for_operation(&made.id, "unknown").unwrap(),
        )
        .await
        .unwrap_err();
    assert_eq!(refusal(&refused), (422, ProblemCode::InvalidRequest));

    // Roll the secret with an hour's overlap: the new one comes once.
    let roll = IdempotencyKey::for_operation(&made.id, "roll-1").unwrap();
    let rolled = client
        .roll_webhook_endpoint_secret(&made.id, Some(Duration::from_secs(3600)), &roll)
        .await
        .unwrap();
    assert_eq!(rolled.id, made.id);
    assert!(!rolled.replayed);
    let new_secret = rolled.secret.clone().expect("the new secret, once");
    assert_ne!(new_secret, secret);
    let overlap_ends = rolled
        .previous_secret_expires_at
        .expect("the old secret signs for an hour");
    let overlap = overlap_ends - rolled.created_at;
    assert!(overlap >= time::Duration::minutes(59), "{rolled:?}");
    let replayed = client
        .roll_webhook_endpoint_secret(&made.id, Some(Duration::from_secs(3600)), &roll)
        .await
        .unwrap();
    assert_eq!(
        (replayed.id.as_str(), replayed.secret.as_deref()),
        (made.id.as_str(), None)
    );
    assert!(replayed.replayed);
    let too_long = client
        .roll_webhook_endpoint_secret(
            &made.id,
            Some(Duration::from_secs(604_801)),
            &IdempotencyKey::for_operation(&made.id, "roll-too-long").unwrap(),
        )
        .await
        .unwrap_err();
    assert_eq!(refusal(&too_long), (422, ProblemCode::InvalidRequest));

    // Delete: answered as it was; then gone.
    let deleted: WebhookEndpoint = client.delete_webhook_endpoint(&made.id).await.unwrap();
    assert_eq!(deleted.id, made.id);
    assert_eq!(deleted.secret, None);
    let twice = client.delete_webhook_endpoint(&made.id).await.unwrap_err();
    assert_eq!(refusal(&twice), (404, ProblemCode::NotFound));
    let gone = client.webhook_endpoint(&made.id).await.unwrap_err();
    assert_eq!(refusal(&gone), (404, ProblemCode::NotFound));
    let listed = client.list_webhook_endpoints().await.unwrap();
    assert!(listed.iter().all(|e| e.id != made.id), "{listed:?}");
    assert!(listed.iter().any(|e| e.id == all.id), "{listed:?}");
    let roll_gone = client
        .roll_webhook_endpoint_secret(
            &made.id,
            None,
            &IdempotencyKey::for_operation(&made.id, "roll-2").unwrap(),
        )
        .await
        .unwrap_err();
    assert_eq!(refusal(&roll_gone), (404, ProblemCode::NotFound));
}

/// A URL the service will not deliver to is refused at registration, and
/// nothing is made.
async fn an_unusable_url_is_refused(backend: Backend) {
    let server = common::start(backend).await;
    let client = server.client();
    let before = client.list_webhook_endpoints().await.unwrap().len();
    let refused = client
        .create_webhook_endpoint(
            "ftp://127.0.0.1/hook",
            &["*"],
            None,
            &IdempotencyKey::for_operation(&common::order("ftp-ep"), "make").unwrap(),
        )
        .await
        .unwrap_err();
    assert_eq!(refusal(&refused), (422, ProblemCode::InvalidRequest));
    assert_eq!(client.list_webhook_endpoints().await.unwrap().len(), before);
}

/// A make retried after a 503 and a lost answer, with the same idempotency
/// key: the attempt that got through made the endpoint, the next one is its
/// replay (without the secret), and the shop holds one such endpoint.
async fn a_make_is_retried_with_the_same_key(backend: Backend) {
    let server = common::start(backend).await;
    let proxy = FaultProxy::start(
        server.addr,
        &[Fault::Unavailable, Fault::LoseAnswer],
        Fault::Pass,
    )
    .await;
    let client = common::client_for(&proxy.base, common::fast_policy());
    let label = common::order("lost-make");
    let make = IdempotencyKey::for_operation(&label, "make").unwrap();
    let made = client
        .create_webhook_endpoint(&hook_url("lost"), &["*"], Some(&label), &make)
        .await
        .unwrap();
    assert!(made.replayed, "{made:?}");
    assert_eq!(made.secret, None);
    assert_eq!(
        proxy.connections()[..2],
        [Fault::Unavailable, Fault::LoseAnswer]
    );
    let endpoints = server.client().list_webhook_endpoints().await.unwrap();
    assert_eq!(
        endpoints
            .iter()
            .filter(|e| e.description.as_deref() == Some(label.as_str()))
            .count(),
        1,
        "{endpoints:?}"
    );
}

on_both_stores!(
    endpoints_are_made_changed_rolled_and_deleted,
    an_unusable_url_is_refused,
    a_make_is_retried_with_the_same_key
);
