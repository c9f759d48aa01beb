//! The standalone API over real HTTP, through the service's adapter: every
//! outcome classified as definite, unknown, or never sent.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use chargeonce_acquirer::webhooks::{self, WebhookTarget};
use chargeonce_acquirer::{DO_NOT_HONOR, Faults, KEY_REUSED, Simulator, tokens};
use chargeonce_connector::{HttpAcquirer, HttpAcquirerConfig};
use chargeonce_core::acquirer::look_up;
use chargeonce_core::webhook::{
    AcquirerEvent, EventKind, SIGNATURE_HEADER, TOLERANCE, WebhookSecret, verify,
};
use chargeonce_core::{
    Acquirer, AcquirerError, AcquirerLedger, ChargeResult, Money, PaymentId, RefundId,
    RefundRequest, RefundSettlement,
};

use crate::common::{Standalone, adapter, request, request_for, start, start_with};

fn unknown(result: Result<ChargeResult, AcquirerError>) -> String {
    match result {
        Err(AcquirerError::Unknown(reason)) => reason,
        other => panic!("expected an unknown outcome, got {other:?}"),
    }
}

#[tokio::test]
async fn charges_are_definite_idempotent_and_can_be_looked_up() {
    let s = start().await;
    let acquirer = adapter(&s.base, Duration::from_secs(5));
    let ok = request(tokens::OK);
    let first = acquirer.charge(&ok).await.unwrap();
    assert!(first.is_succeeded());
    assert_eq!(
        acquirer.charge(&ok).await.unwrap(),
        first,
        "same key, same answer"
    );
    let declined = acquirer.charge(&request(tokens::DECLINED)).await.unwrap();
    assert!(matches!(declined, ChargeResult::Declined { ref code, .. } if code == "card_declined"));

    let found = acquirer.status(&ok.acquirer_key).await.unwrap().unwrap();
    assert_eq!(found.outcome, first);
    assert_eq!(found.payment_id, ok.payment_id);
    assert_eq!(found.amount, ok.amount);
    assert!(
        acquirer
            .status(&request(tokens::OK).acquirer_key)
            .await
            .unwrap()
            .is_none()
    );
    let for_payment = acquirer
        .charges_for_payment(&ok.shop_id, &ok.payment_id)
        .await
        .unwrap();
    assert_eq!(for_payment, vec![found]);
    assert_eq!(s.sim.ledger().await.unwrap().len(), 2);
}

#[tokio::test]
async fn a_refused_connection_is_never_sent() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let acquirer = adapter(&base, Duration::from_secs(2));
    assert!(matches!(
        acquirer.charge(&request(tokens::OK)).await,
        Err(AcquirerError::NotSent(_))
    ));
    assert!(matches!(
        acquirer.status(&request(tokens::OK).acquirer_key).await,
        Err(AcquirerError::NotSent(_))
    ));
}

#[tokio::test]
async fn a_hang_is_unknown_and_records_nothing() {
    let s = start().await;
    s.sim
        .set_faults(Faults {
            hang_rate: 1.0,
            hang_ms: 3000,
            ..Faults::default()
        })
        .unwrap();
    let acquirer = adapter(&s.base, Duration::from_millis(300));
    let reason = unknown(acquirer.charge(&request(tokens::OK)).await);
    assert!(reason.contains("timed out"), "{reason}");
    assert!(s.sim.ledger().await.unwrap().is_empty());
}

#[tokio::test]
async fn server_errors_before_commit_are_unknown_never_failed() {
    let s = start().await;
    s.sim
        .set_faults(Faults {
            error_rate: 1.0,
            ..Faults::default()
        })
        .unwrap();
    let acquirer = adapter(&s.base, Duration::from_secs(2));
    let reason = unknown(acquirer.charge(&request(tokens::OK)).await);
    assert!(reason.contains("503"), "{reason}");
    assert!(s.sim.ledger().await.unwrap().is_empty());
}

#[tokio::test]
async fn answers_lost_after_commit_are_unknown_and_a_repeat_learns_them() {
    let s = start().await;
    s.sim
        .set_faults(Faults {
            lost_answer_rate: 1.0,
            hang_ms: 600,
            ..Faults::default()
        })
        .unwrap();
    let acquirer = adapter(&s.base, Duration::from_millis(300));
    let req = request(tokens::OK);
    // Enough tries to meet every way of losing an answer (504, drop, silence).
    for _ in 0..12 {
        unknown(acquirer.charge(&req).await);
    }
    let ledger = s.sim.ledger().await.unwrap();
    assert_eq!(ledger.len(), 1, "charged once, answered never");
    s.sim.set_faults(Faults::default()).unwrap();
    let learnt = acquirer.charge(&req).await.unwrap();
    assert_eq!(learnt, ledger[0].result());
}

#[tokio::test]
async fn a_key_reused_with_other_parameters_is_unknown_not_a_decline() {
    let s = start().await;
    let acquirer = adapter(&s.base, Duration::from_secs(2));
    let req = request(tokens::OK);
    acquirer.charge(&req).await.unwrap();
    let mut other = req.clone();
    other.amount = Money::parse("1.00", "RUB").unwrap();
    let reason = unknown(acquirer.charge(&other).await);
    assert!(reason.starts_with(KEY_REUSED), "{reason}");
    assert_eq!(s.sim.ledger().await.unwrap().len(), 1);
}

#[tokio::test]
async fn the_decline_rate_declines_definitely() {
    let s = start().await;
    s.sim
        .set_faults(Faults {
            decline_rate: 1.0,
            ..Faults::default()
        })
        .unwrap();
    let acquirer = adapter(&s.base, Duration::from_secs(2));
    let result = acquirer.charge(&request(tokens::OK)).await.unwrap();
    assert!(matches!(result, ChargeResult::Declined { ref code, .. } if code == DO_NOT_HONOR));
}

#[tokio::test]
async fn without_idempotency_every_request_charges_and_only_the_reference_finds_them() {
    let s = start_with(|sim| sim.with_idempotency(false)).await;
    let acquirer = HttpAcquirer::new(
        &s.base,
        HttpAcquirerConfig {
            idempotent: false,
            ..HttpAcquirerConfig::default()
        },
    )
    .unwrap();
    assert!(!acquirer.is_idempotent());
    let req = request(tokens::OK);
    assert!(
        look_up(&acquirer, &req.shop_id, &req.payment_id, &req.acquirer_key)
            .await
            .unwrap()
            .is_none()
    );
    let first = acquirer.charge(&req).await.unwrap();
    let second = acquirer.charge(&req).await.unwrap();
    assert_ne!(
        first, second,
        "a provider without idempotency charges twice"
    );
    assert_eq!(s.sim.ledger().await.unwrap().len(), 2);
    assert!(
        acquirer.status(&req.acquirer_key).await.unwrap().is_none(),
        "no keys kept"
    );
    let found = look_up(&acquirer, &req.shop_id, &req.payment_id, &req.acquirer_key)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(found.outcome, first, "the first charge counts");
}

#[tokio::test]
async fn faults_are_set_through_the_admin_api() {
    let s = start().await;
    let http = reqwest::Client::new();
    let url = format!("{}/admin/faults", s.base);
    let set = http
        .put(&url)
        .json(
            &serde_json::json!({"lost_answer_rate": 0.3, "error_rate": 0.1, "latency_max_ms": 20}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(set.status(), StatusCode::OK);
    let now: Faults = http.get(&url).send().await.unwrap().json().await.unwrap();
    assert_eq!(now.lost_answer_rate, 0.3);
    assert_eq!(now.error_rate, 0.1);
    assert_eq!(now.latency_max_ms, 20);
    assert_eq!(s.sim.faults(), now);
    let bad = http
        .put(&url)
        .json(&serde_json::json!({"error_rate": 2.0}))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status(), StatusCode::BAD_REQUEST);
    assert_eq!(s.sim.faults(), now, "a refused setting changes nothing");
}

#[tokio::test]
async fn windows_refunds_and_planted_charges() {
    let s = start().await;
    let acquirer = adapter(&s.base, Duration::from_secs(2));
    let req = request(tokens::OK);
    let charged = acquirer.charge(&req).await.unwrap();
    let now = time::OffsetDateTime::now_utc();
    let window = acquirer
        .charges_between(
            now - time::Duration::minutes(1),
            now + time::Duration::minutes(1),
        )
        .await
        .unwrap();
    assert_eq!(window.len(), 1);
    assert!(window[0].holds_money());
    assert!(
        acquirer
            .charges_between(
                now - time::Duration::hours(2),
                now - time::Duration::hours(1)
            )
            .await
            .unwrap()
            .is_empty()
    );

    let refund = acquirer
        .refund(charged.provider_payment_id())
        .await
        .unwrap();
    assert_eq!(refund.amount, req.amount);
    assert_eq!(
        acquirer
            .refund(charged.provider_payment_id())
            .await
            .unwrap(),
        refund,
        "refunded once"
    );
    let after = acquirer.status(&req.acquirer_key).await.unwrap().unwrap();
    assert_eq!(after.refunded_minor, req.amount.minor_units());
    assert!(!after.holds_money());
    assert!(acquirer.refund("ch_nope").await.is_err());

    let planted = reqwest::Client::new()
        .post(format!("{}/admin/charges", s.base))
        .json(&serde_json::json!({
            "acquirer_key": "planted-1",
            "shop_id": req.shop_id.as_str(),
            "payment_id": PaymentId::generate().as_str(),
            "reference": req.reference.as_str(),
            "amount": {"value": "15.00", "currency": "RUB"},
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(planted.status(), StatusCode::CREATED);
    assert_eq!(s.sim.ledger().await.unwrap().len(), 2);
}

/// What a receiver got: verified events, and how many deliveries it refused.
#[derive(Default)]
struct Inbox {
    events: Vec<AcquirerEvent>,
    refuse_first: usize,
}

async fn receiver(secret: WebhookSecret, inbox: Arc<Mutex<Inbox>>) -> String {
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |headers: HeaderMap, body: Bytes| {
            let inbox = Arc::clone(&inbox);
            let secret = secret.clone();
            async move {
                let header = headers
                    .get(SIGNATURE_HEADER)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default();
                let now = time::OffsetDateTime::now_utc().unix_timestamp();
                if verify(&secret, header, &body, now, TOLERANCE).is_err() {
                    return StatusCode::UNAUTHORIZED;
                }
                let mut inbox = inbox.lock().unwrap();
                if inbox.refuse_first > 0 {
                    inbox.refuse_first -= 1;
                    return StatusCode::INTERNAL_SERVER_ERROR;
                }
                inbox.events.push(serde_json::from_slice(&body).unwrap());
                StatusCode::OK
            }
        }),
    );
    serve_hook(app).await
}

/// Waits until every recorded event was delivered; panics at `deadline`.
async fn all_delivered(s: &Standalone, deadline: tokio::time::Instant) {
    while s.sim.undelivered_events().await.unwrap() > 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "events not delivered"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Serves `app` on a free port; the URL of its `/hook`.
async fn serve_hook(app: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    url
}

/// A simulator that records webhook events, with `faults`, delivering them
/// to `url`.
async fn delivering(
    faults: Faults,
    url: String,
    secret: WebhookSecret,
) -> (Standalone, tokio::task::JoinHandle<()>) {
    let s = start_with(|sim| sim.with_events(true)).await;
    s.sim.set_faults(faults).unwrap();
    let deliverer = webhooks::spawn(Arc::clone(&s.sim), WebhookTarget::new(url, secret));
    (s, deliverer)
}

#[tokio::test]
async fn webhooks_are_signed_retried_and_duplicated_when_asked() {
    let secret = WebhookSecret::new("whsec_test");
    let inbox = Arc::new(Mutex::new(Inbox {
        refuse_first: 2,
        ..Inbox::default()
    }));
    let url = receiver(secret.clone(), Arc::clone(&inbox)).await;
    let duplicates = Faults {
        webhook_duplicate_rate: 1.0,
        ..Faults::default()
    };
    let (s, deliverer) = delivering(duplicates, url, secret).await;
    let paid = request_for(PaymentId::generate(), tokens::OK);
    let charged = s.sim.charge(&paid).await.unwrap();

    all_delivered(&s, tokio::time::Instant::now() + Duration::from_secs(10)).await;
    deliverer.abort();
    let inbox = inbox.lock().unwrap();
    let kinds: Vec<EventKind> = inbox.events.iter().map(|e| e.kind).collect();
    assert_eq!(
        kinds.iter().filter(|k| **k == EventKind::Succeeded).count(),
        2,
        "delivered twice on purpose: {kinds:?}"
    );
    assert_eq!(
        kinds
            .iter()
            .filter(|k| **k == EventKind::Processing)
            .count(),
        2
    );
    let succeeded = inbox
        .events
        .iter()
        .find(|e| e.kind == EventKind::Succeeded)
        .unwrap();
    assert_eq!(succeeded.data.charge_id, charged.provider_payment_id());
    assert_eq!(succeeded.data.acquirer_key, paid.acquirer_key.as_str());
    assert_eq!(succeeded.data.amount.value, "1500.00");
    let ids: std::collections::HashSet<&str> = inbox.events.iter().map(|e| e.id.as_str()).collect();
    assert_eq!(ids.len(), 2, "a duplicate keeps its event id");
}

/// Counts the handler futures dropped before they answered.
struct Cut(Arc<std::sync::atomic::AtomicUsize>);

impl Drop for Cut {
    fn drop(&mut self) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// `webhook_hangup_rate` 1.0: the sender hangs up within 5 ms, the
/// receiver's handler is dropped where it waited (what the chaos run does to
/// instance 0's store calls), and the event stays due. With the rate back at
/// 0 it is delivered.
#[tokio::test]
async fn a_delivery_hung_up_on_cuts_the_receivers_handler_and_is_retried() {
    let secret = WebhookSecret::new("whsec_test");
    let cut = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let answer = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let delivered = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post({
            let (cut, answer, delivered) = (cut.clone(), answer.clone(), delivered.clone());
            move || {
                let (cut, answer, delivered) = (cut.clone(), answer.clone(), delivered.clone());
                async move {
                    if !answer.load(std::sync::atomic::Ordering::SeqCst) {
                        // Waits far longer than the sender: only a drop ends it.
                        let guard = Cut(cut);
                        tokio::time::sleep(Duration::from_secs(60)).await;
                        std::mem::forget(guard);
                    }
                    delivered.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    StatusCode::OK
                }
            }
        }),
    );
    let url = serve_hook(app).await;
    let hang_ups = Faults {
        webhook_hangup_rate: 1.0,
        ..Faults::default()
    };
    let (s, deliverer) = delivering(hang_ups, url, secret).await;
    s.sim.charge(&request(tokens::OK)).await.unwrap();

    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while cut.load(std::sync::atomic::Ordering::SeqCst) == 0 {
        assert!(tokio::time::Instant::now() < deadline, "no handler was cut");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(delivered.load(std::sync::atomic::Ordering::SeqCst), 0);
    assert!(s.sim.undelivered_events().await.unwrap() > 0, "still due");

    s.sim.set_faults(Faults::default()).unwrap();
    answer.store(true, std::sync::atomic::Ordering::SeqCst);
    all_delivered(&s, deadline).await;
    deliverer.abort();
    assert!(delivered.load(std::sync::atomic::Ordering::SeqCst) >= 2);
}

fn refund_of(
    charge: &ChargeResult,
    req: &chargeonce_core::ChargeRequest,
    value: &str,
) -> RefundRequest {
    let id = RefundId::generate();
    RefundRequest {
        acquirer_key: id.acquirer_key(),
        shop_id: req.shop_id.clone(),
        payment_id: req.payment_id.clone(),
        refund_id: id,
        charge_id: charge.provider_payment_id().to_owned(),
        amount: Money::parse(value, "RUB").unwrap(),
        token: req.token.clone(),
    }
}

#[tokio::test]
async fn partial_refunds_over_http_are_idempotent_per_key_and_bounded() {
    let s = start().await;
    let acquirer = adapter(&s.base, Duration::from_secs(5));
    let req = request(tokens::OK);
    let charged = acquirer.charge(&req).await.unwrap();

    let first = refund_of(&charged, &req, "1000.00");
    let made = acquirer.refund_payment(&first).await.unwrap();
    assert!(matches!(made, RefundSettlement::Succeeded { .. }));
    assert_eq!(
        acquirer.refund_payment(&first).await.unwrap(),
        made,
        "same key, same refund"
    );
    let too_much = refund_of(&charged, &req, "500.01");
    assert_eq!(
        acquirer.refund_payment(&too_much).await.unwrap(),
        RefundSettlement::Failed {
            code: chargeonce_acquirer::REFUND_EXCEEDS_CHARGE.to_owned()
        }
    );
    let rest = refund_of(&charged, &req, "500.00");
    assert!(matches!(
        acquirer.refund_payment(&rest).await.unwrap(),
        RefundSettlement::Succeeded { .. }
    ));
    let after = acquirer.status(&req.acquirer_key).await.unwrap().unwrap();
    assert_eq!(after.refunded_minor, 150_000);
    assert!(!after.holds_money());

    // A payment made with tok_timeout: the refund's first answer is lost
    // after it was recorded; the retry with the same key learns it.
    let timeout_req = request(tokens::TIMEOUT);
    let timeout_charge = match acquirer.charge(&timeout_req).await {
        Err(AcquirerError::Unknown(_)) => acquirer.charge(&timeout_req).await.unwrap(),
        other => panic!("expected a lost answer, got {other:?}"),
    };
    let lost = refund_of(&timeout_charge, &timeout_req, "1.00");
    assert!(matches!(
        acquirer.refund_payment(&lost).await,
        Err(AcquirerError::Unknown(_))
    ));
    assert!(matches!(
        acquirer.refund_payment(&lost).await.unwrap(),
        RefundSettlement::Succeeded { .. }
    ));
    let declined_req = request(tokens::DECLINED);
    let declined = acquirer.charge(&declined_req).await.unwrap();
    assert_eq!(
        acquirer
            .refund_payment(&refund_of(&declined, &declined_req, "1.00"))
            .await
            .unwrap(),
        RefundSettlement::Failed {
            code: chargeonce_acquirer::REFUND_CHARGE_DECLINED.to_owned()
        }
    );
    assert_eq!(s.sim.refunds().await.unwrap().len(), 3);
}

/// Plants a succeeded charge of 10.00 RUB at a given time.
async fn plant_at(
    sim: &Simulator,
    shop: &str,
    reference: &str,
    at: time::OffsetDateTime,
) -> chargeonce_acquirer::LedgerEntry {
    let entry = chargeonce_acquirer::LedgerEntry {
        id: format!("ch_{}", uuid::Uuid::now_v7().simple()),
        acquirer_key: chargeonce_core::AcquirerKey::from_stored(format!(
            "planted-{}",
            uuid::Uuid::new_v4().simple()
        )),
        shop_id: chargeonce_core::ShopId::new(shop).unwrap(),
        payment_id: PaymentId::generate(),
        reference: chargeonce_core::Reference::new(reference).unwrap(),
        amount: Money::parse("10.00", "RUB").unwrap(),
        status: chargeonce_acquirer::ChargeStatus::Succeeded,
        decline_code: None,
        created_at: at,
        refunded_minor: 0,
        capture_method: chargeonce_core::CaptureMethod::Automatic,
        captured_minor: 0,
        closed: false,
        voided: false,
        trace_id: None,
    };
    sim.plant(&entry).await.unwrap();
    entry
}

/// Walks `[from, to)` a page of `limit` at a time; returns the charge ids.
async fn walk(
    ledger: &dyn AcquirerLedger,
    from: time::OffsetDateTime,
    to: time::OffsetDateTime,
    limit: u32,
) -> Vec<String> {
    let mut ids = Vec::new();
    let mut after = None;
    loop {
        let page = ledger
            .charges_page(from, to, after.as_ref(), limit)
            .await
            .unwrap();
        assert!(page.len() <= limit as usize);
        ids.extend(page.iter().map(|c| c.id().to_owned()));
        match page.last() {
            Some(last) if page.len() == limit as usize => {
                after = Some(chargeonce_core::LedgerCursor::after(last));
            }
            _ => return ids,
        }
    }
}

/// The ledger's pages and per-order look-ups, in process and over HTTP:
/// pages follow (`created_at`, id) order, ties on one millisecond included,
/// and together hold exactly the window; an order's charges come whenever
/// they were made, and only that shop's.
#[tokio::test]
async fn the_ledger_pages_a_window_and_finds_an_order() {
    let s = start().await;
    let http = adapter(&s.base, Duration::from_secs(2));
    let base = time::OffsetDateTime::from_unix_timestamp(1_800_000_000).unwrap();
    let ms = time::Duration::milliseconds;
    let mut inside = Vec::new();
    for i in 0..7 {
        // Three charges share one millisecond: the id breaks the tie.
        let at = base + ms(if (2..5).contains(&i) { 2 } else { i });
        inside.push(plant_at(&s.sim, "shop-a", &format!("order-{i}"), at).await);
    }
    let before = plant_at(&s.sim, "shop-a", "order-1", base - ms(1)).await;
    let after = plant_at(&s.sim, "shop-a", "order-1", base + ms(1000)).await;
    plant_at(&s.sim, "shop-b", "order-1", base).await;
    let end = base + ms(1000);

    let expected: Vec<String> = s
        .sim
        .between(base, end)
        .await
        .unwrap()
        .into_iter()
        .filter(|c| c.shop_id.as_str() == "shop-a")
        .map(|c| c.id)
        .collect();
    assert_eq!(expected.len(), 7);
    let sim: &dyn AcquirerLedger = s.sim.as_ref();
    for ledger in [sim, &http as &dyn AcquirerLedger] {
        for limit in [1, 2, 3, 7, 8, 100] {
            let mut walked = walk(ledger, base, end, limit).await;
            walked.retain(|id| inside.iter().any(|c| &c.id == id));
            assert_eq!(walked, expected, "limit {limit}");
            assert_eq!(
                walk(ledger, base, end, limit).await.len(),
                8,
                "with shop-b's"
            );
        }
        let whole = ledger.charges_between(base, end).await.unwrap();
        let paged = walk(ledger, base, end, 3).await;
        assert_eq!(
            whole.iter().map(|c| c.id().to_owned()).collect::<Vec<_>>(),
            paged,
            "pages and the whole window agree"
        );

        let shop = chargeonce_core::ShopId::new("shop-a").unwrap();
        let order = chargeonce_core::Reference::new("order-1").unwrap();
        let found = ledger.charges_for_reference(&shop, &order).await.unwrap();
        let ids: Vec<&str> = found.iter().map(|c| c.id()).collect();
        assert_eq!(ids, [&before.id, &inside[1].id, &after.id], "oldest first");
        let none = chargeonce_core::Reference::new("order-none").unwrap();
        assert!(
            ledger
                .charges_for_reference(&shop, &none)
                .await
                .unwrap()
                .is_empty()
        );
    }

    let client = reqwest::Client::new();
    for bad in [
        "v1/charges?from=0&to=1&after=5",
        "v1/charges?from=0&to=1&limit=5&after_id=ch_x",
        "v1/charges?limit=5",
        "v1/charges?shop_id=shop-a&reference=order-1&payment_id=pay_x",
        "v1/charges?reference=order-1",
    ] {
        let answer = client
            .get(format!("{}/{bad}", s.base))
            .send()
            .await
            .unwrap();
        assert_eq!(answer.status(), StatusCode::BAD_REQUEST, "{bad}");
    }
}

/// The simulator's own input is as strict as the service's: more decimals
/// than the currency has (zeros included) and a member named twice are 400,
/// with nothing recorded; an unknown token is a definite decline.
#[tokio::test]
async fn charge_bodies_are_read_strictly() {
    let s = start().await;
    let http = reqwest::Client::new();
    let payment_id = PaymentId::generate();
    let charge = |key: &str, body: String| {
        http.post(format!("{}/v1/charges", s.base))
            .header("idempotency-key", key)
            .header("content-type", "application/json")
            .body(body)
    };
    let body = |value: &str, currency: &str, token: &str| {
        format!(
            r#"{{"shop_id":"demo-shop","payment_id":"{}","reference":"order-1","amount":{{"value":"{value}","currency":"{currency}"}},"token":"{token}"}}"#,
            payment_id.as_str()
        )
    };
    for (n, (value, currency)) in [("1500.000", "RUB"), ("1500.00", "JPY"), ("1.5000", "KWD")]
        .into_iter()
        .enumerate()
    {
        let answer = charge(&format!("k-{n}"), body(value, currency, tokens::OK))
            .send()
            .await
            .unwrap();
        assert_eq!(
            answer.status(),
            StatusCode::BAD_REQUEST,
            "{value} {currency}"
        );
        let text = answer.text().await.unwrap();
        assert!(text.contains("decimal places"), "{text}");
    }
    let twice = body("1500.00", "RUB", tokens::OK).replace(
        r#""amount":"#,
        r#""amount":{"value":"1.00","currency":"RUB"},"amount":"#,
    );
    let answer = charge("k-twice", twice).send().await.unwrap();
    assert_eq!(answer.status(), StatusCode::BAD_REQUEST);
    assert!(answer.text().await.unwrap().contains("duplicate field"));
    assert!(s.sim.ledger().await.unwrap().is_empty(), "nothing recorded");

    let answer = charge("k-typo", body("1500.00", "RUB", "tok_declinde"))
        .send()
        .await
        .unwrap();
    let charge: serde_json::Value = answer.json().await.unwrap();
    assert_eq!(charge["status"], "declined", "{charge}");
    assert_eq!(charge["decline_code"], chargeonce_acquirer::UNKNOWN_TOKEN);
}
