//! The finishes of a refund (one statement), of a capture and of a void (a
//! transaction of two each): under a take-over, or with their refund or
//! capture settled before, they write nothing at all; otherwise they write
//! the key's answer, the refund's, capture's or release's end, the
//! payment's amounts or hold, the merchant event and one history row
//! together.

use chargeonce_core::authorization::Hold;
use chargeonce_core::{
    Capture, CaptureSettlement, NewRefund, Refund, RefundAnswer, RefundClaim, RefundSettlement,
    ReleaseClaim, VoidSettlement,
};

use super::*;

/// Runs `finish` while a take-over of the lease's key is held open (its
/// lease token replaced, not yet committed); once the finish waits on it,
/// commits it (`commit`) or rolls it back. What the finish answered.
async fn against_take_over(
    pg: &Pg,
    lease: &Lease,
    commit: bool,
    finish: impl Future<Output = Result<FinishOutcome, StoreError>> + Send + 'static,
) -> FinishOutcome {
    let mut tx = pg.store.pool().begin().await.unwrap();
    sqlx::query(
        "UPDATE idempotency_keys SET lease_token = gen_random_uuid() \
         WHERE shop_id = $1 AND key = $2",
    )
    .bind(lease.shop_id.as_str())
    .bind(lease.key.as_str())
    .execute(&mut *tx)
    .await
    .unwrap();
    against_open(&pg.store, tx, commit, finish).await.unwrap()
}

/// A charged payment and a new refund key's claim of all of it: the
/// refund's lease, the payment and the pending refund.
async fn refund_acquired(pg: &Pg) -> (Lease, Payment, Refund) {
    let (lease, payment) = acquired(pg, "k1", "order-1").await;
    let finished = finish_charged(pg, &lease, &payment, &charge(&payment, None)).await;
    assert_eq!(finished, FinishOutcome::Stored);
    let claimed = pg
        .store
        .claim_refund(
            &claim(&pg.shop, "r1"),
            &NewRefund::new(pg.shop.clone(), payment.id.clone(), key("r1"), None),
            TIMING,
        )
        .await
        .unwrap();
    let RefundClaim::Acquired(acquired) = claimed else {
        panic!("a new refund key: {claimed:?}");
    };
    let refund = acquired.refund.expect("the claim's refund");
    (acquired.lease, acquired.payment, *refund)
}

/// The refund's one call, as its claimant made it: the usual finish, kept
/// on the refund's row (migration 0029).
fn refunded_call(refund: &Refund) -> chargeonce_core::history::AcquirerAttempt {
    chargeonce_core::history::AcquirerAttempt {
        call: chargeonce_core::AcquirerCall::Refund,
        outcome: chargeonce_core::AcquirerOutcomeKind::Succeeded,
        latency: Duration::from_millis(3),
        acquirer_key: refund.acquirer_key.as_str().to_owned(),
        reason: None,
    }
}

/// Our finish of the refund with a success after `attempts`, to run beside
/// a competitor.
fn refunded_finish(
    pg: &Pg,
    lease: &Lease,
    payment: &Payment,
    refund: &Refund,
    attempts: Vec<chargeonce_core::history::AcquirerAttempt>,
) -> impl Future<Output = Result<FinishOutcome, StoreError>> + Send + 'static {
    let store = Arc::clone(&pg.store);
    let (lease, reference, refund) = (lease.clone(), payment.reference.clone(), refund.clone());
    async move {
        let succeeded = RefundSettlement::Succeeded {
            provider_refund_id: "re_ours".into(),
        };
        let answer = RefundAnswer {
            refund: &refund,
            reference: reference.as_str(),
            settlement: &succeeded,
        };
        store
            .finish_refund(
                &lease,
                Some(answer),
                &response("refunded"),
                TIMING.ttl,
                &attempts,
            )
            .await
    }
}

/// A refund as stored: its status, its payment's refunded and reserved
/// amounts, how many history rows name it, and whether its row keeps its
/// finish (migration 0029).
#[derive(Debug, PartialEq)]
struct RefundState {
    status: String,
    refunded: i64,
    reserved: i64,
    history_rows: i64,
    finish_kept: bool,
}

async fn refund_state(pg: &Pg, refund: &Refund) -> RefundState {
    let (status, refunded, reserved, history_rows, finish_kept) = sqlx::query_as(
        "SELECT r.status, p.refunded_minor, p.refund_reserved_minor, \
             (SELECT count(*) FROM payment_history h WHERE h.refund_id = r.id), \
             r.finish_seq IS NOT NULL \
         FROM refunds r JOIN payments p ON p.id = r.payment_id WHERE r.id = $1",
    )
    .bind(refund.id.as_str())
    .fetch_one(pg.store.pool())
    .await
    .unwrap();
    RefundState {
        status,
        refunded,
        reserved,
        history_rows,
        finish_kept,
    }
}

/// The refund claimed, nothing more: pending, its amount reserved, no
/// history row (its reservation is kept on its row).
fn claimed_only(amount: i64) -> RefundState {
    RefundState {
        status: "pending".into(),
        refunded: 0,
        reserved: amount,
        history_rows: 0,
        finish_kept: false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_refund_finish_that_waited_for_a_take_over_writes_nothing() {
    let pg = pg().await;
    let (lease, payment, refund) = refund_acquired(&pg).await;
    let before = events(&pg).await;
    let finish = refunded_finish(&pg, &lease, &payment, &refund, vec![refunded_call(&refund)]);
    let finished = against_take_over(&pg, &lease, true, finish).await;
    assert_eq!(finished, FinishOutcome::LeaseLost);
    assert_unfinished(&pg, "r1", RecoveryPoint::RefundCreated).await;
    let amount = payment.amount.minor_units();
    assert_eq!(refund_state(&pg, &refund).await, claimed_only(amount));
    assert_eq!(events(&pg).await, before);
}

/// The finish that wins after its competitor rolled back writes
/// everything: the usual one keeps its entries on the refund's row, any
/// other (here: no call recorded) writes them in one history row. The
/// history reads the same entries either way.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_refund_finish_whose_competitor_rolled_back_writes_it_all_at_once() {
    for usual in [true, false] {
        let pg = pg().await;
        let (lease, payment, refund) = refund_acquired(&pg).await;
        let before = events(&pg).await;
        let attempts = if usual {
            vec![refunded_call(&refund)]
        } else {
            Vec::new()
        };
        let finish = refunded_finish(&pg, &lease, &payment, &refund, attempts);
        let finished = against_take_over(&pg, &lease, false, finish).await;
        assert_eq!(finished, FinishOutcome::Stored);
        let record = pg.store.key(&pg.shop, &key("r1")).await.unwrap().unwrap();
        assert_eq!(record.recovery_point, RecoveryPoint::Finished);
        assert_eq!(record.response.unwrap().body, b"refunded".to_vec());
        let amount = payment.amount.minor_units();
        assert_eq!(
            refund_state(&pg, &refund).await,
            RefundState {
                status: "succeeded".into(),
                refunded: amount,
                reserved: amount,
                history_rows: i64::from(!usual),
                finish_kept: usual,
            }
        );
        assert_eq!(events(&pg).await, before + 1);
        let kinds = history(&pg, &payment.id).await;
        let ends: &[&str] = if usual {
            &[
                "refund_reserved",
                "acquirer_call",
                "answered",
                "refund_ended",
            ]
        } else {
            &["refund_reserved", "answered", "refund_ended"]
        };
        let ends: Vec<String> = ends.iter().map(|k| (*k).to_owned()).collect();
        assert!(kinds.ends_with(&ends), "{kinds:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_refund_finish_of_a_refund_settled_before_writes_nothing() {
    // Only a holder of the refund's key settles it, and its finish does
    // that with the answer in one statement; an earlier holder's refund
    // settled without its answer is made by hand here. Both forms are
    // tried (the usual one first), and neither writes.
    let pg = pg().await;
    let (lease, payment, refund) = refund_acquired(&pg).await;
    let before = events(&pg).await;
    sqlx::query("UPDATE refunds SET status = 'failed', failure_code = 'theirs' WHERE id = $1")
        .bind(refund.id.as_str())
        .execute(pg.store.pool())
        .await
        .unwrap();
    let finished = refunded_finish(&pg, &lease, &payment, &refund, vec![refunded_call(&refund)])
        .await
        .unwrap();
    assert_eq!(finished, FinishOutcome::PaymentAlreadySettled);
    assert_unfinished(&pg, "r1", RecoveryPoint::RefundCreated).await;
    let record = pg.store.key(&pg.shop, &key("r1")).await.unwrap().unwrap();
    assert!(record.lease_active, "the lease is still ours");
    let amount = payment.amount.minor_units();
    assert_eq!(
        refund_state(&pg, &refund).await,
        RefundState {
            status: "failed".into(),
            ..claimed_only(amount)
        }
    );
    assert_eq!(events(&pg).await, before);
}

/// A refund claimed by another instance (its key taken over since: the
/// row says who claimed it) is not this instance's usual finish: the
/// statement that keeps it on the row writes nothing, and the one with a
/// history row writes everything. The reservation still reads back as the
/// claimant's.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_refund_claimed_by_another_instance_finishes_with_a_history_row() {
    use chargeonce_core::history::HistoryEvent;

    let pg = pg().await;
    let (lease, payment, refund) = refund_acquired(&pg).await;
    sqlx::query("UPDATE refunds SET claimed_by = 'other:1' WHERE id = $1")
        .bind(refund.id.as_str())
        .execute(pg.store.pool())
        .await
        .unwrap();
    let finished = refunded_finish(&pg, &lease, &payment, &refund, vec![refunded_call(&refund)])
        .await
        .unwrap();
    assert_eq!(finished, FinishOutcome::Stored);
    let amount = payment.amount.minor_units();
    assert_eq!(
        refund_state(&pg, &refund).await,
        RefundState {
            status: "succeeded".into(),
            refunded: amount,
            reserved: amount,
            history_rows: 1,
            finish_kept: false,
        }
    );
    let read = pg.store.payment_history(None, &payment.id).await.unwrap();
    let refunds: Vec<&HistoryEvent> = read
        .iter()
        .filter(|e| e.refund_id.as_ref() == Some(&refund.id))
        .map(|e| &e.event)
        .collect();
    assert!(
        matches!(refunds.as_slice(), [
            HistoryEvent::RefundReserved { instance, amount_minor, .. },
            HistoryEvent::AcquirerCall { .. },
            HistoryEvent::Answered { .. },
            HistoryEvent::RefundEnded { .. },
        ] if instance == "other:1" && *amount_minor == amount),
        "{refunds:?}"
    );
    assert!(read.windows(2).all(|w| w[0].seq < w[1].seq), "{read:?}");
}

/// The capture's one call, as its claimant made it: the usual finish,
/// kept on the capture's row (migration 0030).
fn captured_call(capture: &Capture) -> chargeonce_core::history::AcquirerAttempt {
    chargeonce_core::history::AcquirerAttempt {
        call: chargeonce_core::AcquirerCall::Capture,
        outcome: chargeonce_core::AcquirerOutcomeKind::Succeeded,
        latency: Duration::from_millis(5),
        acquirer_key: capture.acquirer_key.as_str().to_owned(),
        reason: None,
    }
}

/// Our finish of the capture with a success after `attempts`, to run
/// beside a competitor.
fn captured_finish(
    pg: &Pg,
    lease: &Lease,
    capture: &Capture,
    attempts: Vec<chargeonce_core::history::AcquirerAttempt>,
) -> impl Future<Output = Result<FinishOutcome, StoreError>> + Send + 'static {
    let store = Arc::clone(&pg.store);
    let (lease, capture) = (lease.clone(), capture.clone());
    async move {
        let succeeded = CaptureSettlement::Succeeded {
            provider_capture_id: "cp_ours".into(),
        };
        store
            .finish_capture(
                &lease,
                Some((&capture, &succeeded)),
                &response("captured"),
                TIMING.ttl,
                &attempts,
            )
            .await
    }
}

/// The capture's status, the payment's captured amount, how many history
/// rows hold the capture's end, and whether the capture's row keeps its
/// finish (migration 0030).
async fn capture_state(pg: &Pg, capture: &Capture) -> (String, i64, i64, bool) {
    sqlx::query_as(
        "SELECT c.status, p.captured_minor, \
             (SELECT count(*) FROM payment_history h \
              WHERE h.payment_id = p.id AND h.kind LIKE '%capture_ended%'), \
             c.finish_seq IS NOT NULL \
         FROM captures c JOIN payments p ON p.id = c.payment_id WHERE c.id = $1",
    )
    .bind(capture.id.as_str())
    .fetch_one(pg.store.pool())
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_capture_finish_that_waited_for_a_take_over_writes_nothing() {
    let pg = pg().await;
    let (lease, payment, capture) = capture_acquired(&pg, "k1", "c1").await;
    let before = events(&pg).await;
    let finish = captured_finish(&pg, &lease, &capture, vec![captured_call(&capture)]);
    let finished = against_take_over(&pg, &lease, true, finish).await;
    assert_eq!(finished, FinishOutcome::LeaseLost);
    assert_unfinished(&pg, "c1", RecoveryPoint::CaptureCreated).await;
    let hold = pg
        .store
        .payment(&pg.shop, &payment.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(hold.authorization().unwrap().in_flight(), 1, "{hold:?}");
    assert_eq!(
        capture_state(&pg, &capture).await,
        ("pending".to_owned(), 0, 0, false)
    );
    assert_eq!(events(&pg).await, before);
}

/// The finish that wins after its competitor rolled back writes
/// everything: the usual one keeps its entries on the capture's row, any
/// other (here: no call recorded; or the row says another instance claimed
/// the capture) writes them in one history row. The history reads the same
/// entries either way.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_capture_finish_whose_competitor_rolled_back_writes_it_all() {
    for (usual, claimant) in [(true, None), (false, None), (true, Some("other:1"))] {
        let pg = pg().await;
        let (lease, payment, capture) = capture_acquired(&pg, "k1", "c1").await;
        if let Some(claimant) = claimant {
            sqlx::query("UPDATE captures SET claimed_by = $2 WHERE id = $1")
                .bind(capture.id.as_str())
                .bind(claimant)
                .execute(pg.store.pool())
                .await
                .unwrap();
        }
        let before = events(&pg).await;
        let attempts = if usual {
            vec![captured_call(&capture)]
        } else {
            Vec::new()
        };
        let finish = captured_finish(&pg, &lease, &capture, attempts);
        let finished = against_take_over(&pg, &lease, false, finish).await;
        assert_eq!(finished, FinishOutcome::Stored);
        let record = pg.store.key(&pg.shop, &key("c1")).await.unwrap().unwrap();
        assert_eq!(record.recovery_point, RecoveryPoint::Finished);
        assert_eq!(record.response.unwrap().body, b"captured".to_vec());
        let stored = pg
            .store
            .payment(&pg.shop, &payment.id)
            .await
            .unwrap()
            .unwrap();
        let hold = stored.authorization().unwrap();
        assert_eq!(hold.in_flight(), 0, "{stored:?}");
        assert_eq!(hold.captured_minor(), payment.amount.minor_units());
        let kept = usual && claimant.is_none();
        assert_eq!(
            capture_state(&pg, &capture).await,
            (
                "succeeded".to_owned(),
                payment.amount.minor_units(),
                i64::from(!kept),
                kept
            )
        );
        assert_eq!(events(&pg).await, before + 1);
        let read = pg.store.payment_history(None, &payment.id).await.unwrap();
        let ends: Vec<&str> = read[read.len() - 3..]
            .iter()
            .map(|e| e.event.kind())
            .collect();
        let reserved = &read[read.len() - 4 + usize::from(!usual)].event;
        assert!(
            matches!(reserved, chargeonce_core::history::HistoryEvent::CaptureReserved {
                instance, last: true, ..
            } if claimant.is_none_or(|c| c == instance)),
            "{read:?}"
        );
        if usual {
            assert_eq!(ends, ["acquirer_call", "answered", "capture_ended"]);
        } else {
            assert_eq!(ends[1..], ["answered", "capture_ended"]);
        }
        assert!(read.windows(2).all(|w| w[0].seq < w[1].seq), "{read:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_capture_finish_of_a_capture_settled_before_writes_nothing() {
    let pg = pg().await;
    let (lease, payment, capture) = capture_acquired(&pg, "k1", "c1").await;
    let before = events(&pg).await;
    sqlx::query("UPDATE captures SET status = 'failed', failure_code = 'theirs' WHERE id = $1")
        .bind(capture.id.as_str())
        .execute(pg.store.pool())
        .await
        .unwrap();
    let finished = captured_finish(&pg, &lease, &capture, vec![captured_call(&capture)])
        .await
        .unwrap();
    assert_eq!(finished, FinishOutcome::PaymentAlreadySettled);
    assert_unfinished(&pg, "c1", RecoveryPoint::CaptureCreated).await;
    let record = pg.store.key(&pg.shop, &key("c1")).await.unwrap().unwrap();
    assert!(record.lease_active, "the lease is still ours");
    let stored = pg
        .store
        .payment(&pg.shop, &payment.id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.authorization().unwrap().in_flight(), 1, "{stored:?}");
    assert_eq!(events(&pg).await, before);
}

/// A void's claim (key `v1`) of a payment [`authorized`]: its lease and
/// the payment.
async fn void_acquired(pg: &Pg) -> (Lease, Payment) {
    let payment = authorized(pg, "k1").await;
    let claimed = pg
        .store
        .claim_void(&claim(&pg.shop, "v1"), &payment.id, TIMING)
        .await
        .unwrap();
    let ReleaseClaim::Acquired(acquired) = claimed else {
        panic!("a new void key: {claimed:?}");
    };
    (acquired.lease, acquired.payment)
}

/// Our finish of the void with a success, to run beside a competitor.
fn voided_finish(
    pg: &Pg,
    lease: &Lease,
    payment: &Payment,
) -> impl Future<Output = Result<FinishOutcome, StoreError>> + Send + 'static {
    let store = Arc::clone(&pg.store);
    let (lease, payment) = (lease.clone(), payment.clone());
    async move {
        let voided = VoidSettlement::Succeeded {
            provider_void_id: "vd_ours".into(),
            released: payment.amount,
        };
        store
            .finish_void(
                &lease,
                Some((&payment.id, &voided)),
                &response("voided"),
                TIMING.ttl,
                &[],
            )
            .await
    }
}

/// The void's race against a take-over of its key held open, committed
/// (`commit`) or rolled back: what the finish answered, the payment's hold
/// and the events added.
async fn void_against_take_over(commit: bool) -> (FinishOutcome, Hold, usize, Pg) {
    let pg = pg().await;
    let (lease, payment) = void_acquired(&pg).await;
    let before = events(&pg).await;
    let finish = voided_finish(&pg, &lease, &payment);
    let finished = against_take_over(&pg, &lease, commit, finish).await;
    let stored = pg
        .store
        .payment(&pg.shop, &payment.id)
        .await
        .unwrap()
        .unwrap();
    let hold = stored.authorization().unwrap().hold();
    (finished, hold, events(&pg).await - before, pg)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_void_finish_that_waited_for_a_take_over_writes_nothing() {
    let (finished, hold, events, pg) = void_against_take_over(true).await;
    assert_eq!(finished, FinishOutcome::LeaseLost);
    assert_eq!(
        hold,
        Hold::Releasing(chargeonce_core::authorization::ReleaseReason::Void)
    );
    assert_eq!(events, 0);
    let record = pg.store.key(&pg.shop, &key("v1")).await.unwrap().unwrap();
    assert!(record.response.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_void_finish_whose_competitor_rolled_back_writes_it_all() {
    let (finished, hold, events, pg) = void_against_take_over(false).await;
    assert_eq!(finished, FinishOutcome::Stored);
    assert_eq!(
        hold,
        Hold::Released(chargeonce_core::authorization::ReleaseReason::Void)
    );
    assert_eq!(events, 1, "payment.voided");
    let record = pg.store.key(&pg.shop, &key("v1")).await.unwrap().unwrap();
    assert_eq!(record.response.unwrap().body, b"voided".to_vec());
    let payment = pg.store.key(&pg.shop, &key("k1")).await.unwrap().unwrap();
    let kinds = history(&pg, &payment.payment_id.unwrap()).await;
    assert!(
        kinds.ends_with(&[
            "release_requested".into(),
            "answered".into(),
            "release_ended".into()
        ]),
        "{kinds:?}"
    );
}
