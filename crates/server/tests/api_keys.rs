//! A shop's API keys at the HTTP layer, on both stores: a key made through
//! the keyring authenticates at once; its use is written down by the
//! recorder, not by the request; a revoked key answers 401
//! `api_key_revoked` and an expired one `api_key_expired`, each naming the
//! Basic scheme; a `read_only` key's POST is 403 and stores nothing.

#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::time::Duration;

use chargeonce_core::ShopId;
use chargeonce_core::api_key::Scope;
use chargeonce_core::keyring::{self, KeyRequest};
use chargeonce_testkit::on_both_stores;
use common::{Backend, SHOP, TestService, body, send};

fn request(scope: Scope) -> KeyRequest {
    KeyRequest {
        mode: chargeonce_core::api_key::Mode::Live,
        scope,
        description: Some("test".into()),
        expires_at: None,
    }
}

fn list(s: &TestService, secret: &str) -> reqwest::RequestBuilder {
    s.http
        .get(s.url("/v1/payments"))
        .basic_auth(SHOP, Some(secret))
}

async fn keys_live_revoke_expire_and_record_their_use(backend: Backend) {
    // No auth cache: every request reads the keys (the TTL bound is the
    // end-to-end test's, crates/cli/tests/api_keys.rs).
    let s = TestService::builder(backend)
        .state(|state| state.with_auth_cache_ttl(Duration::ZERO))
        .start()
        .await;
    let shop = ShopId::new(SHOP).unwrap();
    let made = keyring::make(s.store.as_ref(), &shop, request(Scope::Full))
        .await
        .unwrap()
        .unwrap();
    let secret = made.secret.expose().to_owned();
    assert_eq!(send(list(&s, &secret)).await.status, 200);

    let stored = |s: &TestService| {
        let store = s.store.clone();
        let (shop, id) = (shop.clone(), made.key.id.clone());
        async move {
            store
                .shop_keys(&shop)
                .await
                .unwrap()
                .unwrap()
                .into_iter()
                .find(|c| c.key.id == id)
                .unwrap()
                .key
        }
    };
    assert_eq!(
        stored(&s).await.last_used_at,
        None,
        "a request writes nothing"
    );
    chargeonce_server::key_use::flush(&s.state).await;
    assert!(
        stored(&s).await.last_used_at.is_some(),
        "written by the recorder"
    );

    let rolled = keyring::roll(s.store.as_ref(), &shop, &made.key.id, Duration::ZERO)
        .await
        .unwrap()
        .unwrap();
    let expired = send(list(&s, &secret)).await;
    expired.assert_problem(401, "api_key_expired");
    assert!(expired.header("www-authenticate").is_some());
    let next = rolled.secret.expose().to_owned();
    assert_eq!(send(list(&s, &next)).await.status, 200);

    s.store
        .revoke_api_key(&shop, &rolled.key.id)
        .await
        .unwrap()
        .unwrap();
    send(list(&s, &next))
        .await
        .assert_problem(401, "api_key_revoked");
    let again = s.store.revoke_api_key(&shop, &rolled.key.id).await.unwrap();
    assert_eq!(
        again.unwrap().revoked_at,
        stored_revoked(&s, &shop, &rolled.key.id).await,
        "revoking twice keeps the first time"
    );
}

async fn stored_revoked(
    s: &TestService,
    shop: &ShopId,
    id: &chargeonce_core::api_key::ApiKeyId,
) -> Option<time::OffsetDateTime> {
    s.store
        .shop_keys(shop)
        .await
        .unwrap()
        .unwrap()
        .into_iter()
        .find(|c| c.key.id == *id)
        .unwrap()
        .key
        .revoked_at
}

async fn a_read_only_key_writes_nothing(backend: Backend) {
    let s = TestService::start(backend).await;
    let shop = ShopId::new(SHOP).unwrap();
    let reader = keyring::make(s.store.as_ref(), &shop, request(Scope::ReadOnly))
        .await
        .unwrap()
        .unwrap();
    let secret = reader.secret.expose().to_owned();
    let refused = send(
        s.http
            .post(s.url("/v1/payments"))
            .basic_auth(SHOP, Some(&secret))
            .header("idempotency-key", "ro-1")
            .json(&body("order-ro", "10.00", "tok_ok")),
    )
    .await;
    refused.assert_problem(403, "insufficient_scope");
    assert!(
        s.store
            .key(
                &shop,
                &chargeonce_core::IdempotencyKey::new("ro-1").unwrap()
            )
            .await
            .unwrap()
            .is_none(),
        "no key stored"
    );
    assert_eq!(s.ledger_len().await, 0, "nothing charged");
    assert_eq!(send(list(&s, &secret)).await.status, 200);
}

async fn a_shop_holds_at_most_32_active_keys(backend: Backend) {
    let s = TestService::start(backend).await;
    let shop = ShopId::new(SHOP).unwrap();
    // The shop's first secret is one of them.
    for _ in 1..chargeonce_core::api_key::MAX_ACTIVE_KEYS {
        keyring::make(s.store.as_ref(), &shop, request(Scope::ReadOnly))
            .await
            .unwrap()
            .unwrap();
    }
    let refused = keyring::make(s.store.as_ref(), &shop, request(Scope::ReadOnly))
        .await
        .unwrap();
    assert_eq!(
        refused.unwrap_err(),
        chargeonce_core::api_key::KeyRefusal::TooMany
    );
    let unknown = keyring::make(
        s.store.as_ref(),
        &ShopId::new("nobody").unwrap(),
        request(Scope::Full),
    )
    .await
    .unwrap();
    assert!(matches!(
        unknown,
        Err(chargeonce_core::api_key::KeyRefusal::NoShop(_))
    ));
}

/// A key made while an instance holds the shop's keys in its cache works at
/// once: a secret that matches no cached key has them read again (when the
/// cached read is at least `REREAD_AFTER_MISS` old), so a roll's successor
/// can be deployed right away.
async fn a_new_key_works_at_once_on_a_warm_instance(backend: Backend) {
    let s = TestService::start(backend).await; // the auth cache's 30 s TTL
    let shop = ShopId::new(SHOP).unwrap();
    assert_eq!(send(list(&s, common::SECRET)).await.status, 200, "warm");
    // The cache's read must be older than the re-read gate, as any read is
    // a moment after it was made.
    tokio::time::sleep(chargeonce_server::cache::REREAD_AFTER_MISS).await;
    let rolled = keyring::roll(
        s.store.as_ref(),
        &shop,
        &first_key(&s, &shop).await,
        Duration::from_secs(3600),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(send(list(&s, rolled.secret.expose())).await.status, 200);
    assert_eq!(
        send(list(&s, common::SECRET)).await.status,
        200,
        "the overlap"
    );
    // Wrong secrets cost the store a read at most every REREAD_AFTER_MISS.
    for _ in 0..5 {
        send(list(&s, "sk_wrong_0123456789abcdef"))
            .await
            .assert_problem(401, "unauthorized");
    }
}

async fn first_key(s: &TestService, shop: &ShopId) -> chargeonce_core::api_key::ApiKeyId {
    s.store.shop_keys(shop).await.unwrap().unwrap()[0]
        .key
        .id
        .clone()
}

on_both_stores!(
    keys_live_revoke_expire_and_record_their_use,
    a_read_only_key_writes_nothing,
    a_shop_holds_at_most_32_active_keys,
    a_new_key_works_at_once_on_a_warm_instance,
);
