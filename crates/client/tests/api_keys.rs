//! API key management by the client against a real server (PostgreSQL and
//! SQLite): a `read_only` key made with the shop's full key reads but may
//! not POST; a repeat of the make under the same idempotency key answers
//! the same key without its secret; a roll with no overlap hands over to
//! the successor at once (the old key is `401 api_key_expired`); a revoked
//! key is `401 api_key_revoked`.

#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::time::Duration;

use chargeonce_client::{
    ApiKeyScope, ApiKeyState, Client, Error, IdempotencyKey, PaymentListParams, ProblemCode,
};
use chargeonce_testkit::on_both_stores;
use common::{Backend, Fault, FaultProxy, Served};

fn client_with(base: &str, secret: &str) -> Client {
    Client::builder(base, common::SHOP, secret)
        .retry_policy(common::fast_policy())
        .connect_timeout(Duration::from_secs(2))
        .build()
        .unwrap()
}

/// The code of a refusal, and its status.
fn refusal(error: &Error) -> (u16, ProblemCode) {
    match error {
        Error::Rejected { problem, .. } => (problem.status, problem.code.known().unwrap()),
        other => panic!("a refusal: {other:?}"),
    }
}

async fn keys_are_made_rolled_and_revoked(backend: Backend) {
    let server = common::start(backend).await;
    let full = server.client();

    // Make a read_only key: its secret comes once.
    let make = IdempotencyKey::for_operation(&common::order("support"), "make-key").unwrap();
    let made = full
        .create_api_key(ApiKeyScope::ReadOnly, Some("support tool"), None, &make)
        .await
        .unwrap();
    assert!(made.id.starts_with("key_"), "{made:?}");
    assert_eq!(made.scope, ApiKeyScope::ReadOnly);
    assert_eq!(made.state, ApiKeyState::Active);
    assert_eq!(made.description.as_deref(), Some("support tool"));
    assert!(!made.replayed);
    let secret = made.secret.clone().expect("the secret, once");
    assert!(!format!("{made:?}").contains(&secret), "Debug hides it");

    // It reads; it may not POST.
    let reader = client_with(&server.base, &secret);
    reader
        .list_payments(&PaymentListParams::default())
        .await
        .unwrap();
    let order = common::order("read-only");
    let refused = reader
        .pay(&common::pay_key(&order), &common::payment(&order, "tok_ok"))
        .await
        .unwrap_err();
    assert_eq!(refusal(&refused), (403, ProblemCode::InsufficientScope));
    // Nor read keys (key routes are for full keys).
    let refused = reader.list_api_keys().await.unwrap_err();
    assert_eq!(refusal(&refused), (403, ProblemCode::InsufficientScope));

    // The same make again: the same key, no secret, nothing made.
    let again = full
        .create_api_key(ApiKeyScope::ReadOnly, Some("support tool"), None, &make)
        .await
        .unwrap();
    assert_eq!(again.id, made.id);
    assert_eq!(again.secret, None);
    assert!(again.replayed);
    // The same key with another request is the caller's bug.
    let other = full
        .create_api_key(ApiKeyScope::Payments, None, None, &make)
        .await
        .unwrap_err();
    assert!(matches!(other, Error::KeyReused { .. }), "{other:?}");

    let listed = full.list_api_keys().await.unwrap();
    assert_eq!(
        listed.iter().filter(|k| k.id == made.id).count(),
        1,
        "{listed:?}"
    );
    assert!(listed.iter().all(|k| k.secret.is_none()));
    let read = full.api_key(&made.id).await.unwrap();
    assert_eq!(
        (read.id.as_str(), read.secret.as_deref()),
        (made.id.as_str(), None)
    );

    // Roll with no overlap: the successor works, the old key is expired.
    let roll = IdempotencyKey::for_operation(&made.id, "roll-1").unwrap();
    let successor = full
        .roll_api_key(&made.id, Some(Duration::ZERO), &roll)
        .await
        .unwrap();
    assert_ne!(successor.id, made.id);
    assert_eq!(successor.scope, ApiKeyScope::ReadOnly);
    let successor_secret = successor.secret.clone().expect("the successor's secret");
    let replayed = full
        .roll_api_key(&made.id, Some(Duration::ZERO), &roll)
        .await
        .unwrap();
    assert_eq!(
        (replayed.id.as_str(), replayed.secret.as_deref()),
        (successor.id.as_str(), None)
    );
    assert!(replayed.replayed);
    let next = client_with(&server.base, &successor_secret);
    next.list_payments(&PaymentListParams::default())
        .await
        .unwrap();
    let expired = reader
        .list_payments(&PaymentListParams::default())
        .await
        .unwrap_err();
    assert_eq!(refusal(&expired), (401, ProblemCode::ApiKeyExpired));
    assert_eq!(
        full.api_key(&made.id).await.unwrap().state,
        ApiKeyState::Expired
    );
    // An expired key cannot be rolled again.
    let inactive = full
        .roll_api_key(
            &made.id,
            None,
            &IdempotencyKey::for_operation(&made.id, "roll-2").unwrap(),
        )
        .await
        .unwrap_err();
    assert_eq!(refusal(&inactive), (409, ProblemCode::ApiKeyInactive));

    // Revoke the successor: it stops at once.
    let revoke = IdempotencyKey::for_operation(&successor.id, "revoke").unwrap();
    let revoked = full.revoke_api_key(&successor.id, &revoke).await.unwrap();
    assert_eq!(revoked.state, ApiKeyState::Revoked);
    assert!(revoked.revoked_at.is_some());
    let refused = next
        .list_payments(&PaymentListParams::default())
        .await
        .unwrap_err();
    assert_eq!(refusal(&refused), (401, ProblemCode::ApiKeyRevoked));
    // Revoking again changes nothing.
    let again = full.revoke_api_key(&successor.id, &revoke).await.unwrap();
    assert_eq!(again.revoked_at, revoked.revoked_at);

    let missing = full.api_key("key_00000000000000000000000000000000").await;
    assert_eq!(refusal(&missing.unwrap_err()), (404, ProblemCode::NotFound));
}

/// A make retried after a 503 and a lost answer, with the same idempotency
/// key: the attempt that got through made the key, the next one is its
/// replay (without the secret), and the shop holds one such key.
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
    let make = IdempotencyKey::for_operation(&label, "make-key").unwrap();
    let made = client
        .create_api_key(ApiKeyScope::Payments, Some(&label), None, &make)
        .await
        .unwrap();
    assert!(made.replayed, "{made:?}");
    assert_eq!(made.secret, None);
    assert_eq!(made.scope, ApiKeyScope::Payments);
    assert_eq!(
        proxy.connections()[..2],
        [Fault::Unavailable, Fault::LoseAnswer]
    );
    let keys = server.client().list_api_keys().await.unwrap();
    assert_eq!(
        keys.iter()
            .filter(|k| k.description.as_deref() == Some(label.as_str()))
            .count(),
        1,
        "{keys:?}"
    );
}

on_both_stores!(
    keys_are_made_rolled_and_revoked,
    a_make_is_retried_with_the_same_key
);
