//! A shop's API keys end to end (issue 35): keys made, rolled and revoked
//! with `chargeonce shops keys`, used against two `chargeonce serve`
//! processes on one PostgreSQL database: during a roll's overlap both keys
//! work on both instances; once the old key's time is up it is refused on
//! both at once (its expiry travels with it, even cached); a revoked key is
//! refused on both within the auth cache's TTL; a `read_only` key writes
//! nothing, a `payments` key moves money and reads back only what it made.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::time::Duration;

use chargeonce_testkit::TestDb;
use common::{SECRET, SHOP, Server, ServerConfig};
use tokio::time::Instant;

/// The auth cache's TTL both servers run with: the bound on a revocation.
const AUTH_CACHE_TTL: Duration = Duration::from_secs(1);

/// `chargeonce shops keys ARGS --shop SHOP --database-url URL`; its stdout.
async fn keys(db: &TestDb, args: &[&str]) -> String {
    let out = tokio::process::Command::new(common::bin())
        .args(["shops", "keys"])
        .args(args)
        .args(["--shop", SHOP, "--database-url", db.url()])
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "keys {args:?}: {stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The key id and the secret a `keys add` or `keys roll` printed.
fn made(stdout: &str) -> (String, String) {
    let id = stdout
        .lines()
        .find_map(|l| l.strip_prefix("key ").filter(|l| l.ends_with(" made")))
        .and_then(|l| l.split_whitespace().next())
        .unwrap()
        .to_owned();
    let secret = stdout
        .lines()
        .find_map(|l| l.strip_prefix("secret key (shown once, store it now): "))
        .unwrap()
        .to_owned();
    (id, secret)
}

/// The id of the shop's first key (its secret from `shops add`).
async fn first_key(db: &TestDb) -> String {
    let list = keys(db, &["list"]).await;
    list.lines()
        .nth(1)
        .unwrap()
        .split('\t')
        .next()
        .unwrap()
        .to_owned()
}

/// `GET path` with `secret`: status and problem code (if any).
async fn get(server: &Server, path: &str, secret: &str) -> (u16, String) {
    let response = common::client()
        .get(server.url(path))
        .basic_auth(SHOP, Some(secret))
        .send()
        .await
        .unwrap();
    answer(response).await
}

/// `POST /v1/payments` of a new order with `secret`: status and problem code.
async fn pay(server: &Server, key: &str, secret: &str) -> (u16, String) {
    let response = common::client()
        .post(server.url("/v1/payments"))
        .basic_auth(SHOP, Some(secret))
        .header("Idempotency-Key", key)
        .header("Content-Type", "application/json")
        .body(common::payment_body(key, "tok_ok"))
        .send()
        .await
        .unwrap();
    answer(response).await
}

async fn answer(response: reqwest::Response) -> (u16, String) {
    let status = response.status().as_u16();
    let body: serde_json::Value = response.json().await.unwrap_or_default();
    let code = body["code"].as_str().unwrap_or_default().to_owned();
    (status, code)
}

async fn two_servers(db: &TestDb) -> (Server, Server) {
    common::add_shop(db.url()).await;
    let ledger = common::ledger_path(&db.dir());
    let config = |name| ServerConfig::new(name).args(&["--auth-cache-ttl", "1s"]);
    tokio::join!(
        Server::start(config("A"), db.url(), &ledger),
        Server::start(config("B"), db.url(), &ledger),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_rolled_key_works_through_its_overlap_and_stops_on_every_instance() {
    let db = TestDb::postgres().await;
    let (a, b) = two_servers(&db).await;
    let first = first_key(&db).await;

    // Rolled with an hour's overlap: either key, on either instance.
    let (second, second_secret) =
        made(&keys(&db, &["roll", "--key", &first, "--expire-old-in", "1h"]).await);
    for (server, name) in [(&a, "A"), (&b, "B")] {
        for (secret, which) in [(SECRET, "old"), (second_secret.as_str(), "new")] {
            let key = format!("overlap-{name}-{which}");
            assert_eq!(
                pay(server, &key, secret).await.0,
                201,
                "{which} key on {name}"
            );
            assert_eq!(get(server, "/v1/payments", secret).await.0, 200);
        }
    }

    // Rolled again with a 3-second overlap: the second key stops at its
    // time on both instances, though both read it into their caches.
    let rolled = Instant::now();
    let (_, third_secret) =
        made(&keys(&db, &["roll", "--key", &second, "--expire-old-in", "3s"]).await);
    for server in [&a, &b] {
        assert_eq!(get(server, "/v1/payments", &second_secret).await.0, 200);
    }
    for server in [&a, &b] {
        let refused = common::eventually(
            "the rolled key refused",
            Duration::from_secs(10),
            || async {
                let (status, code) = get(server, "/v1/payments", &second_secret).await;
                (status == 401).then_some(code)
            },
        )
        .await;
        assert_eq!(refused, "api_key_expired");
    }
    let took = rolled.elapsed();
    assert!(
        took < Duration::from_secs(3) + AUTH_CACHE_TTL + Duration::from_secs(1),
        "refused {took:?} after a 3 s overlap"
    );
    for server in [&a, &b] {
        assert_eq!(
            get(server, "/v1/payments", &third_secret).await.0,
            200,
            "its successor"
        );
        assert_eq!(
            get(server, "/v1/payments", SECRET).await.0,
            200,
            "the first: an hour left"
        );
    }

    // Revoked: refused on both within the auth cache's TTL.
    let revoked = Instant::now();
    keys(&db, &["revoke", "--key", &first]).await;
    for server in [&a, &b] {
        let refused = common::eventually(
            "the revoked key refused",
            Duration::from_secs(10),
            || async {
                let (status, code) = get(server, "/v1/payments", SECRET).await;
                (status == 401).then_some(code)
            },
        )
        .await;
        assert_eq!(refused, "api_key_revoked");
    }
    let took = revoked.elapsed();
    assert!(
        took < AUTH_CACHE_TTL + Duration::from_secs(1),
        "revocation took {took:?} with a cache TTL of {AUTH_CACHE_TTL:?}"
    );
    assert_eq!(get(&a, "/v1/payments", &third_secret).await.0, 200);
    let list = keys(&db, &["list"]).await;
    assert!(list.contains("\trevoked\t"), "{list}");
    assert!(list.contains("\texpired\t"), "{list}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn scopes_keep_a_support_tool_read_only_and_a_checkout_to_its_payments() {
    let db = TestDb::postgres().await;
    common::add_shop(db.url()).await;
    let ledger = common::ledger_path(&db.dir());
    let server = Server::start(ServerConfig::new("A"), db.url(), &ledger).await;
    let (_, reader) = made(
        &keys(
            &db,
            &["add", "--scope", "read-only", "--description", "support"],
        )
        .await,
    );
    let (_, checkout) = made(&keys(&db, &["add", "--scope", "payments"]).await);
    assert!(reader.starts_with("sk_live_") && checkout.starts_with("sk_live_"));

    // read_only: every POST refused, nothing stored; every read works.
    assert_eq!(
        pay(&server, "ro-1", &reader).await,
        (403, "insufficient_scope".to_owned())
    );
    let refused = common::client()
        .post(server.url("/v1/events/evt_x/resend"))
        .basic_auth(SHOP, Some(reader.as_str()))
        .send()
        .await
        .unwrap();
    assert_eq!(
        answer(refused).await,
        (403, "insufficient_scope".to_owned())
    );
    assert_eq!(
        get(&server, "/v1/payments?reference=ro-1", SECRET).await.0,
        200
    );
    let listed: serde_json::Value = common::client()
        .get(server.url("/v1/payments?reference=ro-1"))
        .basic_auth(SHOP, Some(SECRET))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        listed["data"].as_array().unwrap().len(),
        0,
        "nothing stored"
    );

    // payments: moves money and reads back what it made, by id.
    let response = common::client()
        .post(server.url("/v1/payments"))
        .basic_auth(SHOP, Some(checkout.as_str()))
        .header("Idempotency-Key", "co-1")
        .header("Content-Type", "application/json")
        .body(common::payment_body("co-1", "tok_ok"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 201);
    let paid: serde_json::Value = response.json().await.unwrap();
    let id = paid["id"].as_str().unwrap();
    assert_eq!(
        get(&server, &format!("/v1/payments/{id}"), &checkout)
            .await
            .0,
        200
    );
    for path in [
        "/v1/payments",
        "/v1/events",
        &format!("/v1/payments/{id}/history"),
    ] {
        assert_eq!(
            get(&server, path, &checkout).await,
            (403, "insufficient_scope".to_owned()),
            "{path}"
        );
        assert_eq!(
            get(&server, path, &reader).await.0,
            200,
            "{path} for the reader"
        );
    }
    assert_eq!(
        get(&server, &format!("/v1/payments/{id}"), &reader).await.0,
        200
    );
}
