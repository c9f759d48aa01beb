//! `/v1/api-keys` over real HTTP on both stores: a shop makes, lists, rolls
//! and revokes its own keys with a `full` key; the secret is answered once;
//! a repeat (sequential or concurrent) makes nothing and answers the same
//! key without its secret; a revocation or roll holds at once on the
//! instance that made it; every hostile request is a problem with a code.

#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use chargeonce_testkit::on_both_stores;
use common::{Backend, SECRET, SHOP, TestService, body, send};
use serde_json::{Value, json};

fn post(
    s: &TestService,
    secret: &str,
    path: &str,
    key: &str,
    body: &Value,
) -> reqwest::RequestBuilder {
    s.http
        .post(s.url(path))
        .basic_auth(SHOP, Some(secret))
        .header("idempotency-key", key)
        .json(body)
}

fn get(s: &TestService, secret: &str, path: &str) -> reqwest::RequestBuilder {
    s.http.get(s.url(path)).basic_auth(SHOP, Some(secret))
}

async fn key_count(s: &TestService) -> usize {
    let list = send(get(s, SECRET, "/v1/api-keys")).await;
    assert_eq!(list.status, 200, "{:?}", list.json());
    list.json()["data"].as_array().unwrap().len()
}

async fn a_key_is_made_once_and_its_secret_shown_once(backend: Backend) {
    let s = TestService::start(backend).await;
    assert_eq!(key_count(&s).await, 1, "the shop's first secret");
    let ask = json!({"scope": "read_only", "description": "support tool"});
    let made = send(post(&s, SECRET, "/v1/api-keys", "support-key-1", &ask)).await;
    assert_eq!(made.status, 201, "{:?}", made.json());
    let key = made.json();
    let secret = key["secret"].as_str().unwrap().to_owned();
    let id = key["id"].as_str().unwrap().to_owned();
    assert!(secret.starts_with("sk_live_"), "{secret}");
    assert!(secret.starts_with(key["prefix"].as_str().unwrap()));
    assert_eq!(key["object"], "api_key");
    assert_eq!(key["livemode"], true);
    assert_eq!(key["scope"], "read_only");
    assert_eq!(key["state"], "active");
    assert_eq!(
        made.header("location"),
        Some(format!("/v1/api-keys/{id}").as_str())
    );
    assert_eq!(made.header("idempotent-replayed"), None);

    // The new key works at once: its reads pass, its writes are 403, and
    // it cannot see the shop's keys.
    assert_eq!(send(get(&s, &secret, "/v1/payments")).await.status, 200);
    send(
        s.http
            .post(s.url("/v1/payments"))
            .basic_auth(SHOP, Some(secret.as_str()))
            .header("idempotency-key", "ro-pay")
            .json(&body("ro-1", "10.00", "tok_ok")),
    )
    .await
    .assert_problem(403, "insufficient_scope");
    send(get(&s, &secret, "/v1/api-keys"))
        .await
        .assert_problem(403, "insufficient_scope");
    send(post(
        &s,
        &secret,
        "/v1/api-keys",
        "escalate",
        &json!({"scope": "full"}),
    ))
    .await
    .assert_problem(403, "insufficient_scope");

    // A repeat answers the same key, without its secret, and makes nothing.
    let repeat = send(post(&s, SECRET, "/v1/api-keys", "support-key-1", &ask)).await;
    assert_eq!(repeat.status, 201);
    assert_eq!(repeat.header("idempotent-replayed"), Some("true"));
    let replayed = repeat.json();
    assert_eq!(replayed["id"], id.as_str());
    assert!(replayed.get("secret").is_none(), "{replayed}");
    assert!(!String::from_utf8_lossy(&repeat.bytes).contains(&secret));
    assert_eq!(key_count(&s).await, 2);

    // The same idempotency key with another request is refused.
    send(post(
        &s,
        SECRET,
        "/v1/api-keys",
        "support-key-1",
        &json!({"scope": "full"}),
    ))
    .await
    .assert_problem(422, "idempotency_key_reused");
    // ... and so is the make's key reused for a roll.
    send(post(
        &s,
        SECRET,
        &format!("/v1/api-keys/{id}/roll"),
        "support-key-1",
        &json!({}),
    ))
    .await
    .assert_problem(422, "idempotency_key_reused");
    assert_eq!(key_count(&s).await, 2);
    // A percent-encoded path of the same repeat is the same request.
    let roll = format!("/v1/api-keys/{id}/roll");
    let encoded = format!(
        "/v1/api-keys/{}%{:02X}{}/roll",
        &id[..4],
        id.as_bytes()[4],
        &id[5..]
    );
    let rolled = send(post(&s, SECRET, &roll, "roll-enc", &json!({}))).await;
    assert_eq!(rolled.status, 201, "{:?}", rolled.json());
    assert_eq!(rolled.header("cache-control"), Some("no-store"));
    let again = send(post(&s, SECRET, &encoded, "roll-enc", &json!({}))).await;
    assert_eq!(again.status, 201, "{encoded}: {:?}", again.json());
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    assert_eq!(again.json()["id"], rolled.json()["id"]);
    assert_eq!(
        key_count(&s).await,
        3,
        "the first, the support key, its successor"
    );

    // Reads never show a secret.
    let listed = send(get(&s, SECRET, "/v1/api-keys")).await;
    assert!(!String::from_utf8_lossy(&listed.bytes).contains(&secret));
    assert_eq!(listed.json()["data"][1]["id"], id.as_str(), "newest first");
    let one = send(get(&s, SECRET, &format!("/v1/api-keys/{id}"))).await;
    assert_eq!(one.status, 200);
    assert_eq!(one.json()["description"], "support tool");
    assert!(one.json().get("secret").is_none());
}

async fn concurrent_repeats_make_one_key(backend: Backend) {
    let s = TestService::start(backend).await;
    let ask = json!({"scope": "payments"});
    let answers = futures::future::join_all(
        (0..8).map(|_| send(post(&s, SECRET, "/v1/api-keys", "checkout-key", &ask))),
    )
    .await;
    let ids: std::collections::HashSet<String> = answers
        .iter()
        .map(|a| {
            assert_eq!(a.status, 201, "{:?}", a.json());
            a.json()["id"].as_str().unwrap().to_owned()
        })
        .collect();
    let with_secret = answers
        .iter()
        .filter(|a| a.json().get("secret").is_some())
        .count();
    assert_eq!(ids.len(), 1, "one key for every repeat");
    assert_eq!(with_secret, 1, "the secret shown once");
    assert_eq!(key_count(&s).await, 2);
}

async fn a_roll_and_a_revocation_hold_at_once_here(backend: Backend) {
    // A long auth cache: what holds at once is this instance forgetting.
    let s = TestService::builder(backend)
        .state(|state| state.with_auth_cache_ttl(std::time::Duration::from_secs(3600)))
        .start()
        .await;
    let made = send(post(
        &s,
        SECRET,
        "/v1/api-keys",
        "ci-key",
        &json!({"scope": "full"}),
    ))
    .await;
    let old = made.json();
    let (old_id, old_secret) = (
        old["id"].as_str().unwrap().to_owned(),
        old["secret"].as_str().unwrap().to_owned(),
    );
    assert_eq!(send(get(&s, &old_secret, "/v1/payments")).await.status, 200);

    let roll_path = format!("/v1/api-keys/{old_id}/roll");
    let ask = json!({"expire_old_in_seconds": 0});
    let rolled = send(post(&s, SECRET, &roll_path, "roll-1", &ask)).await;
    assert_eq!(rolled.status, 201, "{:?}", rolled.json());
    let successor = rolled.json();
    let new_secret = successor["secret"].as_str().unwrap().to_owned();
    assert_eq!(successor["scope"], "full");
    assert_ne!(successor["id"], old_id.as_str());
    assert_eq!(send(get(&s, &new_secret, "/v1/payments")).await.status, 200);
    send(get(&s, &old_secret, "/v1/payments"))
        .await
        .assert_problem(401, "api_key_expired");
    // A repeat of the roll answers the successor (the old key is expired
    // by now: the repeat is found first) and makes no second one.
    let again = send(post(&s, SECRET, &roll_path, "roll-1", &ask)).await;
    assert_eq!(again.status, 201, "{:?}", again.json());
    assert_eq!(again.json()["id"], successor["id"]);
    assert!(again.json().get("secret").is_none());
    assert_eq!(key_count(&s).await, 3);
    send(post(&s, SECRET, &roll_path, "roll-2", &ask))
        .await
        .assert_problem(409, "api_key_inactive");

    // Revoke the successor: refused here at once, twice is the same.
    let new_id = successor["id"].as_str().unwrap();
    let revoke_path = format!("/v1/api-keys/{new_id}/revoke");
    let revoked = send(post(&s, SECRET, &revoke_path, "revoke-1", &json!({}))).await;
    assert_eq!(revoked.status, 200, "{:?}", revoked.json());
    assert_eq!(revoked.json()["state"], "revoked");
    send(get(&s, &new_secret, "/v1/payments"))
        .await
        .assert_problem(401, "api_key_revoked");
    let twice = send(post(&s, SECRET, &revoke_path, "revoke-2", &json!({}))).await;
    assert_eq!(twice.json()["revoked_at"], revoked.json()["revoked_at"]);
}

async fn hostile_requests_get_problems_and_make_nothing(backend: Backend) {
    let s = TestService::start(backend).await;
    let no_key = send(
        s.http
            .post(s.url("/v1/api-keys"))
            .basic_auth(SHOP, Some(SECRET))
            .json(&json!({"scope": "full"})),
    )
    .await;
    no_key.assert_problem(400, "missing_idempotency_key");
    for (n, body) in [
        json!({"scope": "admin"}),
        json!({}),
        json!({"scope": "full", "mode": "test"}),
        json!({"scope": "full", "description": "x".repeat(201)}),
        json!({"scope": "full", "description": "a\u{0}b"}),
        json!({"scope": "full", "expires_at": "2001-01-01T00:00:00Z"}),
        json!({"scope": "full", "expires_at": "tomorrow"}),
        json!({"scope": 1}),
    ]
    .iter()
    .enumerate()
    {
        send(post(&s, SECRET, "/v1/api-keys", &format!("bad-{n}"), body))
            .await
            .assert_problem(422, "invalid_request");
    }
    let first = send(get(&s, SECRET, "/v1/api-keys")).await.json()["data"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    send(post(
        &s,
        SECRET,
        &format!("/v1/api-keys/{first}/roll"),
        "long",
        &json!({"expire_old_in_seconds": 604_801}),
    ))
    .await
    .assert_problem(422, "invalid_request");
    send(post(
        &s,
        SECRET,
        &format!("/v1/api-keys/{first}/revoke"),
        "body",
        &json!({"now": true}),
    ))
    .await
    .assert_problem(422, "invalid_request");
    for id in ["key_00000000000000000000000000000000", "nope", "pay_x"] {
        send(get(&s, SECRET, &format!("/v1/api-keys/{id}")))
            .await
            .assert_problem(404, "not_found");
        send(post(
            &s,
            SECRET,
            &format!("/v1/api-keys/{id}/roll"),
            &format!("r-{id}"),
            &json!({}),
        ))
        .await
        .assert_problem(404, "not_found");
        send(post(
            &s,
            SECRET,
            &format!("/v1/api-keys/{id}/revoke"),
            &format!("v-{id}"),
            &json!({}),
        ))
        .await
        .assert_problem(404, "not_found");
    }
    // Another shop's key is not found either.
    let other = send(
        s.http
            .get(s.url("/v1/api-keys"))
            .basic_auth(common::OTHER_SHOP, Some(common::OTHER_SECRET)),
    )
    .await
    .json();
    let other_id = other["data"][0]["id"].as_str().unwrap();
    send(get(&s, SECRET, &format!("/v1/api-keys/{other_id}")))
        .await
        .assert_problem(404, "not_found");
    send(post(
        &s,
        SECRET,
        &format!("/v1/api-keys/{other_id}/revoke"),
        "steal",
        &json!({}),
    ))
    .await
    .assert_problem(404, "not_found");
    assert_eq!(key_count(&s).await, 1, "nothing was made");
}

async fn at_the_cap_a_repeat_still_answers(backend: Backend) {
    let s = TestService::start(backend).await;
    let ask = json!({"scope": "read_only"});
    for n in 1..32 {
        let made = send(post(&s, SECRET, "/v1/api-keys", &format!("k-{n}"), &ask)).await;
        assert_eq!(made.status, 201, "key {n}: {:?}", made.json());
    }
    send(post(&s, SECRET, "/v1/api-keys", "k-32", &ask))
        .await
        .assert_problem(409, "api_key_limit_reached");
    let repeat = send(post(&s, SECRET, "/v1/api-keys", "k-7", &ask)).await;
    assert_eq!(repeat.status, 201);
    assert_eq!(repeat.header("idempotent-replayed"), Some("true"));
    assert_eq!(key_count(&s).await, 32);
}

on_both_stores!(
    a_key_is_made_once_and_its_secret_shown_once,
    concurrent_repeats_make_one_key,
    a_roll_and_a_revocation_hold_at_once_here,
    hostile_requests_get_problems_and_make_nothing,
    at_the_cap_a_repeat_still_answers,
);
