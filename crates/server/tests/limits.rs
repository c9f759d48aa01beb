//! Limits and back-pressure, on a real server and real sockets: header and
//! idle timeouts, the body deadline, the per-request time limit, the per-shop
//! rate limit, the caps on `Prefer: wait` waiters, the SQLite writer's
//! bounded queue and PostgreSQL's pool timeout.

#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::time::{Duration, Instant};

use chargeonce_core::{IdempotencyKey, RecoveryPoint, ShopId};
use chargeonce_server::conn::ConnectionLimits;
use chargeonce_server::limits::{RateLimit, RequestLimits, WaiterCaps};
use chargeonce_testkit::{client_from, on_both_stores};
use common::{Answer, Backend, OTHER_SECRET, OTHER_SHOP, SECRET, SHOP, TestService};
use common::{body, send};
use futures::StreamExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

fn shop(s: &str) -> ShopId {
    ShopId::new(s).unwrap()
}

fn key(s: &str) -> IdempotencyKey {
    IdempotencyKey::new(s).unwrap()
}

/// Polls `check` every 10 ms until it holds; panics after 10 s.
async fn until<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(10);
    while !check().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Until the key exists in the store (its first request claimed it).
async fn until_claimed(server: &TestService, shop_id: &str, k: &str) {
    until("the key's claim", || async {
        server
            .store
            .key(&shop(shop_id), &key(k))
            .await
            .unwrap()
            .is_some()
    })
    .await;
}

/// Until the key is finished in the store.
async fn until_finished(server: &TestService, k: &str) {
    until("the key's finish", || async {
        server
            .store
            .key(&shop(SHOP), &key(k))
            .await
            .unwrap()
            .is_some_and(|r| r.recovery_point == RecoveryPoint::Finished)
    })
    .await;
}

/// A payment as shop B.
fn pay_as_b(server: &TestService, k: &str, body: &serde_json::Value) -> reqwest::RequestBuilder {
    server
        .http
        .post(server.url("/v1/payments"))
        .basic_auth(OTHER_SHOP, Some(OTHER_SECRET))
        .header("idempotency-key", k)
        .json(body)
}

fn assert_retry_after(answer: &Answer) {
    let retry_after = answer.header("retry-after").expect("Retry-After");
    let seconds: u64 = retry_after.parse().expect("whole seconds");
    assert!(seconds >= 1, "Retry-After {seconds}");
}

async fn metrics(server: &TestService) -> String {
    let answer = send(server.http.get(server.operator_url("/metrics"))).await;
    String::from_utf8(answer.bytes).unwrap()
}

/// Reads until EOF; the time it took, or `None` if the socket stayed open
/// past `within` (bytes read on the way are returned too).
async fn eof_within(stream: &mut TcpStream, within: Duration) -> (Option<Duration>, Vec<u8>) {
    let started = Instant::now();
    let mut read = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let left = within.saturating_sub(started.elapsed());
        match tokio::time::timeout(left, stream.read(&mut buf)).await {
            Err(_) => return (None, read),
            Ok(Ok(0)) | Ok(Err(_)) => return (Some(started.elapsed()), read),
            Ok(Ok(n)) => read.extend_from_slice(&buf[..n]),
        }
    }
}

fn addr(server: &TestService) -> String {
    server.base.trim_start_matches("http://").to_owned()
}

fn basic(shop_id: &str, secret: &str) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(format!("{shop_id}:{secret}"))
}

/// A connection that sends nothing, or half a head, is closed at the
/// header timeout; a kept-alive one stays usable past it and is closed at
/// the idle timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn silent_and_idle_connections_are_closed() {
    let server = TestService::builder(Backend::Sqlite)
        .connection_limits(ConnectionLimits {
            header_timeout: Duration::from_millis(400),
            idle_timeout: Duration::from_millis(1500),
            ..ConnectionLimits::default()
        })
        .start()
        .await;

    let mut silent = TcpStream::connect(addr(&server)).await.unwrap();
    let mut half = TcpStream::connect(addr(&server)).await.unwrap();
    half.write_all(b"POST /v1/payments HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    for stream in [&mut silent, &mut half] {
        let (closed, _) = eof_within(stream, Duration::from_secs(3)).await;
        let closed = closed.expect("closed by the server within the header timeout + slack");
        assert!(closed < Duration::from_millis(1500), "{closed:?}");
    }

    // A kept-alive connection: a request, then a second one after longer
    // than the header timeout (it is still open), then silence.
    let mut kept = TcpStream::connect(addr(&server)).await.unwrap();
    let request = b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n";
    kept.write_all(request).await.unwrap();
    let mut buf = [0u8; 1024];
    let n = kept.read(&mut buf).await.unwrap();
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"), "{:?}", &buf[..n]);
    tokio::time::sleep(Duration::from_millis(800)).await;
    kept.write_all(request).await.unwrap();
    let n = kept.read(&mut buf).await.unwrap();
    assert!(
        buf[..n].starts_with(b"HTTP/1.1 200"),
        "kept alive past the header timeout: {:?}",
        &buf[..n]
    );
    let (closed, _) = eof_within(&mut kept, Duration::from_secs(5)).await;
    let closed = closed.expect("an idle connection is closed at the idle timeout");
    assert!(
        closed >= Duration::from_millis(1200) && closed < Duration::from_millis(3500),
        "closed after {closed:?}, idle timeout 1.5 s"
    );
    let text = metrics(&server).await;
    for line in [
        "chargeonce_connections_closed_total{reason=\"header_timeout\"} 2",
        "chargeonce_connections_closed_total{reason=\"idle_timeout\"} 1",
    ] {
        assert!(text.contains(line), "{line} in {text}");
    }
}

/// A body that trickles in slower than the body deadline gets 408
/// `body_timeout` and the connection is closed; nothing is executed.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_trickling_body_is_cut_with_408() {
    let server = TestService::builder(Backend::Sqlite)
        .state(|state| {
            state.with_request_limits(RequestLimits {
                body_timeout: Duration::from_millis(500),
                ..RequestLimits::default()
            })
        })
        .start()
        .await;
    let mut stream = TcpStream::connect(addr(&server)).await.unwrap();
    let head = format!(
        "POST /v1/payments HTTP/1.1\r\nHost: x\r\nAuthorization: Basic {}\r\n\
         Idempotency-Key: trickle-1\r\nContent-Type: application/json\r\n\
         Content-Length: 300\r\n\r\n",
        basic(SHOP, SECRET)
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    let started = Instant::now();
    let (mut reader, mut writer) = stream.into_split();
    let trickle = tokio::spawn(async move {
        // One byte every 100 ms: 30 s for the whole body.
        for _ in 0..300 {
            if writer.write_all(b" ").await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(5), reader.read_to_end(&mut answer)).await;
    trickle.abort();
    let text = String::from_utf8_lossy(&answer);
    assert!(
        read.is_ok(),
        "the server neither answered nor closed: {text}"
    );
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.contains("application/problem+json"), "{text}");
    assert!(text.contains("\"code\":\"body_timeout\""), "{text}");
    assert!(
        text.to_ascii_lowercase().contains("connection: close"),
        "{text}"
    );
    assert!(started.elapsed() < Duration::from_secs(3));
    assert!(
        server
            .store
            .key(&shop(SHOP), &key("trickle-1"))
            .await
            .unwrap()
            .is_none(),
        "nothing executed"
    );
    assert!(metrics(&server).await.contains("reason=\"body_timeout\""));
}

/// Shop A over its rate limit gets 429 `rate_limited` with Retry-After;
/// shop B, meanwhile, is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_shop_over_its_rate_limit_gets_429_and_others_are_served() {
    let server = TestService::builder(Backend::Sqlite)
        .state(|state| {
            state.with_rate_limit(RateLimit {
                per_second: 1,
                burst: 5,
            })
        })
        .start()
        .await;
    let flood = (0..20).map(|_| send(server.get("/v1/payments?reference=order-rl")));
    let b_requests = (0..5).map(|_| {
        send(
            server
                .http
                .get(server.url("/v1/payments?reference=order-rl"))
                .basic_auth(OTHER_SHOP, Some(OTHER_SECRET)),
        )
    });
    let (a, b) = tokio::join!(
        futures::future::join_all(flood),
        futures::future::join_all(b_requests)
    );
    let served = a.iter().filter(|r| r.status == 200).count();
    assert!((5..=6).contains(&served), "the burst, no more: {served}");
    let refused: Vec<_> = a.iter().filter(|r| r.status != 200).collect();
    assert_eq!(refused.len(), 20 - served);
    for answer in refused {
        answer.assert_problem(429, "rate_limited");
        assert_retry_after(answer);
    }
    for answer in &b {
        assert_eq!(answer.status, 200, "shop B has its own allowance");
    }
    // A wrong secret does not spend the shop's allowance: it is a 401.
    let wrong = send(
        server
            .http
            .get(server.url("/v1/payments?reference=order-rl"))
            .basic_auth(OTHER_SHOP, Some("wrong")),
    )
    .await;
    wrong.assert_problem(401, "unauthorized");
    let text = metrics(&server).await;
    assert!(
        text.contains(&format!(
            "chargeonce_refusals_total{{reason=\"rate_limited\"}} {}",
            20 - served
        )),
        "{text}"
    );
}

/// With a payment running on a slow acquirer, `Prefer: wait` repeats under
/// the shop's cap wait for its answer; one over it gets the plain 409 at
/// once; a waiter whose client hangs up frees its place; the instance cap
/// holds across shops.
async fn waiters_over_the_caps_get_409_at_once(backend: Backend) {
    let server = TestService::builder(backend)
        .slow(Duration::from_secs(3))
        .state(|state| {
            state.with_waiter_caps(WaiterCaps {
                instance: 3,
                shop: 2,
            })
        })
        .start()
        .await;
    let a_body = body("order-wait-a", "10.00", "tok_slow");
    let first = tokio::spawn(send(server.pay("wait-a", &a_body)));
    until_claimed(&server, SHOP, "wait-a").await;

    let waiter = |server: &TestService| {
        tokio::spawn(send(
            server.pay("wait-a", &a_body).header("prefer", "wait=20"),
        ))
    };
    let w1 = waiter(&server);
    until("one waiter", || async {
        server.state.waiters().of_shop(&shop(SHOP)) == 1
    })
    .await;
    // A waiter whose client gives up frees its place.
    let impatient = tokio::spawn(
        server
            .pay("wait-a", &a_body)
            .header("prefer", "wait=20")
            .timeout(Duration::from_millis(300))
            .send(),
    );
    until("two waiters", || async {
        server.state.waiters().of_shop(&shop(SHOP)) == 2
    })
    .await;
    assert!(impatient.await.unwrap().is_err(), "the client timed out");
    until("the hung-up waiter gone", || async {
        server.state.waiters().of_shop(&shop(SHOP)) == 1
    })
    .await;
    let w2 = waiter(&server);
    until("two waiters", || async {
        server.state.waiters().of_shop(&shop(SHOP)) == 2
    })
    .await;

    // Over the shop's cap: 409 at once, not after the payment.
    let started = Instant::now();
    let over = send(server.pay("wait-a", &a_body).header("prefer", "wait=20")).await;
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "{:?}",
        started.elapsed()
    );
    over.assert_problem(409, "request_in_progress");
    assert_retry_after(&over);
    assert_eq!(over.header("preference-applied"), None, "it did not wait");

    // Shop B: its first waiter takes the instance's last place, its second
    // finds the instance full.
    let b_body = body("order-wait-b", "10.00", "tok_slow");
    let b_first = tokio::spawn(send(pay_as_b(&server, "wait-b", &b_body)));
    until_claimed(&server, OTHER_SHOP, "wait-b").await;
    let b1 = tokio::spawn(send(
        pay_as_b(&server, "wait-b", &b_body).header("prefer", "wait=20"),
    ));
    until("three waiters", || async {
        server.state.waiters().len() == 3
    })
    .await;
    let started = Instant::now();
    let b_over = send(pay_as_b(&server, "wait-b", &b_body).header("prefer", "wait=20")).await;
    assert!(started.elapsed() < Duration::from_secs(1));
    b_over.assert_problem(409, "request_in_progress");

    let first = first.await.unwrap();
    assert_eq!(first.status, 201);
    for w in [w1, w2] {
        let answer = w.await.unwrap();
        assert_eq!(
            answer.status,
            201,
            "{}",
            String::from_utf8_lossy(&answer.bytes)
        );
        assert!(answer.replayed());
        assert_eq!(answer.bytes, first.bytes);
        assert_eq!(answer.header("preference-applied"), Some("wait=20"));
    }
    assert_eq!(b_first.await.unwrap().status, 201);
    assert_eq!(b1.await.unwrap().status, 201);
    assert!(server.state.waiters().is_empty(), "every place freed");
    assert_eq!(server.charges("order-wait-a").await.len(), 1);
    let text = metrics(&server).await;
    assert!(text.contains("reason=\"waiters_shop\""), "{text}");
    assert!(text.contains("reason=\"waiters_instance\""), "{text}");
}

/// A request past the time limit answers 503 `request_timeout` with
/// Retry-After, while its payment goes on to a stored end: the retry gets
/// it, and the acquirer charged once. `Prefer: wait=N` adds N to the limit.
async fn a_slow_request_answers_503_and_its_payment_still_finishes(backend: Backend) {
    let server = TestService::builder(backend)
        .slow(Duration::from_millis(2000))
        .state(|state| {
            state.with_request_limits(RequestLimits {
                request_timeout: Duration::from_millis(500),
                ..RequestLimits::default()
            })
        })
        .start()
        .await;
    let b = body("order-slow-1", "10.00", "tok_slow");
    let started = Instant::now();
    let cut = send(server.pay("slow-1", &b)).await;
    let took = started.elapsed();
    cut.assert_problem(503, "request_timeout");
    assert_retry_after(&cut);
    assert!(
        took >= Duration::from_millis(400) && took < Duration::from_millis(1800),
        "{took:?}"
    );

    // Meanwhile a repeat asks to wait: its limit is 5 s + 0.5 s.
    let repeat = send(server.pay("slow-1", &b).header("prefer", "wait=5")).await;
    assert_eq!(
        repeat.status,
        201,
        "{}",
        String::from_utf8_lossy(&repeat.bytes)
    );
    assert!(repeat.replayed());
    until_finished(&server, "slow-1").await;
    let retry = send(server.pay("slow-1", &b)).await;
    assert_eq!(retry.status, 201);
    assert!(retry.replayed());
    assert_eq!(retry.bytes, repeat.bytes);
    assert_eq!(server.charges("order-slow-1").await.len(), 1);
    assert!(
        metrics(&server)
            .await
            .contains("reason=\"request_timeout\"")
    );
}

/// The measure, on PostgreSQL: 5 000 requests with random shop ids
/// from one address are answered 401 within its failure budget (60), then
/// 429 `rate_limited` with Retry-After, while a real shop from another
/// address (and from the flooding address too: its hash is cached) keeps
/// paying, with no 503.
async fn a_flood_of_unknown_shops_is_bounded_per_address(backend: Backend) {
    let server = TestService::start(backend).await;
    let flooder = client_from("127.0.0.3");
    let flood = futures::stream::iter(0..5_000)
        .map(|i| {
            let request = flooder
                .get(server.url("/v1/payments"))
                .basic_auth(format!("nobody-{i}"), Some("sk_guess_0123456789"));
            send(request)
        })
        .buffer_unordered(32)
        .collect::<Vec<Answer>>();
    let shop = client_from("127.0.0.4");
    let payments = async {
        let mut answers = Vec::new();
        for i in 0..40 {
            let order = format!("order-flood-{i}");
            let request = shop
                .post(server.url("/v1/payments"))
                .basic_auth(SHOP, Some(SECRET))
                .header("idempotency-key", format!("{order}-pay"))
                .json(&body(&order, "10.00", "tok_ok"));
            answers.push(send(request).await);
        }
        answers
    };
    let (flood, payments) = tokio::join!(flood, payments);
    let unauthorized = flood.iter().filter(|a| a.status == 401).count();
    let limited: Vec<&Answer> = flood.iter().filter(|a| a.status == 429).collect();
    assert_eq!(
        unauthorized + limited.len(),
        5_000,
        "only 401 and 429 (no 503, no 500)"
    );
    assert!(
        unauthorized <= 70,
        "the budget (60 a minute) and little more: {unauthorized}"
    );
    for answer in limited.iter().take(5) {
        answer.assert_problem(429, "rate_limited");
        assert_retry_after(answer);
    }
    for answer in &payments {
        assert_eq!(
            answer.status,
            201,
            "the real shop pays on: {}",
            String::from_utf8_lossy(&answer.bytes)
        );
    }
    // The flooding address still reaches a shop this instance knows.
    let own = send(
        flooder
            .get(server.url("/v1/payments?reference=order-flood-1"))
            .basic_auth(SHOP, Some(SECRET)),
    )
    .await;
    assert_eq!(own.status, 200, "{}", String::from_utf8_lossy(&own.bytes));
}

/// Store look-ups of shop ids never seen have a global ceiling (3 a second
/// here): past it a never-seen id is answered 429 from any address, while
/// shops this instance has seen and ids already looked up (remembered as
/// unknown) cost no look-up.
async fn lookups_of_unseen_shops_have_a_ceiling(backend: Backend) {
    let server = TestService::builder(backend)
        .state(|state| {
            state.with_auth_limits(chargeonce_server::auth_limits::AuthLimitSettings {
                failures_per_minute: 0,
                unseen_lookups_per_second: 3,
            })
        })
        .start()
        .await;
    let ask = |shop: String| {
        send(
            server
                .http
                .get(server.url("/v1/refunds"))
                .basic_auth(shop, Some("sk_guess_0123456789")),
        )
    };
    // A shop the instance was told of at start costs no share of the ceiling.
    server
        .state
        .auth_limits()
        .know([ShopId::new(OTHER_SHOP).unwrap()]);
    let other = send(
        server
            .http
            .get(server.url("/v1/refunds"))
            .basic_auth(OTHER_SHOP, Some(OTHER_SECRET)),
    )
    .await;
    assert_eq!(other.status, 200);
    // A shop it was not told of: its first request is a look-up (one of three).
    assert_eq!(send(server.get("/v1/refunds")).await.status, 200);
    for i in 0..2 {
        ask(format!("unseen-{i}"))
            .await
            .assert_problem(401, "unauthorized");
    }
    ask("unseen-2".to_owned())
        .await
        .assert_problem(429, "rate_limited");
    // Remembered as unknown: no look-up, a plain 401.
    ask("unseen-0".to_owned())
        .await
        .assert_problem(401, "unauthorized");
    // A shop this instance has seen never counts against the ceiling.
    assert_eq!(send(server.get("/v1/refunds")).await.status, 200);
}

/// Behind a trusted proxy the failure budget is the forwarded client's:
/// one client past its budget gets 429, another behind the same proxy
/// still gets its 401s. From an untrusted peer the header changes nothing
/// (a guesser cannot dodge its budget by inventing addresses).
async fn behind_a_trusted_proxy_the_budget_is_the_forwarded_clients(backend: Backend) {
    let server = TestService::builder(backend)
        .state(|state| {
            state
                .with_auth_limits(chargeonce_server::auth_limits::AuthLimitSettings {
                    failures_per_minute: 3,
                    unseen_lookups_per_second: 0,
                })
                .with_trusted_proxies(vec!["127.0.0.5/32".parse().unwrap()])
        })
        .start()
        .await;
    let guess = |http: &reqwest::Client, forwarded: &str, i: u32| {
        send(
            http.get(server.url("/v1/refunds"))
                .basic_auth(format!("nobody-{i}"), Some("sk_guess_0123456789"))
                .header("x-forwarded-for", forwarded),
        )
    };
    let proxy = client_from("127.0.0.5");
    for i in 0..3 {
        guess(&proxy, "198.51.100.1", i)
            .await
            .assert_problem(401, "unauthorized");
    }
    guess(&proxy, "198.51.100.1", 3)
        .await
        .assert_problem(429, "rate_limited");
    guess(&proxy, "198.51.100.2", 4)
        .await
        .assert_problem(401, "unauthorized");

    let stranger = client_from("127.0.0.6");
    for i in 0..3 {
        guess(&stranger, &format!("203.0.113.{i}"), 10 + i)
            .await
            .assert_problem(401, "unauthorized");
    }
    guess(&stranger, "203.0.113.99", 20)
        .await
        .assert_problem(429, "rate_limited");
}

on_both_stores!(
    behind_a_trusted_proxy_the_budget_is_the_forwarded_clients,
    a_flood_of_unknown_shops_is_bounded_per_address,
    lookups_of_unseen_shops_have_a_ceiling,
    waiters_over_the_caps_get_409_at_once,
    a_slow_request_answers_503_and_its_payment_still_finishes,
);

/// The SQLite writer's queue full: a new payment is refused at once with
/// 503 `store_overloaded` and Retry-After, and nothing of it is stored or
/// charged; the payments already queued go through.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_full_sqlite_queue_answers_503_and_stores_nothing() {
    use sqlx::Connection as _;
    let server = TestService::builder(Backend::Sqlite)
        .pool(chargeonce_store::PoolConfig {
            write_queue: 2,
            ..chargeonce_store::PoolConfig::default()
        })
        .start()
        .await;
    // Another process holds the file's write lock: the writer thread blocks
    // on its next transaction (for up to its 5 s busy timeout).
    let mut holder = sqlx::SqliteConnection::connect(server.db_url())
        .await
        .unwrap();
    sqlx::query("BEGIN IMMEDIATE")
        .execute(&mut holder)
        .await
        .unwrap();
    let before = server.sqlite_stats().unwrap();
    let pay = |n: u32| {
        let b = body(&format!("order-q-{n}"), "10.00", "tok_ok");
        tokio::spawn(send(server.pay(&format!("q-{n}"), &b)))
    };
    let first = pay(1);
    until("the writer stuck on the first claim", || async {
        server.sqlite_stats().unwrap().transactions > before.transactions
    })
    .await;
    let queued = [pay(2), pay(3)];
    until("two claims queued", || async {
        server.sqlite_stats().unwrap().queued == 2
    })
    .await;

    let started = Instant::now();
    let refused = send(server.pay("q-4", &body("order-q-4", "10.00", "tok_ok"))).await;
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "refused at once"
    );
    refused.assert_problem(503, "store_overloaded");
    assert_retry_after(&refused);
    assert_eq!(server.sqlite_stats().unwrap().shed, 1);

    sqlx::query("ROLLBACK").execute(&mut holder).await.unwrap();
    assert_eq!(first.await.unwrap().status, 201);
    for q in queued {
        assert_eq!(q.await.unwrap().status, 201);
    }
    assert!(
        server
            .store
            .key(&shop(SHOP), &key("q-4"))
            .await
            .unwrap()
            .is_none(),
        "nothing stored for the refused payment"
    );
    assert!(server.charges("order-q-4").await.is_empty());
    let retry = send(server.pay("q-4", &body("order-q-4", "10.00", "tok_ok"))).await;
    assert_eq!(
        retry.status, 201,
        "a retry once the queue drained is served"
    );
    assert!(
        metrics(&server)
            .await
            .contains("reason=\"store_overloaded\"")
    );
}

/// PostgreSQL: a request that cannot get a pooled connection within the
/// acquire timeout answers 503 `store_unavailable` with Retry-After.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_postgres_pool_timeout_answers_503_with_retry_after() {
    let server = TestService::builder(Backend::Postgres)
        .pool(chargeonce_store::PoolConfig {
            max_connections: 1,
            acquire_timeout: Duration::from_millis(300),
            ..chargeonce_store::PoolConfig::default()
        })
        .start()
        .await;
    let held = server.pg().unwrap().pool().acquire().await.unwrap();
    let started = Instant::now();
    let answer = send(server.pay("pool-1", &body("order-pool-1", "10.00", "tok_ok"))).await;
    answer.assert_problem(503, "store_unavailable");
    assert_retry_after(&answer);
    assert!(started.elapsed() < Duration::from_secs(3));
    drop(held);
    let retry = send(server.pay("pool-1", &body("order-pool-1", "10.00", "tok_ok"))).await;
    assert_eq!(retry.status, 201);
    assert_eq!(server.charges("order-pool-1").await.len(), 1);
}
