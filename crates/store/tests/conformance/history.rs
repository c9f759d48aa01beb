//! A payment's history: each write records its entries with the change it
//! makes (and none when it changes nothing), in order; the reads are
//! scoped by shop; repeats are counted by answer, added in batches, and
//! copied into the history when their key is swept.

use std::sync::Arc;
use std::time::Duration;

use chargeonce_core::events::{AttemptOutcome, WebhookEndpoint};
use chargeonce_core::history::{
    AcquirerAttempt, HistoryEntry, HistoryEvent, RepeatCounts, RepeatKind, RepeatTally, SettledBy,
    Tally,
};
use chargeonce_core::observe::{AcquirerCall, AcquirerOutcomeKind};
use chargeonce_core::webhook::{EventKind, WebhookSecret};
use chargeonce_core::{
    Claim, EventRecorded, FinishOutcome, LeaseToken, PaymentId, PaymentStatus, RecoveryPoint,
    RefundAnswer, RefundClaim, RefundStatus, SettleOutcome, ShopSecret,
};
use chargeonce_store::PoolConfig;
use chargeonce_testkit::on_both_stores;
use time::OffsetDateTime;

use crate::support::*;

/// The instance name the fixture's store writes.
fn me() -> String {
    PoolConfig::default().instance
}

/// The entries of the payment, as the operator reads them.
async fn entries(f: &Fixture, id: &PaymentId) -> Vec<HistoryEntry> {
    f.store.payment_history(None, id).await.unwrap()
}

/// What happened to the payment, oldest first.
async fn events(f: &Fixture, id: &PaymentId) -> Vec<HistoryEvent> {
    entries(f, id).await.into_iter().map(|e| e.event).collect()
}

fn attempt(
    call: AcquirerCall,
    outcome: AcquirerOutcomeKind,
    reason: Option<&str>,
) -> AcquirerAttempt {
    AcquirerAttempt {
        call,
        outcome,
        latency: Duration::from_millis(12),
        acquirer_key: "ak_1".into(),
        reason: reason.map(str::to_owned),
    }
}

fn claimed(k: &str) -> HistoryEvent {
    HistoryEvent::Claimed {
        key: k.into(),
        instance: me(),
    }
}

fn linked(k: &str) -> HistoryEvent {
    HistoryEvent::Linked {
        key: k.into(),
        instance: me(),
    }
}

fn answered(k: &str, status: u16) -> HistoryEvent {
    HistoryEvent::Answered {
        key: k.into(),
        status,
    }
}

fn settled_by_request(k: &str, status: PaymentStatus) -> HistoryEvent {
    HistoryEvent::Settled {
        status,
        by: SettledBy::Request { key: k.into() },
    }
}

/// A claim writes `claimed` on the payment it created; a claim linked to
/// the order's live payment (another key, or the same key after it
/// expired) writes `linked` there; a repeat writes nothing.
async fn claims_write_claimed_or_linked(f: Fixture) {
    let (_, payment) = f.claimed("k1", "order-1", LONG).await;
    assert_eq!(events(&f, &payment.id).await, vec![claimed("k1")]);
    let first = &entries(&f, &payment.id).await[0];
    assert_eq!(first.payment_id, payment.id);
    assert_eq!(first.refund_id, None);

    // A repeat is counted on the key row, not in the history.
    assert!(matches!(
        f.claim("k1", "order-1", "order-1", LONG).await,
        Claim::Exists(_)
    ));
    // The other key of a double submit is linked to the live payment.
    let other = f.acquired("k2", "order-1", "order-1").await;
    assert_eq!(other.recovery_point, RecoveryPoint::OrderAlreadyPaid);
    assert_eq!(other.payment.id, payment.id);
    assert_eq!(
        events(&f, &payment.id).await,
        vec![claimed("k1"), linked("k2")]
    );

    // The same key again after it expired: its old row's repeats are left
    // in the history, and it is linked to its own payment.
    let paid = f.finished_key("k3", "order-3", INSTANT).await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let again = f.acquired("k3", "order-3", "order-3").await;
    assert_eq!(again.recovery_point, RecoveryPoint::OrderAlreadyPaid);
    assert_eq!(
        events(&f, &paid.id).await,
        vec![
            claimed("k3"),
            answered("k3", 201),
            settled_by_request("k3", PaymentStatus::Succeeded),
            HistoryEvent::KeyExpired {
                key: "k3".into(),
                repeats: RepeatCounts::default(),
            },
            linked("k3"),
        ]
    );
}

/// A take-over writes where it resumed; for a refund key, on the refunded
/// payment with the refund's id.
async fn a_take_over_writes_taken_over(f: Fixture) {
    // A lease long enough to be alive at the first take-over on a loaded
    // machine (100 ms was not, once, beside a CI run).
    let (_, payment) = f.claimed("k1", "order-1", lease_of(1000)).await;
    assert!(f.take_over("k1", "order-1").await.is_none(), "lease alive");
    tokio::time::sleep(Duration::from_millis(1150)).await;
    assert!(f.take_over("k1", "another body").await.is_none());
    f.take_over("k1", "order-1").await.unwrap();
    assert_eq!(
        events(&f, &payment.id).await,
        vec![
            claimed("k1"),
            HistoryEvent::TakenOver {
                key: "k1".into(),
                instance: me(),
                recovery_point: RecoveryPoint::PaymentCreated,
            }
        ]
    );

    let paid = f.paid_payment("order-2").await;
    let RefundClaim::Acquired(refund) = f.claim_refund(&paid.id, "r1", None, lease_of(100)).await
    else {
        panic!("a new refund key");
    };
    let refund_id = refund.refund.unwrap().id;
    tokio::time::sleep(Duration::from_millis(250)).await;
    let taken = f
        .store
        .take_over(&f.shop, &key("r1"), &fp("r1", "refund"), LONG.lease)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(taken.recovery_point, RecoveryPoint::RefundCreated);
    let last = entries(&f, &paid.id).await.pop().unwrap();
    assert_eq!(last.refund_id.as_ref(), Some(&refund_id));
    assert_eq!(
        last.event,
        HistoryEvent::TakenOver {
            key: "r1".into(),
            instance: me(),
            recovery_point: RecoveryPoint::RefundCreated,
        }
    );
}

/// Releasing or parking a lease writes one entry per acquirer call made
/// under it; a fenced-off release or park writes none.
async fn releasing_or_parking_a_lease_writes_its_calls(f: Fixture) {
    let (lease, payment) = f.claimed("k1", "order-1", LONG).await;
    let unknown = attempt(
        AcquirerCall::Charge,
        AcquirerOutcomeKind::Unknown,
        Some("timeout"),
    );
    let lookup = attempt(AcquirerCall::Lookup, AcquirerOutcomeKind::NotFound, None);
    let mut stale = lease.clone();
    stale.token = LeaseToken::generate();
    assert!(
        !f.store
            .release_lease(&stale, std::slice::from_ref(&unknown))
            .await
            .unwrap()
    );
    assert!(
        !f.store
            .park_lease(&stale, LONG.lease, std::slice::from_ref(&unknown))
            .await
            .unwrap()
    );
    assert_eq!(events(&f, &payment.id).await, vec![claimed("k1")]);

    assert!(
        f.store
            .release_lease(&lease, &[unknown.clone(), lookup.clone()])
            .await
            .unwrap()
    );
    let taken = f.take_over("k1", "order-1").await.unwrap();
    assert!(
        f.store
            .park_lease(&taken.lease, LONG.lease, std::slice::from_ref(&unknown))
            .await
            .unwrap()
    );
    assert_eq!(
        events(&f, &payment.id).await,
        vec![
            claimed("k1"),
            unknown.to_event(&me()),
            lookup.to_event(&me()),
            HistoryEvent::TakenOver {
                key: "k1".into(),
                instance: me(),
                recovery_point: RecoveryPoint::PaymentCreated,
            },
            unknown.to_event(&me()),
        ]
    );
    // A release after the parking is fenced off: nothing more.
    assert!(
        !f.store
            .release_lease(&taken.lease, &[lookup])
            .await
            .unwrap()
    );
    assert_eq!(events(&f, &payment.id).await.len(), 5);
}

/// The calls made under a lease that was then lost are written anyway, about
/// the key's payment, when the engine asks after the fenced write wrote
/// nothing; no lease changes. A key that is gone, or no calls: nothing.
async fn the_calls_of_a_lost_lease_are_written_about_its_payment(f: Fixture) {
    let (lease, payment) = f.claimed("k1", "order-1", LONG).await;
    let charge = attempt(
        AcquirerCall::Charge,
        AcquirerOutcomeKind::Unknown,
        Some("timeout"),
    );
    let mut stale = lease.clone();
    stale.token = LeaseToken::generate();
    assert!(
        !f.store
            .release_lease(&stale, std::slice::from_ref(&charge))
            .await
            .unwrap()
    );
    f.store
        .record_lost_lease_calls(&stale, std::slice::from_ref(&charge))
        .await
        .unwrap();
    f.store.record_lost_lease_calls(&stale, &[]).await.unwrap();
    assert_eq!(
        events(&f, &payment.id).await,
        vec![claimed("k1"), charge.to_event(&me())]
    );
    // The lease was not touched: its holder still releases it.
    assert!(f.store.release_lease(&lease, &[]).await.unwrap());
    let mut gone = stale.clone();
    gone.key = key("k-never-claimed");
    f.store
        .record_lost_lease_calls(&gone, std::slice::from_ref(&charge))
        .await
        .unwrap();
    assert_eq!(events(&f, &payment.id).await.len(), 2);
}

/// A finish writes its calls, its answer and the settlement; a finish that
/// lost its lease, or found the payment settled, writes nothing; a finish
/// without a settlement writes its calls and answer.
async fn a_finish_writes_its_calls_answer_and_settlement(f: Fixture) {
    let charge = attempt(AcquirerCall::Charge, AcquirerOutcomeKind::Succeeded, None);
    let short = lease_of(100);
    let (old, payment) = f.claimed("k1", "order-1", short).await;
    tokio::time::sleep(Duration::from_millis(250)).await;
    let taken = f.take_over("k1", "order-1").await.unwrap();
    let lost = f
        .store
        .finish(
            &old,
            Some((&payment, &succeeded())),
            &response("zombie"),
            LONG.ttl,
            std::slice::from_ref(&charge),
        )
        .await
        .unwrap();
    assert_eq!(lost, FinishOutcome::LeaseLost);
    assert_eq!(
        events(&f, &payment.id).await.len(),
        2,
        "claimed, taken over"
    );
    let stored = f
        .store
        .finish(
            &taken.lease,
            Some((&payment, &succeeded())),
            &response("ok"),
            LONG.ttl,
            std::slice::from_ref(&charge),
        )
        .await
        .unwrap();
    assert_eq!(stored, FinishOutcome::Stored);
    let history = events(&f, &payment.id).await;
    assert_eq!(
        history[2..],
        [
            charge.to_event(&me()),
            answered("k1", 201),
            settled_by_request("k1", PaymentStatus::Succeeded),
        ]
    );
    assert_eq!(history.iter().filter(|e| e.settled_succeeded()).count(), 1);

    // Settled meanwhile (by the reconciler): the finish writes nothing.
    let (lease, second) = f.claimed("k2", "order-2", LONG).await;
    assert!(matches!(
        f.settle(&second.id, &declined()).await,
        SettleOutcome::Settled(_)
    ));
    let outcome = f
        .store
        .finish(
            &lease,
            Some((&second, &succeeded())),
            &response("late"),
            LONG.ttl,
            std::slice::from_ref(&charge),
        )
        .await
        .unwrap();
    assert_eq!(outcome, FinishOutcome::PaymentAlreadySettled);
    assert_eq!(
        events(&f, &second.id).await,
        vec![
            claimed("k2"),
            HistoryEvent::Settled {
                status: PaymentStatus::Declined,
                by: SettledBy::Reconciler,
            },
        ]
    );

    // A linked key's finish (no settlement): its answer, on the live payment.
    let linked_key = f.acquired("k3", "order-1", "order-1").await;
    let lookup = attempt(AcquirerCall::Lookup, AcquirerOutcomeKind::Succeeded, None);
    assert!(
        f.store
            .finish(
                &linked_key.lease,
                None,
                &response("linked"),
                LONG.ttl,
                std::slice::from_ref(&lookup),
            )
            .await
            .unwrap()
            .stored()
    );
    let history = events(&f, &payment.id).await;
    assert_eq!(
        history[5..],
        [linked("k3"), lookup.to_event(&me()), answered("k3", 201)]
    );
    // Finishing again: fenced off, nothing written.
    assert_eq!(
        f.finish(&linked_key.lease, None, "again", LONG.ttl).await,
        FinishOutcome::LeaseLost
    );
    assert_eq!(events(&f, &payment.id).await.len(), 8);
}

/// A write of more entries than one history row holds (16 on both stores:
/// the entries of one write share rows) reads back whole, in order, with
/// increasing `seq`s, after and before other writes' entries.
async fn a_long_write_reads_back_in_order(f: Fixture) {
    let calls: Vec<AcquirerAttempt> = (0..20)
        .map(|i| {
            let mut call = attempt(AcquirerCall::Charge, AcquirerOutcomeKind::Unknown, None);
            call.latency = Duration::from_millis(i);
            call
        })
        .collect();
    let (lease, payment) = f.claimed("k1", "order-1", LONG).await;
    let stored = f
        .store
        .finish(
            &lease,
            Some((&payment, &succeeded())),
            &response("ok"),
            LONG.ttl,
            &calls,
        )
        .await
        .unwrap();
    assert_eq!(stored, FinishOutcome::Stored);
    assert!(matches!(
        f.settle(&payment.id, &declined()).await,
        SettleOutcome::AlreadyFinal(_)
    ));
    let linked_key = f.acquired("k2", "order-1", "order-1").await;
    assert!(
        f.finish(&linked_key.lease, None, "linked", LONG.ttl)
            .await
            .stored()
    );

    let mut expected = vec![claimed("k1")];
    expected.extend(calls.iter().map(|c| c.to_event(&me())));
    expected.extend([
        answered("k1", 201),
        settled_by_request("k1", PaymentStatus::Succeeded),
        linked("k2"),
        answered("k2", 201),
    ]);
    let read = entries(&f, &payment.id).await;
    assert_eq!(
        read.iter().map(|e| e.event.clone()).collect::<Vec<_>>(),
        expected
    );
    assert!(read.windows(2).all(|w| w[0].seq < w[1].seq), "{read:?}");
}

/// A refund's claim writes its reservation, its finish its calls, answer
/// and end, all with the refund's id; a refused claim writes nothing.
async fn a_refund_writes_its_reservation_calls_answer_and_end(f: Fixture) {
    let paid = f.paid_payment("order-1").await;
    let before = events(&f, &paid.id).await.len();
    let acquired = f.refund_acquired(&paid.id, "r1", Some("500.00")).await;
    let refund = acquired.refund.unwrap();
    let call = attempt(AcquirerCall::Refund, AcquirerOutcomeKind::Succeeded, None);
    // Refused (more than what is left): nothing.
    assert!(matches!(
        f.claim_refund(&paid.id, "r2", Some("1400.00"), LONG).await,
        RefundClaim::Refused(_)
    ));
    let stored = f
        .store
        .finish_refund(
            &acquired.lease,
            Some(RefundAnswer {
                refund: &refund,
                reference: paid.reference.as_str(),
                settlement: &refund_succeeded("re_1"),
            }),
            &response("refunded"),
            LONG.ttl,
            std::slice::from_ref(&call),
        )
        .await
        .unwrap();
    assert_eq!(stored, FinishOutcome::Stored);
    let written = entries(&f, &paid.id).await.split_off(before);
    assert!(
        written
            .iter()
            .all(|e| e.refund_id.as_ref() == Some(&refund.id)),
        "{written:?}"
    );
    let written: Vec<_> = written.into_iter().map(|e| e.event).collect();
    assert_eq!(
        written,
        vec![
            HistoryEvent::RefundReserved {
                key: "r1".into(),
                amount_minor: 50000,
                currency: "RUB".into(),
                instance: me(),
            },
            call.to_event(&me()),
            answered("r1", 201),
            HistoryEvent::RefundEnded {
                status: RefundStatus::Succeeded,
            },
        ]
    );
}

/// The reconciler's settlement and an acquirer webhook's are written with
/// who settled; a webhook that changed nothing is written as received; a
/// duplicate webhook writes nothing.
async fn settlements_outside_the_request_name_who_settled(f: Fixture) {
    let (_, first) = f.claimed("k1", "order-1", LONG).await;
    assert!(matches!(
        f.settle(&first.id, &succeeded()).await,
        SettleOutcome::Settled(_)
    ));
    assert!(matches!(
        f.settle(&first.id, &declined()).await,
        SettleOutcome::AlreadyFinal(_)
    ));
    assert_eq!(
        events(&f, &first.id).await,
        vec![
            claimed("k1"),
            HistoryEvent::Settled {
                status: PaymentStatus::Succeeded,
                by: SettledBy::Reconciler,
            },
        ]
    );

    let (_, second) = f.claimed("k2", "order-2", LONG).await;
    let key = second.acquirer_key.clone();
    let record = |id: &'static str, kind| {
        let store = f.store.clone();
        let inbound = event(id, kind, &key, &f.shop);
        async move { store.record_event(&inbound).await.unwrap() }
    };
    assert!(matches!(
        record("evt_0", EventKind::Processing).await,
        EventRecorded::Unchanged(_)
    ));
    assert!(matches!(
        record("evt_1", EventKind::Succeeded).await,
        EventRecorded::Settled(_)
    ));
    assert!(matches!(
        record("evt_1", EventKind::Succeeded).await,
        EventRecorded::Duplicate
    ));
    assert!(matches!(
        record("evt_2", EventKind::Declined).await,
        EventRecorded::Unchanged(_)
    ));
    assert_eq!(
        events(&f, &second.id).await,
        vec![
            claimed("k2"),
            HistoryEvent::WebhookReceived {
                event_id: "evt_0".into(),
                kind: "payment.processing".into(),
            },
            HistoryEvent::Settled {
                status: PaymentStatus::Succeeded,
                by: SettledBy::Webhook {
                    event_id: "evt_1".into(),
                },
            },
            HistoryEvent::WebhookReceived {
                event_id: "evt_2".into(),
                kind: "payment.declined".into(),
            },
        ]
    );
}

/// Each delivery attempt of a merchant event is written with its number,
/// result and status, and a resend by hand too.
async fn merchant_event_deliveries_are_written(f: Fixture) {
    let endpoint = WebhookEndpoint {
        url: "http://127.0.0.1:9/hooks".into(),
        secret: WebhookSecret::new("whsec_test"),
    };
    assert!(f.store.set_webhook(&f.shop, Some(&endpoint)).await.unwrap());
    let paid = f.paid_payment("order-1").await;
    let before = events(&f, &paid.id).await.len();
    let claim_one = || async {
        let due = f.store.claim_due_events(10, LONG.lease).await.unwrap();
        assert_eq!(due.len(), 1, "{due:?}");
        (
            due[0].event.id.clone(),
            due[0].destination.endpoint_id.clone(),
        )
    };
    let (id, endpoint) = claim_one().await;
    let failed = |status, give_up_after| AttemptOutcome::Failed {
        status,
        error: "no".into(),
        retry_in: Duration::from_secs(60),
        give_up_after,
    };
    assert!(
        !f.store
            .record_attempt(
                &f.shop,
                &id,
                &endpoint,
                &failed(Some(500), Duration::from_secs(3600))
            )
            .await
            .unwrap()
    );
    f.store
        .resend_event(&f.shop, &id, None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(claim_one().await, (id.clone(), endpoint.clone()));
    assert!(
        f.store
            .record_attempt(&f.shop, &id, &endpoint, &failed(None, Duration::ZERO))
            .await
            .unwrap(),
        "a failure past the give-up time gives the event up"
    );
    f.store
        .resend_event(&f.shop, &id, None)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(claim_one().await, (id.clone(), endpoint.clone()));
    assert!(
        !f.store
            .record_attempt(
                &f.shop,
                &id,
                &endpoint,
                &AttemptOutcome::Delivered { status: 204 }
            )
            .await
            .unwrap()
    );
    let attempt = |attempt, result: &str, status| HistoryEvent::EventAttempt {
        event_id: id.as_str().to_owned(),
        event_type: "payment.succeeded".into(),
        attempt,
        result: result.into(),
        status,
        endpoint_id: Some(endpoint.to_string()),
    };
    let resent = HistoryEvent::EventResent {
        event_id: id.as_str().to_owned(),
    };
    assert_eq!(
        events(&f, &paid.id).await[before..],
        [
            attempt(1, "failed", Some(500)),
            resent.clone(),
            attempt(2, "given_up", None),
            resent,
            attempt(3, "delivered", Some(204)),
        ]
    );
}

/// A repeat is counted by what it is answered, in the statement that reads
/// the key: 422 (another body) before replay (finished) before 409 (lease
/// alive); a repeat the engine takes over counts only in the total.
async fn repeats_are_counted_by_answer(f: Fixture) {
    let (lease, payment) = f.claimed("k1", "order-1", LONG).await;
    let repeat = |body: &'static str| f.claim("k1", body, "order-1", LONG);
    assert!(matches!(repeat("order-1").await, Claim::Exists(_)));
    assert!(matches!(repeat("another").await, Claim::Exists(_)));
    f.finished(&lease, &payment, "r", LONG.ttl).await;
    assert!(matches!(repeat("order-1").await, Claim::Exists(_)));
    assert!(matches!(repeat("order-1").await, Claim::Exists(_)));
    assert!(matches!(repeat("another").await, Claim::Exists(_)));
    let counts = f
        .store
        .key_repeats(&f.shop, &[key("k1"), key("missing")])
        .await
        .unwrap();
    assert_eq!(counts.len(), 1);
    assert_eq!(counts[0].key, key("k1"));
    let repeats = counts[0].repeats;
    assert_eq!(repeats.conflicts.count, 1);
    assert_eq!(repeats.mismatches.count, 2);
    assert_eq!(repeats.replays.count, 2);
    assert!(repeats.conflicts.last_at.is_some());
    assert!(repeats.replays.last_at >= repeats.conflicts.last_at);

    // An expired lease: the engine takes it over; only the total counts.
    f.claimed("k2", "order-2", lease_of(50)).await;
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert!(matches!(
        f.claim("k2", "order-2", "order-2", LONG).await,
        Claim::Exists(_)
    ));
    let info = f
        .store
        .key_info(&f.shop, &key("k2"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(info.repeats, 1);
    assert_eq!(info.repeats_by, RepeatCounts::default());

    // A refund key's repeats are counted the same way.
    let paid = f.paid_payment("order-3").await;
    f.refund_acquired(&paid.id, "r1", Some("1.00")).await;
    assert!(matches!(
        f.claim_refund(&paid.id, "r1", Some("1.00"), LONG).await,
        RefundClaim::Exists(_)
    ));
    let counts = f.store.key_repeats(&f.shop, &[key("r1")]).await.unwrap();
    assert_eq!(counts[0].repeats.conflicts.count, 1);
}

/// A time of whole seconds (both stores keep it exactly), `secs` after `base`.
fn at(base: i64, secs: i64) -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp(base + secs).unwrap()
}

/// Now, in whole seconds: the base of [`at`].
fn now() -> i64 {
    OffsetDateTime::now_utc().unix_timestamp()
}

/// A batch of repeats from an instance's cache adds to each key's counts
/// and totals, keeps the latest time, and skips keys that are gone.
async fn repeats_from_a_cache_are_added(f: Fixture) {
    let base = now();
    let at = |secs| at(base, secs);
    f.finished_key("k1", "order-1", LONG).await;
    f.finished_key("k2", "order-2", LONG).await;
    let tally = |k: &str, kind, count, last_at| RepeatTally {
        shop_id: f.shop.clone(),
        key: key(k),
        kind,
        count,
        last_at,
    };
    f.store
        .add_repeats(&[
            tally("k1", RepeatKind::Replay, 3, at(100)),
            tally("k1", RepeatKind::Replay, 2, at(50)),
            tally("k1", RepeatKind::Conflict, 1, at(10)),
            tally("k2", RepeatKind::Mismatch, 4, at(20)),
            tally("gone", RepeatKind::Replay, 1, at(20)),
        ])
        .await
        .unwrap();
    // An older time does not move the last one back.
    f.store
        .add_repeats(&[tally("k1", RepeatKind::Replay, 1, at(-100))])
        .await
        .unwrap();
    f.store.add_repeats(&[]).await.unwrap();
    let counts = f
        .store
        .key_repeats(&f.shop, &[key("k2"), key("k1"), key("gone")])
        .await
        .unwrap();
    let of = |k: &str| counts.iter().find(|c| c.key == key(k)).unwrap().repeats;
    assert_eq!(counts.len(), 2);
    assert_eq!(
        of("k1"),
        RepeatCounts {
            replays: Tally {
                count: 6,
                last_at: Some(at(100)),
            },
            conflicts: Tally {
                count: 1,
                last_at: Some(at(10)),
            },
            mismatches: Tally::default(),
        }
    );
    assert_eq!(of("k2").mismatches.count, 4);
    let info = f
        .store
        .key_info(&f.shop, &key("k1"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(info.repeats, 7);
    assert_eq!(info.last_repeat_at, Some(at(100)));
}

/// A swept key leaves its repeat counts in its payment's history.
async fn a_swept_key_leaves_its_repeats(f: Fixture) {
    let base = now();
    let at = |secs| at(base, secs);
    let payment = f.finished_key("k1", "order-1", INSTANT).await;
    f.store
        .add_repeats(&[RepeatTally {
            shop_id: f.shop.clone(),
            key: key("k1"),
            kind: RepeatKind::Replay,
            count: 2,
            last_at: at(5),
        }])
        .await
        .unwrap();
    let before = events(&f, &payment.id).await.len();
    tokio::time::sleep(Duration::from_millis(20)).await;
    assert_eq!(f.store.sweep_expired_keys(10).await.unwrap(), 1);
    let history = events(&f, &payment.id).await;
    assert_eq!(
        history[before..],
        [HistoryEvent::KeyExpired {
            key: "k1".into(),
            repeats: RepeatCounts {
                replays: Tally {
                    count: 2,
                    last_at: Some(at(5)),
                },
                ..RepeatCounts::default()
            },
        }]
    );
    assert_eq!(f.store.sweep_expired_keys(10).await.unwrap(), 0);
    assert_eq!(events(&f, &payment.id).await.len(), before + 1);
}

/// A shop reads only its own payments' histories; the operator any.
async fn a_history_is_read_by_its_shop_only(f: Fixture) {
    let paid = f.paid_payment("order-1").await;
    let mine = f
        .store
        .payment_history(Some(&f.shop), &paid.id)
        .await
        .unwrap();
    assert_eq!(mine.len(), 3);
    assert!(mine.windows(2).all(|w| w[0].seq < w[1].seq));
    assert!(mine.windows(2).all(|w| w[0].at <= w[1].at));
    assert_eq!(mine, entries(&f, &paid.id).await);
    let other = f.other_shop(&ShopSecret::from_string("t")).await;
    assert!(
        f.store
            .payment_history(Some(&other), &paid.id)
            .await
            .unwrap()
            .is_empty()
    );
    let unknown = PaymentId::parse("pay_0123456789abcdef0123456789abcdef").unwrap();
    assert!(entries(&f, &unknown).await.is_empty());
}

/// Keys racing for one order across instances: one `claimed`, one
/// `linked` per other key, on the one payment; each key's duplicates are
/// counted as 409s (its lease is alive), none written.
async fn racing_claims_write_one_claimed_and_the_links(f: Fixture) {
    let stores = f.instances(2).await;
    let mut tasks = Vec::new();
    for i in 0..8 {
        for copy in 0..3 {
            let store = Arc::clone(&stores[(i + copy) % stores.len()]);
            let k = format!("k{i}");
            let (c, p) = (
                claim(&f.shop, &k, "order-1"),
                new_payment(&f.shop, &k, "order-1"),
            );
            tasks.push(tokio::spawn(async move {
                store.claim_payment(&c, &p, LONG).await.unwrap()
            }));
        }
    }
    for task in tasks {
        task.await.unwrap();
    }
    let orders = f.orders_of("order-1").await;
    assert_eq!(orders.len(), 1);
    let history = events(&f, &orders[0].id).await;
    assert_eq!(history.len(), 8, "{history:?}");
    let mut keys: Vec<String> = history
        .iter()
        .map(|e| match e {
            HistoryEvent::Claimed { key, .. } | HistoryEvent::Linked { key, .. } => key.clone(),
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    keys.sort();
    assert_eq!(keys, (0..8).map(|i| format!("k{i}")).collect::<Vec<_>>());
    let first = history
        .iter()
        .filter(|e| matches!(e, HistoryEvent::Claimed { .. }))
        .count();
    assert_eq!(first, 1, "{history:?}");
    let all: Vec<_> = (0..8).map(|i| key(&format!("k{i}"))).collect();
    let counts = f.store.key_repeats(&f.shop, &all).await.unwrap();
    assert_eq!(counts.len(), 8);
    for c in counts {
        assert_eq!(c.repeats.conflicts.count, 2, "{c:?}");
    }
}

on_both_stores!(
    fixture =>
    racing_claims_write_one_claimed_and_the_links,
    claims_write_claimed_or_linked,
    a_take_over_writes_taken_over,
    releasing_or_parking_a_lease_writes_its_calls,
    the_calls_of_a_lost_lease_are_written_about_its_payment,
    a_finish_writes_its_calls_answer_and_settlement,
    a_long_write_reads_back_in_order,
    a_refund_writes_its_reservation_calls_answer_and_end,
    settlements_outside_the_request_name_who_settled,
    merchant_event_deliveries_are_written,
    repeats_are_counted_by_answer,
    repeats_from_a_cache_are_added,
    a_swept_key_leaves_its_repeats,
    a_history_is_read_by_its_shop_only,
);
