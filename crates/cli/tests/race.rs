//! Races across two `chargeonce serve` processes sharing one PostgreSQL
//! database and one acquirer ledger: whatever arrives at once, the ledger holds
//! exactly one charge per key, and every answer is the first 201, its
//! byte-identical replay, or a 409 `request_in_progress`.
#![allow(clippy::unwrap_used, missing_docs)]

mod common;

use std::collections::HashMap;
use std::time::Duration;

use chargeonce_testkit::TestDb;
use common::{Answer, Server, ServerConfig};
use tokio::time::Instant;

/// Two servers on one database and one ledger.
async fn two_servers(db: &TestDb, sim_slow: &'static str) -> (Server, Server) {
    common::add_shop(db.url()).await;
    let ledger = common::ledger_path(&db.dir());
    tokio::join!(
        Server::start(ServerConfig::new("A").sim_slow(sim_slow), db.url(), &ledger),
        Server::start(ServerConfig::new("B").sim_slow(sim_slow), db.url(), &ledger),
    )
}

/// What the answers to many requests with one key were.
#[derive(Default)]
struct Tally {
    /// 201s without the replay header: the executions.
    executed: Vec<Answer>,
    /// Answers with `Idempotent-Replayed: true`.
    replays: Vec<Answer>,
    /// 409 `request_in_progress`.
    in_progress: usize,
    /// How soon after the requests started the first final answer (201 or
    /// replay) arrived.
    earliest_final: Option<Duration>,
    /// How long each execution's request took, from sending to its answer.
    executed_latency: Vec<Duration>,
}

impl Tally {
    /// Sorts one answer, sent at `sent` and received at `at` (both counted
    /// from the start of the requests), failing on anything the contract does
    /// not allow.
    fn add(&mut self, answer: Answer, sent: Duration, at: Duration) {
        assert!(
            answer.status < 500,
            "no 5xx allowed: {} {}",
            answer.status,
            answer.text()
        );
        if answer.status != 409 {
            self.earliest_final = Some(self.earliest_final.map_or(at, |e| e.min(at)));
        }
        if answer.is_replay() {
            self.replays.push(answer);
        } else if answer.status == 201 {
            self.executed.push(answer);
            self.executed_latency.push(at.saturating_sub(sent));
        } else {
            answer.assert_in_progress();
            self.in_progress += 1;
        }
    }

    /// Exactly one execution; every replay equals it byte for byte. Returns it.
    fn the_first(&self, label: &str) -> &Answer {
        assert_eq!(
            self.executed.len(),
            1,
            "{label}: exactly one request executes; executed bodies: {:?}",
            self.executed.iter().map(Answer::text).collect::<Vec<_>>()
        );
        let first = &self.executed[0];
        assert_eq!(
            first.payment_status(),
            "succeeded",
            "{label}: {}",
            first.text()
        );
        assert_eq!(first.header("content-type"), Some("application/json"));
        for replay in &self.replays {
            replay.assert_replay_of(first);
        }
        first
    }

    /// With an acquirer that takes `slow` to answer the first call, no final
    /// answer can exist before it did: an earlier one means a request ran the
    /// payment beside the first (and got the acquirer's instant replay).
    ///
    /// Likewise the one execution is the request that waited for the slow
    /// acquirer call: a quick one took a live operation over.
    fn assert_nothing_final_before(&self, slow: Duration, label: &str) {
        let earliest = self.earliest_final.expect("some final answer");
        assert!(
            earliest >= slow,
            "{label}: a final answer came {earliest:?} after the start, before the \
             {slow:?} acquirer call could have answered"
        );
        for latency in &self.executed_latency {
            assert!(
                *latency >= slow,
                "{label}: the executing request took {latency:?}, less than the {slow:?} \
                 acquirer call: it did not wait for the first execution"
            );
        }
    }
}

/// 200 POSTs with one key and one body, alternately to two processes: the
/// first 100 at once (they race for the claim), the next 100 spread over
/// `spread` (they land while the first runs, or after it finished).
async fn race_one_key(token: &str, sim_slow: &'static str, spread: Duration) -> Tally {
    let db = TestDb::postgres().await;
    let (a, b) = two_servers(&db, sim_slow).await;
    let client = common::client();
    let key = common::new_key("race");
    let reference = "order-race-1";
    let body = common::payment_body(reference, token);

    let start = Instant::now();
    let tasks: Vec<_> = (0..200u32)
        .map(|i| {
            let base = if i.is_multiple_of(2) {
                a.base.clone()
            } else {
                b.base.clone()
            };
            let (client, key, body) = (client.clone(), key.clone(), body.clone());
            let delay = if i < 100 {
                Duration::ZERO
            } else {
                spread * (i - 100) / 100
            };
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                let sent = start.elapsed();
                let answer = common::pay(&client, &base, &key, &body).await;
                (answer, sent, start.elapsed())
            })
        })
        .collect();
    let mut tally = Tally::default();
    for joined in futures::future::join_all(tasks).await {
        let (answer, sent, at) = joined.expect("request task");
        tally.add(answer, sent, at);
    }
    let first = tally.the_first("one key").clone();
    let payment = first.json();
    eprintln!(
        "{token}: 1 executed (in {:?}), {} replays, {} in progress, first final answer at {:?}",
        tally.executed_latency,
        tally.replays.len(),
        tally.in_progress,
        tally.earliest_final
    );

    // The first has finished: later requests on either process are replays.
    for server in [&a, &b] {
        let again = common::pay(&client, &server.base, &key, &body).await;
        again.assert_replay_of(&first);
    }

    // Exactly one charge moved money, and it is this payment's.
    let ledger = common::ledger(&client, &a.operator).await;
    assert_eq!(
        common::charges(&ledger).len(),
        1,
        "one charge in all: {ledger:#}"
    );
    common::assert_one_charge_of(&ledger, reference, &payment);
    // Both processes see the same ledger.
    assert_eq!(
        common::ledger(&client, &b.operator).await["charges"],
        ledger["charges"]
    );

    // The stored payment agrees with the answer.
    let id = first.payment_id();
    let stored = common::get_payment(&client, &b.base, &id).await;
    assert_eq!(stored.status, 200, "{}", stored.text());
    assert_eq!(stored.json()["status"], "succeeded");
    assert_eq!(
        stored.json()["provider_payment_id"],
        payment["provider_payment_id"]
    );
    tally
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn race_two_processes_one_key() {
    // tok_slow with a 1 s acquirer: the first execution is in flight while the
    // others arrive, so both processes must answer 409 for it.
    let tally = race_one_key("tok_slow", "1s", Duration::from_secs(2)).await;
    tally.assert_nothing_final_before(Duration::from_secs(1), "one key");
    assert!(
        tally.in_progress > 0,
        "requests that arrived during the 1 s acquirer call must get 409"
    );
    assert_eq!(1 + tally.replays.len() + tally.in_progress, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn race_two_processes_one_key_fast_acquirer() {
    // tok_ok: the first execution is quick; the rest are 409s or replays.
    let tally = race_one_key("tok_ok", "1s", Duration::from_millis(300)).await;
    assert_eq!(1 + tally.replays.len() + tally.in_progress, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn race_two_processes_twenty_keys() {
    let db = TestDb::postgres().await;
    let (a, b) = two_servers(&db, "1s").await;
    let client = common::client();
    let run = uuid::Uuid::new_v4().simple().to_string();
    let keys: Vec<String> = (0..20).map(|k| format!("race-{run}-{k}")).collect();
    let reference = |k: usize| format!("order-many-{k}");
    // Half the keys hit a slow acquirer (duplicates arrive while in flight),
    // half a fast one.
    let body = |k: usize| {
        common::payment_body(
            &reference(k),
            if k.is_multiple_of(2) {
                "tok_ok"
            } else {
                "tok_slow"
            },
        )
    };

    // 10 rounds of the 20 keys; each key alternates between the processes.
    let start = Instant::now();
    let mut tasks = Vec::new();
    for round in 0..10 {
        for (k, key) in keys.iter().enumerate() {
            let base = if (k + round).is_multiple_of(2) {
                a.base.clone()
            } else {
                b.base.clone()
            };
            let (client, key, body) = (client.clone(), key.clone(), body(k));
            tasks.push(tokio::spawn(async move {
                let sent = start.elapsed();
                let answer = common::pay(&client, &base, &key, &body).await;
                (k, answer, sent, start.elapsed())
            }));
        }
    }
    let mut tallies: HashMap<usize, Tally> = HashMap::new();
    for joined in futures::future::join_all(tasks).await {
        let (k, answer, sent, at) = joined.expect("request task");
        tallies.entry(k).or_default().add(answer, sent, at);
    }

    let ledger = common::ledger(&client, &a.operator).await;
    assert_eq!(
        common::charges(&ledger).len(),
        20,
        "one charge per key, no more: {ledger:#}"
    );
    let mut payment_ids = Vec::new();
    for (k, key) in keys.iter().enumerate() {
        let tally = &tallies[&k];
        assert_eq!(1 + tally.replays.len() + tally.in_progress, 10, "key {k}");
        let first = tally.the_first(&format!("key {k}"));
        if !k.is_multiple_of(2) {
            tally.assert_nothing_final_before(Duration::from_secs(1), &format!("key {k}"));
        }
        let payment = first.json();
        assert_eq!(payment["reference"], reference(k).as_str());
        common::assert_one_charge_of(&ledger, &reference(k), &payment);
        payment_ids.push(first.payment_id());
        // After the storm, a repeat is the replay.
        common::pay(&client, &b.base, key, &body(k))
            .await
            .assert_replay_of(first);
    }
    payment_ids.sort();
    payment_ids.dedup();
    assert_eq!(payment_ids.len(), 20, "twenty distinct payments");
    let totals = ledger["total_succeeded"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(totals.len(), 1, "{ledger:#}");
    assert_eq!(totals[0]["currency"], "RUB");
    assert_eq!(totals[0]["count"], 20);
    assert_eq!(totals[0]["amount"], "30000.00");
}

/// The lease is renewed while a slow acquirer call runs: with a 1 s lease and a
/// 3 s acquirer, the other process keeps answering 409 (it never takes the
/// live operation over), and the first request gets its own 201.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn slow_acquirer_outlives_the_lease_without_a_take_over() {
    let db = TestDb::postgres().await;
    common::add_shop(db.url()).await;
    let ledger = common::ledger_path(&db.dir());
    let (a, b) = tokio::join!(
        Server::start(
            ServerConfig::new("A").lease("1s").sim_slow("3s"),
            db.url(),
            &ledger
        ),
        Server::start(
            ServerConfig::new("B").lease("1s").sim_slow("3s"),
            db.url(),
            &ledger
        ),
    );
    let client = common::client();
    let key = common::new_key("lease");
    let reference = "order-lease-1";
    let body = common::payment_body(reference, "tok_slow");

    let started = Instant::now();
    let first = {
        let (client, base, key, body) = (client.clone(), a.base.clone(), key.clone(), body.clone());
        tokio::spawn(async move { common::pay(&client, &base, &key, &body).await })
    };
    // Well past the first lease, while the acquirer still sleeps.
    for at_ms in [1500, 2000, 2500] {
        tokio::time::sleep_until(started + Duration::from_millis(at_ms)).await;
        let answer = common::pay(&client, &b.base, &key, &body).await;
        assert!(
            !first.is_finished(),
            "the 3 s acquirer call is still running at {at_ms} ms"
        );
        answer.assert_in_progress();
    }
    let first = first.await.expect("request task");
    assert_eq!(
        first.status,
        201,
        "the owner finishes its own payment: {}",
        first.text()
    );
    assert!(!first.is_replay());
    assert_eq!(first.payment_status(), "succeeded");
    common::pay(&client, &b.base, &key, &body)
        .await
        .assert_replay_of(&first);

    let ledger = common::ledger(&client, &b.operator).await;
    assert_eq!(common::charges(&ledger).len(), 1, "{ledger:#}");
    common::assert_one_charge_of(&ledger, reference, &first.json());
}
