//! `GET /console/payments/{id}`: one payment of any shop, its refunds, its
//! history told as a timeline (oldest first, one sentence an entry:
//! `console::timeline`), the repeats of its keys, its merchant events with
//! their deliveries and a resend button, a refund form (`console::refund`),
//! a cancel form for a pending payment (`console::cancel`), and for an
//! authorization its captures with capture and void forms
//! (`console::authorization`).

use askama::Template;
use axum::extract::State;
use axum::response::Response;
use chargeonce_core::events::Event;
use chargeonce_core::history::{HistoryEntry, HistoryEvent, RepeatCounts, Tally};
use chargeonce_core::store::KeyRepeats;
use chargeonce_core::{Cursor, PageLimit, PageRequest, Payment};
use chargeonce_server::extract::PathId;
use chargeonce_server::routes::history;

use super::{Chrome, ConsoleError, Operator, html, money, when, when_ms};
use crate::action::fresh_key;
use crate::timeline::{TimelineEntry, timeline};
use crate::{Console, payment_of};

/// A tally in the page.
pub struct TallyView {
    /// How many.
    pub count: u64,
    /// When the last was, if any.
    pub last: Option<String>,
}

impl TallyView {
    /// A tally as the pages show it.
    pub fn of(tally: &Tally) -> Self {
        Self {
            count: tally.count,
            last: tally.last_at.map(when),
        }
    }
}

/// A key's repeat summary.
pub struct KeyView {
    /// The key.
    pub key: String,
    /// Whether the key is gone (its counts from its `key_expired` entry).
    pub expired: bool,
    /// Replays.
    pub replays: TallyView,
    /// 409s.
    pub conflicts: TallyView,
    /// 422s.
    pub mismatches: TallyView,
}

/// The summaries of every key the payment's history names, over all its
/// lives: a key used again after it expired starts a new row with fresh
/// counts, and each earlier row left its counts in a `key_expired` entry;
/// the summary adds them up (the store's counts for the live row, if any).
pub fn key_views(
    payment: &Payment,
    entries: &[HistoryEntry],
    repeats: &[KeyRepeats],
) -> Vec<KeyView> {
    history::keys_of(payment, entries)
        .into_iter()
        .map(|key| {
            let live = repeats.iter().find(|r| r.key == key).map(|r| r.repeats);
            let swept: Vec<RepeatCounts> = entries
                .iter()
                .filter_map(|e| match &e.event {
                    HistoryEvent::KeyExpired { key: k, repeats } if k == key.as_str() => {
                        Some(*repeats)
                    }
                    _ => None,
                })
                .collect();
            let counts = swept
                .iter()
                .chain(live.iter())
                .fold(RepeatCounts::default(), |sum, c| add_counts(&sum, c));
            KeyView {
                key: key.as_str().to_owned(),
                expired: live.is_none() && !swept.is_empty(),
                replays: TallyView::of(&counts.replays),
                conflicts: TallyView::of(&counts.conflicts),
                mismatches: TallyView::of(&counts.mismatches),
            }
        })
        .collect()
}

/// Two lives' counts together: the sums, and the later of the last times.
fn add_counts(a: &RepeatCounts, b: &RepeatCounts) -> RepeatCounts {
    let add = |x: &Tally, y: &Tally| Tally {
        count: x.count + y.count,
        last_at: x.last_at.max(y.last_at),
    };
    RepeatCounts {
        replays: add(&a.replays, &b.replays),
        conflicts: add(&a.conflicts, &b.conflicts),
        mismatches: add(&a.mismatches, &b.mismatches),
    }
}

/// A merchant event's row.
pub struct EventRow {
    /// Its id.
    pub id: String,
    /// Its shop's own id.
    pub shop: String,
    /// Whether it is test mode's (marked).
    pub test: bool,
    /// Its type.
    pub kind: &'static str,
    /// Its payment.
    pub payment: String,
    /// Its delivery state.
    pub state: &'static str,
    /// Attempts so far.
    pub attempts: u32,
    /// The last attempt's status.
    pub last_status: Option<u16>,
    /// Why the last attempt failed.
    pub last_error: Option<String>,
    /// When the next attempt is due, while pending.
    pub next_attempt: Option<String>,
    /// When it was delivered.
    pub delivered: Option<String>,
    /// When it was written.
    pub created: String,
    /// The resend's idempotency key (`resend-<id>-<attempts>`).
    pub resend_key: String,
    /// Its delivery to each endpoint.
    pub deliveries: Vec<DeliveryRow>,
}

/// An event's delivery to one endpoint.
pub struct DeliveryRow {
    /// The endpoint.
    pub endpoint: String,
    /// Where it stands.
    pub state: &'static str,
    /// Attempts so far.
    pub attempts: u32,
    /// The last attempt's status.
    pub last_status: Option<u16>,
    /// Why the last attempt failed.
    pub last_error: Option<String>,
    /// When the next attempt is due, while one is.
    pub next_attempt: Option<String>,
    /// The key of a resend to this endpoint only.
    pub resend_key: String,
}

impl EventRow {
    /// The row of an event.
    pub fn of(event: &Event) -> Self {
        let delivery = &event.delivery();
        let state = delivery.state();
        Self {
            id: event.id.as_str().to_owned(),
            shop: event.shop_id.shop().as_str().to_owned(),
            test: !event.shop_id.is_live(),
            kind: event.event_type.as_str(),
            payment: event.payment_id.as_str().to_owned(),
            state: state.as_str(),
            attempts: delivery.attempts,
            last_status: delivery.last_status,
            last_error: delivery.last_error.clone(),
            next_attempt: delivery.next_attempt().map(when_ms),
            delivered: delivery.delivered_at_ms.map(when_ms),
            created: when_ms(event.created_at_ms),
            resend_key: format!("resend-{}-{}", event.id, delivery.attempts),
            deliveries: event
                .deliveries
                .iter()
                .map(|d| DeliveryRow {
                    endpoint: d.endpoint_id.to_string(),
                    state: d.delivery.state().as_str(),
                    attempts: d.delivery.attempts,
                    last_status: d.delivery.last_status,
                    last_error: d.delivery.last_error.clone(),
                    next_attempt: d.delivery.next_attempt().map(when_ms),
                    resend_key: format!(
                        "resend-{}-{}-{}",
                        event.id, d.endpoint_id, d.delivery.attempts
                    ),
                })
                .collect(),
        }
    }
}

/// A refund's row.
pub struct RefundRow {
    /// Its id.
    pub id: String,
    /// Its status.
    pub status: &'static str,
    /// Its amount.
    pub amount: String,
    /// Its key.
    pub key: String,
    /// Why it failed.
    pub failure: Option<String>,
    /// When it was created.
    pub created: String,
}

/// A capture's row.
pub struct CaptureRow {
    /// Its id.
    pub id: String,
    /// Its status.
    pub status: &'static str,
    /// Its amount.
    pub amount: String,
    /// Whether it was the last capture.
    pub last: bool,
    /// Its key.
    pub key: String,
    /// Why it failed.
    pub failure: Option<String>,
    /// When it was created.
    pub created: String,
}

/// Where an authorization stands, for the page.
pub struct AuthorizationView {
    /// `authorized`, `partially_captured`, `succeeded`, `voided`, `expired`.
    pub status: &'static str,
    /// What was captured.
    pub captured: String,
    /// What captures may still take.
    pub capturable: String,
    /// When it is released unless captured.
    pub expires: String,
    /// Its captures, newest first.
    pub captures: Vec<CaptureRow>,
    /// The capture form's key.
    pub capture_key: String,
    /// The void form's key.
    pub void_key: String,
    /// Whether a capture can be asked (the hold open, something left).
    pub capturable_now: bool,
    /// Whether a void can be asked (the hold open).
    pub voidable_now: bool,
}

/// The payment page.
#[derive(Template)]
#[template(path = "console/payment.html")]
struct PaymentPage {
    page: Chrome,
    id: String,
    /// Its shop's own id.
    shop: String,
    /// Whether it is test mode's (marked).
    test: bool,
    status: &'static str,
    amount: String,
    refunded: String,
    reference: String,
    provider_id: Option<String>,
    decline_code: Option<String>,
    created: String,
    metadata: Vec<(String, String)>,
    refunds: Vec<RefundRow>,
    timeline: Vec<TimelineEntry>,
    keys: Vec<KeyView>,
    events: Vec<EventRow>,
    refund_key: String,
    refundable: bool,
    cancel_key: String,
    cancelable: bool,
    authorization: Option<AuthorizationView>,
    back: String,
}

/// `GET /console/payments/{id}`.
pub async fn page(
    State(state): State<Console>,
    operator: Operator,
    PathId(id): PathId,
) -> Result<Response, ConsoleError> {
    let payment = payment_of(&state, &id).await?;
    let refunds = state
        .store()
        .list_refunds(
            &payment.shop_id,
            Some(&payment.id),
            &PageRequest {
                limit: PageLimit::new(chargeonce_core::MAX_PAGE_LIMIT).unwrap_or_default(),
                cursor: Cursor::Newest,
            },
        )
        .await?;
    let (entries, repeats) = history::read(state.store().as_ref(), None, &payment).await?;
    let events = state.store().payment_events(&payment.id).await?;
    let refunded = chargeonce_server::render::amount_minor(payment.refunded_minor, payment.amount);
    let authorization = authorization_view(&state, &payment).await?;
    html(&PaymentPage {
        page: Chrome::new(&operator, format!("Payment {}", payment.id), "payments"),
        id: payment.id.as_str().to_owned(),
        shop: payment.shop_id.shop().as_str().to_owned(),
        test: !payment.shop_id.is_live(),
        status: payment
            .authorization()
            .map_or_else(|| payment.status.as_str(), |hold| hold.status().as_str()),
        amount: money(payment.amount),
        refunded: format!("{} {}", refunded.value, refunded.currency),
        reference: payment.reference.as_str().to_owned(),
        provider_id: payment.provider_payment_id.clone(),
        decline_code: payment.decline_code.clone(),
        created: when(payment.created_at),
        metadata: payment
            .metadata
            .iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect(),
        refunds: refunds
            .items
            .iter()
            .map(|r| RefundRow {
                id: r.id.as_str().to_owned(),
                status: r.status.as_str(),
                amount: money(r.amount),
                key: r.idempotency_key.as_str().to_owned(),
                failure: r.failure_code.clone(),
                created: when(r.created_at),
            })
            .collect(),
        timeline: timeline(&entries),
        keys: key_views(&payment, &entries, &repeats),
        events: events.iter().map(EventRow::of).collect(),
        refund_key: fresh_key("refund", &payment.id),
        cancel_key: fresh_key("cancel", &payment.id),
        cancelable: payment.status == chargeonce_core::PaymentStatus::Pending,
        refundable: payment.status == chargeonce_core::PaymentStatus::Succeeded
            && payment.refunded_minor < refundable_limit(&payment),
        authorization,
        back: format!("/console/payments/{}", payment.id),
    })
}

/// What refunds may give back in all: the amount, or an authorization's
/// captures.
fn refundable_limit(payment: &Payment) -> i64 {
    match payment.authorization() {
        Some(hold) => hold.captured_minor(),
        None => payment.amount.minor_units(),
    }
}

/// The authorization part of the page, for a payment that only authorized
/// and was authorized.
async fn authorization_view(
    state: &Console,
    payment: &Payment,
) -> Result<Option<AuthorizationView>, ConsoleError> {
    let (Some(hold), chargeonce_core::PaymentCapture::Manual { expires_at, .. }) =
        (payment.authorization(), payment.capture)
    else {
        return Ok(None);
    };
    let captures = state
        .store()
        .list_captures(
            &payment.shop_id,
            &payment.id,
            &PageRequest {
                limit: PageLimit::new(chargeonce_core::MAX_PAGE_LIMIT).unwrap_or_default(),
                cursor: Cursor::Newest,
            },
        )
        .await?;
    let amount = |minor| {
        let a = chargeonce_server::render::amount_minor(minor, payment.amount);
        format!("{} {}", a.value, a.currency)
    };
    let open = hold.hold() == chargeonce_core::authorization::Hold::Open;
    Ok(Some(AuthorizationView {
        status: hold.status().as_str(),
        captured: amount(hold.captured_minor()),
        capturable: amount(hold.capturable_minor()),
        expires: when(expires_at),
        captures: captures
            .items
            .iter()
            .map(|c| CaptureRow {
                id: c.id.as_str().to_owned(),
                status: c.status.as_str(),
                amount: money(c.amount),
                last: c.last,
                key: c.idempotency_key.as_str().to_owned(),
                failure: c.failure_code.clone(),
                created: when(c.created_at),
            })
            .collect(),
        capture_key: fresh_key("capture", &payment.id),
        void_key: fresh_key("void", &payment.id),
        capturable_now: open && hold.capturable_minor() > 0,
        voidable_now: open,
    }))
}

#[cfg(test)]
mod tests {
    use chargeonce_core::history::{RepeatCounts, SettledBy};
    use chargeonce_core::{
        AcquirerCall, AcquirerKey, AcquirerOutcomeKind, CardToken, IdempotencyKey, Money,
        PaymentStatus, RecoveryPoint, Reference, RefundId, ShopId,
    };
    use time::OffsetDateTime;

    use super::*;
    use chargeonce_core::PaymentId;

    fn entry(seq: i64, event: HistoryEvent) -> HistoryEntry {
        HistoryEntry {
            seq,
            at: OffsetDateTime::UNIX_EPOCH + time::Duration::milliseconds(seq * 250),
            payment_id: PaymentId::parse("pay_0123456789abcdef0123456789abcdef").unwrap(),
            refund_id: None,
            event,
        }
    }

    fn story() -> (Payment, Vec<HistoryEntry>) {
        let id = PaymentId::parse("pay_0123456789abcdef0123456789abcdef").unwrap();
        let payment = Payment {
            id: id.clone(),
            shop_id: ShopId::new("shop-a").unwrap(),
            idempotency_key: IdempotencyKey::new("order-1-pay").unwrap(),
            reference: Reference::new("order-1").unwrap(),
            amount: Money::parse("1500.00", "RUB").unwrap(),
            token: CardToken::new("tok_secret_card").unwrap(),
            status: PaymentStatus::Succeeded,
            acquirer_key: AcquirerKey::for_payment(&id),
            provider_payment_id: Some("ch_1".into()),
            decline_code: None,
            created_at: OffsetDateTime::UNIX_EPOCH,
            refunded_minor: 0,
            metadata: Default::default(),
            capture: chargeonce_core::PaymentCapture::Automatic,
        };
        let ak = payment.acquirer_key.as_str().to_owned();
        let call = |outcome, latency_ms| HistoryEvent::AcquirerCall {
            call: AcquirerCall::Charge,
            outcome,
            latency_ms,
            acquirer_key: ak.clone(),
            instance: "api-1:42".into(),
            reason: None,
        };
        let mut refund = entry(
            9,
            HistoryEvent::RefundReserved {
                key: "order-1-refund".into(),
                amount_minor: 50_000,
                currency: "RUB".into(),
                instance: "api-1:42".into(),
            },
        );
        refund.refund_id = Some(RefundId::parse("re_0123456789abcdef0123456789abcdef").unwrap());
        let entries = vec![
            entry(
                1,
                HistoryEvent::Claimed {
                    key: "order-1-pay".into(),
                    instance: "api-1:42".into(),
                },
            ),
            entry(2, call(AcquirerOutcomeKind::Unknown, 2000)),
            entry(
                3,
                HistoryEvent::Answered {
                    key: "order-1-pay".into(),
                    status: 202,
                },
            ),
            entry(
                4,
                HistoryEvent::TakenOver {
                    key: "order-1-pay".into(),
                    instance: "api-2:7".into(),
                    recovery_point: RecoveryPoint::PaymentCreated,
                },
            ),
            entry(5, call(AcquirerOutcomeKind::Succeeded, 12)),
            entry(
                6,
                HistoryEvent::Settled {
                    status: PaymentStatus::Succeeded,
                    by: SettledBy::Request {
                        key: "order-1-pay".into(),
                    },
                },
            ),
            entry(
                7,
                HistoryEvent::Answered {
                    key: "order-1-pay".into(),
                    status: 201,
                },
            ),
            entry(
                8,
                HistoryEvent::Linked {
                    key: "order-1-pay-again".into(),
                    instance: "api-1:42".into(),
                },
            ),
            refund,
            entry(
                10,
                HistoryEvent::KeyExpired {
                    key: "order-1-pay-again".into(),
                    repeats: RepeatCounts {
                        replays: Tally {
                            count: 3,
                            last_at: Some(OffsetDateTime::UNIX_EPOCH),
                        },
                        ..RepeatCounts::default()
                    },
                },
            ),
        ];
        (payment, entries)
    }

    #[test]
    fn the_timeline_tells_each_entry_in_words() {
        let (_, entries) = story();
        let lines = timeline(&entries);
        assert_eq!(lines.len(), entries.len());
        assert_eq!(lines[1].kind, "acquirer_call");
        assert_eq!(lines[1].outcome, Some("unknown"));
        assert_eq!(lines[1].call, Some("charge"));
        assert!(
            lines[1]
                .sentence
                .starts_with("Charge sent to the acquirer (key chargeonce-"),
            "{}",
            lines[1].sentence
        );
        assert!(
            lines[1]
                .sentence
                .contains("no answer within 2000 ms — outcome unknown")
        );
        assert!(
            lines[1]
                .sentence
                .ends_with("answered 202, the payment stays pending")
        );
        assert_eq!(lines[2].status, Some(202));
        assert!(
            lines[3]
                .sentence
                .starts_with("Retry took over on instance api-2:7, resuming at payment_created")
        );
        assert_eq!(
            lines[5].sentence,
            "Settled succeeded by the request (key order-1-pay)"
        );
        assert!(lines[6].sentence.starts_with("Answered 201"));
        assert!(lines[8].sentence.contains("500.00 RUB reserved"));
        assert_eq!(
            lines[8].refund.as_deref(),
            Some("re_0123456789abcdef0123456789abcdef")
        );
        assert_eq!(lines[9].offset, "+2.250 s");
    }

    #[test]
    fn the_page_carries_the_contracts_markers_and_no_card_token() {
        let (payment, entries) = story();
        let repeats = [KeyRepeats {
            key: IdempotencyKey::new("order-1-pay").unwrap(),
            repeats: RepeatCounts {
                conflicts: Tally {
                    count: 2,
                    last_at: None,
                },
                ..RepeatCounts::default()
            },
        }];
        let keys = key_views(&payment, &entries, &repeats);
        assert_eq!(keys.len(), 3, "the first key, the linked one, the refund's");
        assert_eq!(keys[0].conflicts.count, 2);
        assert!(keys[1].expired);
        assert_eq!(keys[1].replays.count, 3);
        let page = PaymentPage {
            page: Chrome {
                title: "Payment".into(),
                csrf: "csrf-token".into(),
                flash: Some("done".into()),
                current: "payments",
            },
            id: payment.id.as_str().to_owned(),
            shop: "shop-a".into(),
            test: false,
            status: "succeeded",
            amount: money(payment.amount),
            refunded: "0.00 RUB".into(),
            reference: "order-1".into(),
            provider_id: None,
            decline_code: None,
            created: when(payment.created_at),
            refunds: vec![],
            timeline: timeline(&entries),
            keys,
            events: vec![],
            refund_key: fresh_key("refund", &payment.id),
            refundable: true,
            cancel_key: fresh_key("cancel", &payment.id),
            cancelable: false,
            authorization: None,
            back: "/console/payments/x".into(),
            metadata: Default::default(),
        };
        let html = page.render().unwrap();
        for marker in [
            "<ol data-testid=\"timeline\"",
            "data-testid=\"timeline-entry\" data-type=\"claimed\"",
            "data-type=\"acquirer_call\" data-outcome=\"unknown\" data-call=\"charge\"",
            "data-type=\"answered\" data-status=\"202\"",
            "data-type=\"taken_over\"",
            "data-type=\"settled\"",
            "data-testid=\"key-repeats\" data-key=\"order-1-pay\"",
            "data-testid=\"conflicts\">2",
            "data-testid=\"refund-form\"",
            "name=\"amount\"",
            "data-testid=\"payment-status\" class=\"status-succeeded\">succeeded<",
            "data-testid=\"payment-amount\">1500.00 RUB<",
            "data-testid=\"flash\"",
            "data-testid=\"nav\"",
            "name=\"csrf\" value=\"csrf-token\"",
        ] {
            assert!(html.contains(marker), "{marker} missing in {html}");
        }
        assert!(!html.contains("tok_secret_card"));
        assert!(!html.contains("<script>"), "no inline script");
        assert!(
            !html.contains("style="),
            "no inline style (the CSP refuses it)"
        );
        if let Ok(path) = std::env::var("CONSOLE_PAGE_DUMP") {
            std::fs::write(path, &html).unwrap();
        }
    }
}
