//! Connection limits of the real binary: a flood of silent sockets under a
//! low file limit does not stop the service, a clean stop still drains the
//! connections with a request in flight, and the wait for a database
//! connection is bounded by its flag.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::time::Duration;

use chargeonce_testkit::TestDb;
use common::{Server, ServerConfig};
use sqlx::Connection as _;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

fn addr(server: &Server) -> String {
    server.base.trim_start_matches("http://").to_owned()
}

/// Reads until EOF; when it came, or `None` if the socket was still open
/// at `deadline`.
async fn eof_by(mut stream: TcpStream, deadline: Instant) -> Option<Instant> {
    let mut buf = [0u8; 1024];
    loop {
        match tokio::time::timeout_at(deadline, stream.read(&mut buf)).await {
            Err(_) => return None,
            Ok(Ok(0)) | Ok(Err(_)) => return Some(Instant::now()),
            Ok(Ok(_)) => {}
        }
    }
}

/// `ulimit -n 256` and 300 connections that send nothing or half a request
/// head: a real payment is still answered, and the server closes every
/// silent socket (read returns EOF), the first ones within the header
/// timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_flood_of_silent_sockets_does_not_stop_the_service() {
    let db = TestDb::sqlite();
    common::add_shop(db.url()).await;
    let ledger = common::ledger_path(&db.dir());
    let config = ServerConfig::new("F")
        .nofile(256)
        .args(&["--header-timeout", "2s"]);
    let server = Server::start(config, db.url(), &ledger).await;

    let opened_at = Instant::now();
    let mut silent = Vec::new();
    for i in 0..300 {
        let mut stream = TcpStream::connect(addr(&server)).await.unwrap();
        if i % 3 == 0 {
            stream
                .write_all(b"POST /v1/payments HTTP/1.1\r\nHost: x\r\nContent-")
                .await
                .unwrap();
        }
        silent.push(stream);
    }

    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(15))
        .build()
        .unwrap();
    let key = common::new_key("flood");
    let body = common::payment_body("order-flood-1", "tok_ok");
    let started = Instant::now();
    let paid = common::try_pay(&client, &server.base, &key, &body)
        .await
        .expect("a payment is answered within 15 s despite the flood");
    assert_eq!(paid.status, 201, "{}", paid.text());
    eprintln!("payment answered after {:?}", started.elapsed());

    // Every silent socket is closed by the server. The first ones were
    // accepted at once, so their EOF comes within the header timeout (2 s)
    // plus slack; the rest waited for a free place under the cap first.
    let deadline = opened_at + Duration::from_secs(30);
    let closed = futures::future::join_all(silent.into_iter().map(|s| eof_by(s, deadline))).await;
    let open = closed.iter().filter(|c| c.is_none()).count();
    assert_eq!(open, 0, "{open} of 300 silent sockets never closed");
    let first = closed[..50].iter().flatten().max().unwrap();
    assert!(
        first.duration_since(opened_at) < Duration::from_secs(5),
        "the first silent sockets closed after {:?}",
        first.duration_since(opened_at)
    );

    // And the server is still fine.
    let again = common::pay(&client, &server.base, &key, &body).await;
    again.assert_replay_of(&paid);
}

/// SIGTERM while a payment's client still waits for it: the connection is
/// drained (the client gets its 201), a silent connection does not hold the
/// stop up, and the process exits 0.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sigterm_drains_connections_with_a_request_in_flight() {
    let db = TestDb::sqlite();
    common::add_shop(db.url()).await;
    let ledger = common::ledger_path(&db.dir());
    let config = ServerConfig::new("G")
        .sim_slow("2s")
        .args(&["--header-timeout", "20s"]);
    let mut server = Server::start(config, db.url(), &ledger).await;
    let client = common::client();
    let key = common::new_key("drain");
    let body = common::payment_body("order-drain-1", "tok_slow");
    let in_flight = {
        let (client, base, key, body) = (client.clone(), server.base.clone(), key.clone(), body);
        tokio::spawn(async move { common::try_pay(&client, &base, &key, &body).await })
    };
    // The payment is claimed (its row exists) before the stop.
    common::eventually("the payment's claim", Duration::from_secs(10), || {
        let (client, base) = (client.clone(), server.base.clone());
        async move {
            let listed = client
                .get(format!("{base}/v1/payments?reference=order-drain-1"))
                .basic_auth(common::SHOP, Some(common::SECRET))
                .send()
                .await
                .ok()?;
            let listed: serde_json::Value = listed.json().await.ok()?;
            (!listed["data"].as_array()?.is_empty()).then_some(())
        }
    })
    .await;
    let _silent = TcpStream::connect(addr(&server)).await.unwrap();

    let stopped_at = Instant::now();
    let exit = tokio::task::block_in_place(|| server.terminate());
    assert!(exit.success(), "a clean stop exits 0, got {exit:?}");
    let took = stopped_at.elapsed();
    assert!(
        took < Duration::from_secs(10),
        "the silent connection did not hold the stop up to the 20 s header timeout: {took:?}"
    );
    let answer = in_flight
        .await
        .unwrap()
        .expect("the connection was drained, not cut");
    assert_eq!(answer.status, 201, "{}", answer.text());
    assert_eq!(answer.payment_status(), "succeeded");
}

/// `--database-acquire-timeout` bounds a request's wait for a pooled
/// connection. With one connection, held by a claim that waits on the test's
/// uncommitted row of the same key, the next payment is answered 503
/// `store_unavailable` with `Retry-After` within the client's 3 s (the
/// default is 5 s); once the row is rolled back, the first payment
/// completes.
#[tokio::test]
async fn the_acquire_timeout_flag_bounds_the_wait_for_a_database_connection() {
    let db = TestDb::postgres().await;
    common::add_shop(db.url()).await;
    let ledger = common::ledger_path(&db.dir());
    let server = Server::start(
        ServerConfig::new("A").args(&[
            "--max-connections",
            "1",
            "--database-acquire-timeout",
            "300ms",
        ]),
        db.url(),
        &ledger,
    )
    .await;
    let mut holder = sqlx::PgConnection::connect(db.url()).await.unwrap();
    sqlx::query("BEGIN").execute(&mut holder).await.unwrap();
    sqlx::query(
        "INSERT INTO idempotency_keys (shop_id, key, fingerprint, method, path, \
             recovery_point, expires_at) \
         VALUES ($1, 'k-held', $2, 'POST', '/v1/payments', 'payment_created', \
             now() + interval '1 hour')",
    )
    .bind(common::SHOP)
    .bind([0u8; 32].as_slice())
    .execute(&mut holder)
    .await
    .unwrap();
    let client = common::client();
    let first = tokio::spawn({
        let (client, base) = (client.clone(), server.base.clone());
        async move {
            let body = common::payment_body("order-held", "tok_ok");
            common::pay(&client, &base, "k-held", &body).await
        }
    });
    // The first claim holds the one connection, waiting for the test's row.
    common::eventually(
        "the claim waiting on the test's row",
        Duration::from_secs(10),
        || async {
            let mut watcher = sqlx::PgConnection::connect(db.url()).await.ok()?;
            let waiting: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM pg_stat_activity \
             WHERE wait_event_type = 'Lock' AND query LIKE '%INSERT INTO idempotency_keys%'",
            )
            .fetch_one(&mut watcher)
            .await
            .ok()?;
            (waiting == 1).then_some(())
        },
    )
    .await;
    let body = common::payment_body("order-waits", "tok_ok");
    let second = tokio::time::timeout(
        Duration::from_secs(3),
        common::pay(&client, &server.base, "k-waits", &body),
    )
    .await
    .expect("answered before the client's 3 s");
    assert_eq!(second.status, 503, "{}", second.text());
    assert_eq!(second.json()["code"], "store_unavailable");
    assert!(second.header("retry-after").is_some());
    sqlx::query("ROLLBACK").execute(&mut holder).await.unwrap();
    let first = first.await.unwrap();
    assert_eq!(first.status, 201, "{}", first.text());
}

/// The measure: `ulimit -n 256` (so about 128 client connections),
/// 300 silent sockets and 75 half-sent heads held open, the header timeout
/// at a minute so it frees nothing. A new client's payment is answered
/// anyway, because idle connections make room for it (the least recently
/// active first), and the sockets so closed see EOF long before the header
/// timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn idle_and_half_sent_connections_make_room_for_a_new_client() {
    let db = TestDb::sqlite();
    common::add_shop(db.url()).await;
    let ledger = common::ledger_path(&db.dir());
    let config = ServerConfig::new("R").nofile(256).args(&[
        "--header-timeout",
        "60s",
        "--idle-timeout",
        "60s",
    ]);
    let server = Server::start(config, db.url(), &ledger).await;

    let mut held = Vec::new();
    for i in 0..375 {
        let mut stream = TcpStream::connect(addr(&server)).await.unwrap();
        if i >= 300 {
            stream
                .write_all(b"POST /v1/payments HTTP/1.1\r\nHost: x\r\nContent-")
                .await
                .unwrap();
        }
        held.push(stream);
    }

    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap();
    let key = common::new_key("room");
    let body = common::payment_body("order-room-1", "tok_ok");
    let started = Instant::now();
    let paid = common::pay(&client, &server.base, &key, &body).await;
    let took = started.elapsed();
    assert_eq!(paid.status, 201, "{}", paid.text());
    eprintln!("payment answered after {took:?} with 375 sockets held");
    assert!(
        took < Duration::from_secs(30),
        "answered only after {took:?}: the header timeout (60 s) cannot have freed anything"
    );

    // Every held socket accepted before the payment's was closed to make
    // room, except those still under the cap: at least 375 - 128.
    let deadline = Instant::now() + Duration::from_secs(5);
    let closed = futures::future::join_all(held.into_iter().map(|s| eof_by(s, deadline))).await;
    let closed = closed.iter().flatten().count();
    eprintln!("{closed} of 375 held sockets closed by the server");
    assert!(
        closed >= 375 - 128,
        "only {closed} held sockets were closed"
    );
    let made_room = closed_for(&server, "make_room").await;
    assert!(made_room >= 375 - 128, "counted in the metric: {made_room}");
}

/// `chargeonce_connections_closed_total{reason}` on the operator listener.
async fn closed_for(server: &Server, reason: &str) -> u64 {
    let text = reqwest::get(server.operator_url("/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let prefix = format!("chargeonce_connections_closed_total{{reason=\"{reason}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(prefix.as_str()))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// One client address holds at most its share (`--max-connections-per-client
/// 10`): its 20 idle keep-alive connections are cut to 10 (the oldest
/// closed), its payment still goes through on a new connection, and another
/// address is untouched.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_address_holds_at_most_its_share() {
    let db = TestDb::sqlite();
    common::add_shop(db.url()).await;
    let ledger = common::ledger_path(&db.dir());
    let config = ServerConfig::new("S").args(&["--max-connections-per-client", "10"]);
    let server = Server::start(config, db.url(), &ledger).await;
    let port = addr(&server)
        .rsplit(':')
        .next()
        .unwrap()
        .parse::<u16>()
        .unwrap();

    let connect_from = |ip: [u8; 4]| async move {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket
            .bind((std::net::Ipv4Addr::from(ip), 0).into())
            .unwrap();
        let mut stream = socket
            .connect((std::net::Ipv4Addr::LOCALHOST, port).into())
            .await
            .unwrap();
        // One request each, so it is an idle keep-alive connection after.
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .unwrap();
        let mut buf = [0u8; 512];
        let n = stream.read(&mut buf).await.unwrap();
        assert!(buf[..n].starts_with(b"HTTP/1.1 200"));
        stream
    };
    let other = connect_from([127, 0, 0, 2]).await;
    let mut mine = Vec::new();
    for _ in 0..20 {
        mine.push(connect_from([127, 0, 0, 1]).await);
    }
    let client = reqwest::Client::new();
    let paid = common::pay(
        &client,
        &server.base,
        &common::new_key("share"),
        &common::payment_body("order-share", "tok_ok"),
    )
    .await;
    assert_eq!(paid.status, 201, "{}", paid.text());

    let deadline = Instant::now() + Duration::from_secs(3);
    let closed = futures::future::join_all(mine.into_iter().map(|s| eof_by(s, deadline))).await;
    let first_ten = closed[..10].iter().filter(|c| c.is_some()).count();
    assert!(first_ten >= 10, "the oldest ten were closed: {closed:?}");
    assert!(
        closed[11..].iter().any(Option::is_none),
        "some of the newest stay open (within the share)"
    );
    let other_closed = eof_by(other, Instant::now() + Duration::from_millis(300)).await;
    assert!(
        other_closed.is_none(),
        "another address's connection is untouched"
    );
    assert!(closed_for(&server, "client_share").await >= 10);
}
