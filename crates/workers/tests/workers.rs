//! Issue 3 in one process: acquirer webhooks, the completer, the reconciler,
//! metrics and repeat counts, over real HTTP on both stores.

#![allow(clippy::unwrap_used, missing_docs)]

mod harness;

use std::time::Duration;

use chargeonce_core::webhook::{WebhookSecret, sign};
use chargeonce_core::{
    IdempotencyKey, PaymentId, PaymentStatus, RecoveryPoint, Settlement, ShopId,
};
use chargeonce_testkit::on_both_stores;
use chargeonce_workers::completer::{CompleterConfig, complete_once};
use chargeonce_workers::reconciler::{FindingKind, ReconcilerConfig};
use harness::{Backend, Harness, event, reconcile_now};

// ---------------------------------------------------------------- webhooks

/// An event for another amount or currency than the payment's settles
/// nothing: recorded (its repeat is a duplicate), answered `amount_mismatch`,
/// counted as a finding; the genuine event still applies afterwards.
async fn an_event_for_another_amount_settles_nothing_and_is_a_finding(backend: Backend) {
    let h = Harness::start(backend).await;
    let (status, pending) = h.pay("k1", "order-1", "tok_timeout").await;
    assert_eq!(status, 202);
    let id = pending["id"].as_str().unwrap();
    let charge = h.charge_of(id).await;
    let mut cheaper = event("evt_1", "payment.succeeded", &charge);
    cheaper["data"]["amount"]["value"] = "1.00".into();
    let (status, answer) = h.webhook(&cheaper).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["result"], "amount_mismatch");
    let (_, again) = h.webhook(&cheaper).await;
    assert_eq!(again["result"], "duplicate");
    let mut dollars = event("evt_2", "payment.succeeded", &charge);
    dollars["data"]["amount"]["currency"] = "USD".into();
    let (_, answer) = h.webhook(&dollars).await;
    assert_eq!(answer["result"], "amount_mismatch");
    assert_eq!(h.payment(id).await["status"], "pending", "nothing applied");
    let text = h.metrics_text().await;
    assert!(
        text.contains(
            "chargeonce_reconciler_findings_total{mode=\"live\",kind=\"amount_mismatch\"} 2"
        ),
        "{text}"
    );
    let (_, genuine) = h
        .webhook(&event("evt_3", "payment.succeeded", &charge))
        .await;
    assert_eq!(genuine["result"], "applied");
    assert_eq!(h.payment(id).await["status"], "succeeded");
}

/// The engine's future dropped halfway through an acquirer call (a
/// completer aborted at shutdown): its lease heartbeat ends with it, so the
/// lease runs out and another instance can take the key over.
async fn a_payment_cut_halfway_stops_renewing_its_lease(backend: Backend) {
    let h = Harness::start_with(backend, |mut config| {
        config.timing.lease = Duration::from_millis(300);
        config
    })
    .await;
    let shop = ShopId::new(harness::SHOP).unwrap();
    let key = IdempotencyKey::new("k-cut").unwrap();
    let body = serde_json::json!({
        "amount": {"value": "1500.00", "currency": "RUB"},
        "reference": "order-cut",
        "payment_method": {"token": "tok_slow"},
    });
    let claim = chargeonce_core::ClaimRequest {
        shop_id: shop.clone(),
        key: key.clone(),
        fingerprint: chargeonce_core::Fingerprint::compute("POST", "/v1/payments", &body).unwrap(),
        method: "POST".into(),
        path: "/v1/payments".into(),
    };
    let request = chargeonce_core::PaymentRequest {
        amount: chargeonce_core::Money::parse("1500.00", "RUB").unwrap(),
        reference: chargeonce_core::Reference::new("order-cut").unwrap(),
        token: chargeonce_core::CardToken::new("tok_slow").unwrap(),
        metadata: Default::default(),
        capture_method: chargeonce_core::CaptureMethod::Automatic,
    };
    let engine = h.engine.clone();
    // tok_slow: charged at once, answered 1.5 s later.
    let call = tokio::spawn(async move { engine.pay(claim, request).await });
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while h.sim.ledger().await.unwrap().is_empty() {
        assert!(tokio::time::Instant::now() < deadline, "no charge");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        h.store
            .key(&shop, &key)
            .await
            .unwrap()
            .unwrap()
            .lease_active
    );
    call.abort();
    assert!(call.await.unwrap_err().is_cancelled());
    // Renewed every 100 ms while the heartbeat lives; it must not.
    let deadline = tokio::time::Instant::now() + Duration::from_millis(1200);
    loop {
        let record = h.store.key(&shop, &key).await.unwrap().unwrap();
        if !record.lease_active {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the lease is still renewed after its operation was dropped"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn a_bad_signature_is_refused_and_changes_nothing(backend: Backend) {
    let h = Harness::start(backend).await;
    let (status, pending) = h.pay("k1", "order-1", "tok_timeout").await;
    assert_eq!(status, 202);
    let charge = h.charge_of(pending["id"].as_str().unwrap()).await;
    let body = event("evt_1", "payment.succeeded", &charge).to_string();
    let now = time::OffsetDateTime::now_utc().unix_timestamp();

    let forged = sign(&WebhookSecret::new("not-the-secret"), now, body.as_bytes());
    let (status, problem) = h.webhook_raw(&body, Some(forged)).await;
    assert_eq!(status, 401);
    assert_eq!(problem["code"], "invalid_signature");

    let right = sign(
        &WebhookSecret::new(harness::WEBHOOK_SECRET),
        now,
        body.as_bytes(),
    );
    let tampered = body.replace("1500.00", "1.00");
    let (status, _) = h.webhook_raw(&tampered, Some(right)).await;
    assert_eq!(status, 401, "the signature covers the body");

    let (status, problem) = h.webhook_raw(&body, None).await;
    assert_eq!(status, 400);
    assert_eq!(problem["code"], "missing_signature");
    let (status, _) = h.webhook_raw(&body, Some("t=abc,v1=zz".into())).await;
    assert_eq!(status, 400);

    let payment = h.payment(pending["id"].as_str().unwrap()).await;
    assert_eq!(payment["status"], "pending", "nothing was applied");
    // The genuine event, later, is not a duplicate of the refused ones.
    let (status, answer) = h
        .webhook(&event("evt_1", "payment.succeeded", &charge))
        .await;
    assert_eq!(status, 200);
    assert_eq!(answer["result"], "applied");
}

async fn a_stale_timestamp_is_refused(backend: Backend) {
    let h = Harness::start(backend).await;
    let (_, pending) = h.pay("k1", "order-1", "tok_timeout").await;
    let charge = h.charge_of(pending["id"].as_str().unwrap()).await;
    let body = event("evt_1", "payment.succeeded", &charge).to_string();
    let secret = WebhookSecret::new(harness::WEBHOOK_SECRET);
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    // 30 s past the 300 s tolerance either way: a slow machine may take
    // seconds between this clock read and the server's.
    for at in [now - 330, now + 330, now - 3600] {
        let (status, problem) = h
            .webhook_raw(&body, Some(sign(&secret, at, body.as_bytes())))
            .await;
        assert_eq!(status, 401, "timestamp {at} (now {now})");
        assert_eq!(problem["code"], "stale_signature");
    }
    let (status, _) = h
        .webhook_raw(&body, Some(sign(&secret, now - 250, body.as_bytes())))
        .await;
    assert_eq!(status, 200, "within 5 minutes");
    assert_eq!(
        h.payment(pending["id"].as_str().unwrap()).await["status"],
        "succeeded"
    );
}

async fn a_duplicate_event_answers_200_and_changes_nothing(backend: Backend) {
    let h = Harness::start(backend).await;
    let (_, pending) = h.pay("k1", "order-1", "tok_timeout").await;
    let id = pending["id"].as_str().unwrap().to_owned();
    let charge = h.charge_of(&id).await;
    let succeeded = event("evt_1", "payment.succeeded", &charge);
    let (status, first) = h.webhook(&succeeded).await;
    assert_eq!((status, first["result"].as_str()), (200, Some("applied")));
    let settled = h.payment(&id).await;
    assert_eq!(settled["status"], "succeeded");
    assert_eq!(settled["provider_payment_id"], charge.id.as_str());
    for _ in 0..3 {
        let (status, again) = h.webhook(&succeeded).await;
        assert_eq!(status, 200);
        assert_eq!(again["result"], "duplicate");
    }
    assert_eq!(h.payment(&id).await, settled, "no second state change");
    let text = h.metrics_text().await;
    assert!(
        text.contains("chargeonce_webhooks_total{result=\"duplicate\"} 3"),
        "{text}"
    );
    assert!(
        text.contains("chargeonce_webhooks_total{result=\"applied\"} 1"),
        "{text}"
    );
}

async fn out_of_order_events_never_move_a_final_state(backend: Backend) {
    let h = Harness::start(backend).await;
    // The outcome arrives first...
    let (_, pending) = h.pay("k1", "order-1", "tok_timeout").await;
    let id = pending["id"].as_str().unwrap().to_owned();
    let charge = h.charge_of(&id).await;
    let (_, applied) = h
        .webhook(&event("evt_2", "payment.succeeded", &charge))
        .await;
    assert_eq!(applied["result"], "applied");
    // ...then the older `processing`, and a contradicting decline.
    let (status, late) = h
        .webhook(&event("evt_1", "payment.processing", &charge))
        .await;
    assert_eq!((status, late["result"].as_str()), (200, Some("no_change")));
    let (status, contradicting) = h
        .webhook(&event("evt_3", "payment.declined", &charge))
        .await;
    assert_eq!(
        (status, contradicting["result"].as_str()),
        (200, Some("conflict"))
    );
    let payment = h.payment(&id).await;
    assert_eq!(
        payment["status"], "succeeded",
        "never succeeded -> anything"
    );
    assert_eq!(payment["decline_code"], serde_json::Value::Null);

    // A payment whose `processing` comes first stays pending until the outcome.
    let (_, other) = h.pay("k2", "order-2", "tok_timeout").await;
    let other_id = other["id"].as_str().unwrap().to_owned();
    let other_charge = h.charge_of(&other_id).await;
    h.webhook(&event("evt_4", "payment.processing", &other_charge))
        .await;
    assert_eq!(h.payment(&other_id).await["status"], "pending");
    h.webhook(&event("evt_5", "payment.succeeded", &other_charge))
        .await;
    assert_eq!(h.payment(&other_id).await["status"], "succeeded");
}

async fn an_event_for_an_unknown_payment_is_acknowledged(backend: Backend) {
    let h = Harness::start(backend).await;
    let stranger = h
        .plant(&PaymentId::generate(), "order-x", "someone-else-1")
        .await;
    let (status, answer) = h
        .webhook(&event("evt_1", "payment.succeeded", &stranger))
        .await;
    assert_eq!(status, 200, "resending would not make it known");
    assert_eq!(answer["result"], "unknown_payment");
    let (_, again) = h
        .webhook(&event("evt_1", "payment.succeeded", &stranger))
        .await;
    assert_eq!(again["result"], "duplicate");
    // The reconciler reports the charge.
    let report = h
        .reconciler()
        .reconcile_once(&reconcile_now())
        .await
        .unwrap();
    assert_eq!(report.findings.len(), 1, "{report}");
    assert_eq!(report.findings[0].kind, FindingKind::OrphanCharge);
}

async fn a_settled_payment_makes_its_key_finish_consistently(backend: Backend) {
    let h = Harness::start(backend).await;
    let (status, pending) = h.pay("k1", "order-1", "tok_timeout").await;
    assert_eq!(status, 202);
    let id = pending["id"].as_str().unwrap().to_owned();
    let charge = h.charge_of(&id).await;
    h.webhook(&event("evt_1", "payment.succeeded", &charge))
        .await;
    // The key is still unfinished; its retry answers from the settled payment.
    let (status, retry) = h.pay("k1", "order-1", "tok_timeout").await;
    assert_eq!(status, 201, "{retry}");
    assert_eq!(retry["status"], "succeeded");
    assert_eq!(retry["provider_payment_id"], charge.id.as_str());
    assert_eq!(retry["_replayed"], false);
    let (status, replay) = h.pay("k1", "order-1", "tok_timeout").await;
    assert_eq!((status, replay["_replayed"].as_bool()), (201, Some(true)));
    assert_eq!(h.sim.ledger().await.unwrap().len(), 1);
}

/// A webhook settles the payment while its own request still waits on a slow
/// acquirer: that request's finish must not overwrite or contradict it.
async fn a_webhook_during_the_acquirer_call_wins_and_the_answer_agrees(backend: Backend) {
    let h = Harness::start(backend).await;
    let base = h.base.clone();
    let first = {
        let http = h.http.clone();
        tokio::spawn(async move {
            http.post(format!("{base}/v1/payments"))
                .basic_auth(harness::SHOP, Some(harness::SECRET))
                .header("idempotency-key", "slow")
                .json(&serde_json::json!({
                    "amount": {"value": "1500.00", "currency": "RUB"},
                    "reference": "order-slow",
                    "payment_method": {"token": "tok_slow"},
                }))
                .send()
                .await
                .unwrap()
        })
    };
    let charge = loop {
        let ledger = h.sim.ledger().await.unwrap();
        if let Some(charge) = ledger.into_iter().next() {
            break charge;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let (_, applied) = h
        .webhook(&event("evt_1", "payment.succeeded", &charge))
        .await;
    assert_eq!(applied["result"], "applied");
    let response = first.await.unwrap();
    assert_eq!(response.status().as_u16(), 201);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["status"], "succeeded");
    assert_eq!(body["provider_payment_id"], charge.id.as_str());
    let stored = h.payment(body["id"].as_str().unwrap()).await;
    assert_eq!(stored["status"], "succeeded");
}

// ---------------------------------------------------------------- completer

async fn the_completer_finishes_what_nobody_retries(backend: Backend) {
    let h = Harness::start(backend).await;
    let (status, pending) = h.pay("k1", "order-1", "tok_timeout").await;
    assert_eq!(status, 202);
    let config = CompleterConfig {
        idle: Duration::ZERO,
        ..CompleterConfig::default()
    };
    let pass = complete_once(&h.engine, &config).await.unwrap();
    assert_eq!((pass.found, pass.finished), (1, 1), "{pass:?}");
    let key = h
        .store
        .key(
            &ShopId::new(harness::SHOP).unwrap(),
            &IdempotencyKey::new("k1").unwrap(),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(key.recovery_point, RecoveryPoint::Finished);
    assert_eq!(
        h.payment(pending["id"].as_str().unwrap()).await["status"],
        "succeeded"
    );
    // The client, coming back, gets the completer's answer as a replay.
    let (status, replay) = h.pay("k1", "order-1", "tok_timeout").await;
    assert_eq!((status, replay["_replayed"].as_bool()), (201, Some(true)));
    assert_eq!(h.sim.ledger().await.unwrap().len(), 1, "charged once");
    let again = complete_once(&h.engine, &config).await.unwrap();
    assert_eq!(again.found, 0);
    let text = h.metrics_text().await;
    assert!(
        text.contains("chargeonce_completer_runs_total{result=\"finished\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("chargeonce_lease_takeovers_total 1"),
        "{text}"
    );
}

async fn the_completer_leaves_live_and_recent_keys_alone(backend: Backend) {
    let h = Harness::start(backend).await;
    let (status, _) = h.pay("k1", "order-1", "tok_timeout").await;
    assert_eq!(status, 202);
    let patient = CompleterConfig {
        idle: Duration::from_secs(60),
        ..CompleterConfig::default()
    };
    assert_eq!(complete_once(&h.engine, &patient).await.unwrap().found, 0);
    // A key whose request is running holds a live lease.
    let base = h.base.clone();
    let http = h.http.clone();
    let slow = tokio::spawn(async move {
        http.post(format!("{base}/v1/payments"))
            .basic_auth(harness::SHOP, Some(harness::SECRET))
            .header("idempotency-key", "slow")
            .json(&serde_json::json!({
                "amount": {"value": "1.00", "currency": "RUB"},
                "reference": "order-slow",
                "payment_method": {"token": "tok_slow"},
            }))
            .send()
            .await
            .unwrap()
            .status()
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    let eager = CompleterConfig {
        idle: Duration::ZERO,
        ..CompleterConfig::default()
    };
    let pass = complete_once(&h.engine, &eager).await.unwrap();
    assert_eq!(pass.found, 1, "only the released key: {pass:?}");
    assert_eq!(slow.await.unwrap().as_u16(), 201);
}

async fn the_completer_finishes_a_refund_nobody_retries(backend: Backend) {
    let h = Harness::start(backend).await;
    // tok_timeout loses the first answer of the charge and of the refund.
    assert_eq!(h.pay("k1", "order-1", "tok_timeout").await.0, 202);
    let (status, paid) = h.pay("k1", "order-1", "tok_timeout").await;
    assert_eq!(status, 201);
    let id = paid["id"].as_str().unwrap().to_owned();
    let refund = h
        .http
        .post(h.url(&format!("/v1/payments/{id}/refunds")))
        .basic_auth(harness::SHOP, Some(harness::SECRET))
        .header("idempotency-key", "order-1-refund-1")
        .json(&serde_json::json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(refund.status().as_u16(), 202);
    let config = CompleterConfig {
        idle: Duration::ZERO,
        ..CompleterConfig::default()
    };
    let pass = complete_once(&h.engine, &config).await.unwrap();
    assert_eq!((pass.found, pass.finished), (1, 1), "{pass:?}");
    let key = h
        .store
        .key(
            &ShopId::new(harness::SHOP).unwrap(),
            &IdempotencyKey::new("order-1-refund-1").unwrap(),
        )
        .await
        .unwrap()
        .unwrap();
    assert_eq!(key.recovery_point, RecoveryPoint::Finished);
    let shown = h.payment(&id).await;
    assert_eq!(shown["refund_status"], "refunded");
    assert_eq!(shown["amount_refunded"]["value"], "1500.00");
    assert_eq!(h.sim.refunds().await.unwrap().len(), 1, "refunded once");
}

// ---------------------------------------------------------------- reconciler

async fn the_reconciler_settles_pending_payments_from_the_acquirer(backend: Backend) {
    let h = Harness::start(backend).await;
    let (_, pending) = h.pay("k1", "order-1", "tok_timeout").await;
    let id = pending["id"].as_str().unwrap().to_owned();
    let report = h
        .reconciler()
        .reconcile_once(&reconcile_now())
        .await
        .unwrap();
    assert_eq!(report.pending_checked, 1);
    assert_eq!(report.resolved.len(), 1, "{report}");
    assert_eq!(report.resolved[0].status, "succeeded");
    assert!(report.is_clean(), "{report}");
    assert_eq!(h.payment(&id).await["status"], "succeeded");
    let (status, retry) = h.pay("k1", "order-1", "tok_timeout").await;
    assert_eq!(status, 201, "the key finishes from the settled payment");
    assert_eq!(
        retry["provider_payment_id"],
        h.charge_of(&id).await.id.as_str()
    );
    let again = h
        .reconciler()
        .reconcile_once(&reconcile_now())
        .await
        .unwrap();
    assert!(again.resolved.is_empty() && again.is_clean(), "{again}");
    assert!(
        h.metrics_text()
            .await
            .contains("chargeonce_reconciler_resolved_total 1")
    );
}

async fn duplicates_wait_for_a_pending_payment_before_any_is_refunded(backend: Backend) {
    let h = Harness::start(backend).await;
    // Someone else charged order-1 first; then our payment's answer is lost.
    let stray = h
        .plant(&PaymentId::generate(), "order-1", "stray-key-order-1")
        .await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    let (status, pending) = h.pay("k1", "order-1", "tok_timeout").await;
    assert_eq!(status, 202);
    let ours = h.charge_of(pending["id"].as_str().unwrap()).await;
    // While our payment is pending, no charge of the group is refunded: the
    // first charge is the stray, and "keep the first" would refund ours.
    let waiting = ReconcilerConfig {
        refund_duplicates: true,
        pending_after: Duration::from_secs(3600),
        ..reconcile_now()
    };
    let report = h.reconciler().reconcile_once(&waiting).await.unwrap();
    let dup = report
        .findings
        .iter()
        .find(|f| f.kind == FindingKind::DuplicateCharge)
        .unwrap();
    assert!(dup.refunded.is_empty(), "{report}");
    // Once a pass settles our payment, the stray is the one given back.
    let settle = ReconcilerConfig {
        refund_duplicates: true,
        ..reconcile_now()
    };
    let mut refunded = Vec::new();
    for _ in 0..2 {
        let report = h.reconciler().reconcile_once(&settle).await.unwrap();
        if let Some(dup) = report
            .findings
            .iter()
            .find(|f| f.kind == FindingKind::DuplicateCharge)
        {
            refunded.extend(dup.refunded.clone());
        }
    }
    assert_eq!(refunded, vec![stray.id.clone()]);
    let ledger = h.sim.ledger().await.unwrap();
    let ours_now = ledger.iter().find(|c| c.id == ours.id).unwrap();
    assert_eq!(ours_now.refunded_minor, 0, "our charge is kept");
    let stray_now = ledger.iter().find(|c| c.id == stray.id).unwrap();
    assert_eq!(stray_now.refunded_minor, stray.amount.minor_units());
}

async fn the_reconciler_finds_a_planted_duplicate_and_an_orphan(backend: Backend) {
    let h = Harness::start(backend).await;
    let (status, paid) = h.pay("k1", "order-1", "tok_ok").await;
    assert_eq!(status, 201);
    let (status, _) = h.pay("k2", "order-2", "tok_declined").await;
    assert_eq!(status, 402);
    let ours = PaymentId::parse(paid["id"].as_str().unwrap()).unwrap();
    let clean = h
        .reconciler()
        .reconcile_once(&reconcile_now())
        .await
        .unwrap();
    assert!(clean.is_clean(), "{clean}");
    assert_eq!((clean.payments_compared, clean.charges_compared), (2, 2));

    let duplicate = h.plant(&ours, "order-1", "a-second-key-for-order-1").await;
    let orphan = h
        .plant(&PaymentId::generate(), "order-elsewhere", "unknown-1")
        .await;
    let report = h
        .reconciler()
        .reconcile_once(&reconcile_now())
        .await
        .unwrap();
    assert!(!report.is_clean());
    assert_eq!(report.findings.len(), 2, "{report}");
    let dup = &report.findings[0];
    assert_eq!(dup.kind, FindingKind::DuplicateCharge);
    assert_eq!(dup.reference, "order-1");
    assert!(dup.charge_ids.contains(&duplicate.id));
    assert_eq!(dup.payment_id.as_deref(), Some(ours.as_str()));
    let orph = &report.findings[1];
    assert_eq!(orph.kind, FindingKind::OrphanCharge);
    assert_eq!(orph.charge_ids, vec![orphan.id.clone()]);
    let text = report.to_string();
    assert!(
        text.contains("duplicate_charge") && text.contains("orphan_charge"),
        "{text}"
    );
    assert!(text.ends_with("NOT CLEAN"));
    let metrics = h.metrics_text().await;
    assert!(metrics.contains(
        "chargeonce_reconciler_findings_total{mode=\"live\",kind=\"duplicate_charge\"} 1"
    ));
    assert!(
        metrics.contains(
            "chargeonce_reconciler_findings_total{mode=\"live\",kind=\"orphan_charge\"} 1"
        )
    );

    // Refunding duplicates gives back the planted charge, not ours.
    let refund = ReconcilerConfig {
        refund_duplicates: true,
        ..reconcile_now()
    };
    let report = h.reconciler().reconcile_once(&refund).await.unwrap();
    let dup = report
        .findings
        .iter()
        .find(|f| f.kind == FindingKind::DuplicateCharge)
        .unwrap();
    assert_eq!(dup.refunded, vec![duplicate.id.clone()]);
    let after = h
        .reconciler()
        .reconcile_once(&reconcile_now())
        .await
        .unwrap();
    assert_eq!(after.findings.len(), 1, "only the orphan is left: {after}");
    assert_eq!(after.findings[0].kind, FindingKind::OrphanCharge);
    let ledger = h.sim.ledger().await.unwrap();
    let kept = ledger
        .iter()
        .find(|c| c.payment_id == ours && c.id != duplicate.id)
        .unwrap();
    assert_eq!(kept.refunded_minor, 0, "our charge is kept");
}

/// A charge refunded in full (the merchant refunded the order) does not hide
/// a duplicate of the same order that still holds money: the duplicate is
/// found, and given back.
async fn a_refunded_charge_does_not_hide_a_duplicate(backend: Backend) {
    let h = Harness::start(backend).await;
    let (status, paid) = h.pay("k1", "order-1", "tok_ok").await;
    assert_eq!(status, 201);
    let ours = PaymentId::parse(paid["id"].as_str().unwrap()).unwrap();
    let charge = h.charge_of(ours.as_str()).await;
    h.sim.refund_charge(&charge.id).await.unwrap();
    let duplicate = h.plant(&ours, "order-1", "a-second-key-for-order-1").await;
    let refund = ReconcilerConfig {
        refund_duplicates: true,
        ..reconcile_now()
    };
    let report = h.reconciler().reconcile_once(&refund).await.unwrap();
    let dup = report
        .findings
        .iter()
        .find(|f| f.kind == FindingKind::DuplicateCharge)
        .unwrap_or_else(|| panic!("the duplicate must be found: {report}"));
    assert_eq!(dup.refunded, vec![duplicate.id.clone()], "{report}");
    let ledger = h.sim.ledger().await.unwrap();
    let given_back = ledger.iter().find(|c| c.id == duplicate.id).unwrap();
    assert_eq!(given_back.refunded_minor, duplicate.amount.minor_units());
    // Every extra charge given back: nothing more to find for the order.
    let after = h
        .reconciler()
        .reconcile_once(&reconcile_now())
        .await
        .unwrap();
    assert!(
        !after
            .findings
            .iter()
            .any(|f| f.kind == FindingKind::DuplicateCharge),
        "{after}"
    );
}

async fn the_reconciler_finds_payments_the_acquirer_does_not_know(backend: Backend) {
    let h = Harness::start(backend).await;
    let shop = ShopId::new(harness::SHOP).unwrap();
    let ghost = h.ghost("k-ghost", "order-ghost").await;
    // Someone marks it succeeded with a charge the acquirer never made.
    h.store
        .settle_payment(
            &shop,
            &ghost,
            &Settlement {
                status: PaymentStatus::Succeeded,
                provider_payment_id: Some("ch_never_made".into()),
                decline_code: None,
            },
        )
        .await
        .unwrap();
    let report = h
        .reconciler()
        .reconcile_once(&reconcile_now())
        .await
        .unwrap();
    assert_eq!(report.findings.len(), 1, "{report}");
    assert_eq!(report.findings[0].kind, FindingKind::MissingCharge);
    assert_eq!(
        report.findings[0].payment_id.as_deref(),
        Some(ghost.as_str())
    );
}

// ---------------------------------------------------------------- metrics, repeats

async fn metrics_count_claims_replays_conflicts_and_mismatches(backend: Backend) {
    let h = Harness::start_with(backend, |mut config| {
        config.repeat_warning = 3;
        config
    })
    .await;
    assert_eq!(h.pay("k1", "order-1", "tok_ok").await.0, 201);
    for _ in 0..5 {
        assert_eq!(h.pay("k1", "order-1", "tok_ok").await.0, 201);
    }
    assert_eq!(h.pay("k1", "order-9", "tok_ok").await.0, 422);
    let record = h
        .store
        .key(
            &ShopId::new(harness::SHOP).unwrap(),
            &IdempotencyKey::new("k1").unwrap(),
        )
        .await
        .unwrap()
        .unwrap();
    // The first request executed on this instance, so its 5 replays and the
    // mismatch were answered from the response cache: the store saw none of
    // them. The metrics and the repeat warning below still count them.
    assert_eq!(record.replays, 0, "answered from the response cache");
    let text = h.metrics_text().await;
    for line in [
        "chargeonce_claims_total 1",
        "chargeonce_replays_total 5",
        "chargeonce_mismatches_total 1",
        "chargeonce_conflicts_total 0",
        // At 3 and at 6 repeats (threshold and its doubling).
        "chargeonce_repeated_keys_total 2",
        "chargeonce_acquirer_calls_total{mode=\"live\",call=\"charge\",outcome=\"succeeded\"} 1",
    ] {
        assert!(text.contains(line), "missing `{line}`:\n{text}");
    }
    assert!(text.contains("chargeonce_acquirer_call_duration_seconds_bucket"));
}

on_both_stores!(
    an_event_for_another_amount_settles_nothing_and_is_a_finding,
    a_payment_cut_halfway_stops_renewing_its_lease,
    a_bad_signature_is_refused_and_changes_nothing,
    a_stale_timestamp_is_refused,
    a_duplicate_event_answers_200_and_changes_nothing,
    out_of_order_events_never_move_a_final_state,
    an_event_for_an_unknown_payment_is_acknowledged,
    a_settled_payment_makes_its_key_finish_consistently,
    a_webhook_during_the_acquirer_call_wins_and_the_answer_agrees,
    the_completer_finishes_what_nobody_retries,
    the_completer_leaves_live_and_recent_keys_alone,
    the_completer_finishes_a_refund_nobody_retries,
    the_reconciler_settles_pending_payments_from_the_acquirer,
    the_reconciler_finds_a_planted_duplicate_and_an_orphan,
    a_refunded_charge_does_not_hide_a_duplicate,
    duplicates_wait_for_a_pending_payment_before_any_is_refunded,
    the_reconciler_finds_payments_the_acquirer_does_not_know,
    metrics_count_claims_replays_conflicts_and_mismatches,
);

#[tokio::test]
async fn webhooks_without_a_secret_are_refused() {
    let service = chargeonce_testkit::TestService::builder(Backend::Sqlite)
        .without_webhook_secret()
        .start()
        .await;
    let base = &service.base;
    let response = reqwest::Client::new()
        .post(format!("{base}/v1/webhooks/acquirer"))
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(response.status().as_u16(), 503);
}
