//! `GET /console/payments/{id}`: one payment of any shop, its refunds, its
//! history told as a timeline (oldest first, one sentence an entry), the
//! repeats of its keys, its merchant events with their deliveries and a
//! resend button, a refund form, and a cancel form for a pending payment
//! (`console::cancel`); `POST /console/payments/{id}/refund`.
//!
//! A console refund goes through the engine exactly as the shop's
//! `POST /v1/payments/{id}/refunds` would: the same path, the same body
//! (`{"amount": {...}}`, or `{}` for the rest), so the same fingerprint,
//! under an `Idempotency-Key` rendered into the form
//! (`console-refund-<payment id>-<random>`). A double click refunds once,
//! and a later API request with that key agrees with it.

use askama::Template;
use axum::Form;
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Redirect, Response};
use chargeonce_core::events::{DeliveryState, Event, PARKED_UNTIL_MS};
use chargeonce_core::history::{HistoryEntry, HistoryEvent, RepeatCounts, SettledBy, Tally};
use chargeonce_core::store::KeyRepeats;
use chargeonce_core::{
    AcquirerCall, AcquirerOutcomeKind, Cursor, IdempotencyKey, Money, PageLimit, PageRequest,
    Payment, PaymentId, RecoveryPoint,
};
use rand::RngCore;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{Chrome, ConsoleError, Operator, html, money, when, when_ms};
use crate::Console;
use chargeonce_server::extract::PathId;
use chargeonce_server::pipeline::{self, Command};
use chargeonce_server::routes::history;

/// One line of the timeline.
pub struct TimelineEntry {
    /// The entry's type (`data-type`).
    pub kind: &'static str,
    /// An acquirer call's outcome (`data-outcome`).
    pub outcome: Option<&'static str>,
    /// An acquirer call's kind (`data-call`).
    pub call: Option<&'static str>,
    /// An answer's HTTP status (`data-status`).
    pub status: Option<u16>,
    /// When, in full.
    pub at: String,
    /// How long after the first entry.
    pub offset: String,
    /// The refund it is about.
    pub refund: Option<String>,
    /// What happened, in words.
    pub sentence: String,
}

fn call_name(call: AcquirerCall) -> &'static str {
    match call {
        AcquirerCall::Charge => "Charge",
        AcquirerCall::Lookup => "Look-up",
        AcquirerCall::Refund => "Refund",
    }
}

fn point_name(point: RecoveryPoint) -> &'static str {
    point.as_str()
}

fn repeats_words(replays: &Tally, conflicts: &Tally, mismatches: &Tally) -> String {
    format!(
        "{} replay(s), {} 409(s), {} 422(s)",
        replays.count, conflicts.count, mismatches.count
    )
}

/// What an answer's status means, for the sentence.
fn answered_words(status: u16) -> &'static str {
    match status {
        201 => "",
        200 => ": the order was already paid by this payment",
        202 => {
            ": outcome unknown, the payment stays pending (a retry with the same key resumes it)"
        }
        402 => ": declined",
        409 => ": not refundable yet",
        422 => ": refused",
        503 => ": not sent yet, it will be",
        _ => "",
    }
}

/// One entry in words (`next` is the entry after it, for what an
/// acquirer call led to).
pub fn sentence(entry: &HistoryEntry, next: Option<&HistoryEntry>) -> String {
    match &entry.event {
        HistoryEvent::Claimed { key, instance } => {
            format!("Claimed by key {key} on instance {instance}: the payment was created")
        }
        HistoryEvent::Linked { key, instance } => format!(
            "Key {key} (instance {instance}) found the order already paid or being paid by this \
             payment: linked to it, nothing charged"
        ),
        HistoryEvent::TakenOver {
            key,
            instance,
            recovery_point,
        } => format!(
            "Retry took over on instance {instance}, resuming at {} (key {key}: its lease had \
             run out)",
            point_name(*recovery_point)
        ),
        HistoryEvent::AcquirerCall {
            call,
            outcome,
            latency_ms,
            acquirer_key,
            instance,
            reason,
        } => {
            let what = match (call, outcome) {
                (_, AcquirerOutcomeKind::Unknown) => format!(
                    "no answer within {latency_ms} ms — outcome unknown{}",
                    reason
                        .as_ref()
                        .map(|r| format!(" ({r})"))
                        .unwrap_or_default()
                ),
                (_, AcquirerOutcomeKind::NotSent) => format!(
                    "not sent{}",
                    reason
                        .as_ref()
                        .map(|r| format!(" ({r})"))
                        .unwrap_or_default()
                ),
                (AcquirerCall::Lookup, AcquirerOutcomeKind::Succeeded) => {
                    format!("the acquirer has the charge (answered in {latency_ms} ms)")
                }
                (AcquirerCall::Refund, AcquirerOutcomeKind::Succeeded) => {
                    format!("refunded (answered in {latency_ms} ms)")
                }
                (_, AcquirerOutcomeKind::Succeeded) => {
                    format!("charged (answered in {latency_ms} ms)")
                }
                (_, AcquirerOutcomeKind::Declined) => format!(
                    "declined{} (answered in {latency_ms} ms)",
                    reason
                        .as_ref()
                        .map(|r| format!(": {r}"))
                        .unwrap_or_default()
                ),
                (_, AcquirerOutcomeKind::Refused) => format!(
                    "the request refused{} (answered in {latency_ms} ms)",
                    reason
                        .as_ref()
                        .map(|r| format!(": {r}"))
                        .unwrap_or_default()
                ),
                (_, AcquirerOutcomeKind::NotFound) => {
                    format!("the acquirer has no such charge (answered in {latency_ms} ms)")
                }
            };
            let then = match next.map(|n| &n.event) {
                Some(HistoryEvent::Answered { status: 202, .. })
                    if *outcome == AcquirerOutcomeKind::Unknown =>
                {
                    "; answered 202, the payment stays pending"
                }
                _ => "",
            };
            format!(
                "{} sent to the acquirer (key {acquirer_key}) from {instance}: {what}{then}",
                call_name(*call)
            )
        }
        HistoryEvent::Answered { key, status } => {
            format!("Answered {status}{} (key {key})", answered_words(*status))
        }
        HistoryEvent::CancelRequested { key, instance } => match key {
            Some(key) => format!(
                "Cancel requested by key {key} (instance {instance}): the charge is only looked \
                 up from now on, after the settle window, never sent again"
            ),
            None => format!(
                "Given up on by the completer (instance {instance}): pending past its give-up \
                 time, so it is canceled — the charge is only looked up, never sent again"
            ),
        },
        HistoryEvent::Settled { status, by } => {
            let by = match by {
                SettledBy::Request { key } => format!("by the request (key {key})"),
                SettledBy::Webhook { event_id } => {
                    format!("by an acquirer webhook (event {event_id})")
                }
                SettledBy::Reconciler => "by the reconciler, from the acquirer's ledger".into(),
            };
            format!("Settled {} {by}", status.as_str())
        }
        HistoryEvent::WebhookReceived { event_id, kind } => {
            format!("Acquirer webhook {event_id} ({kind}) received: nothing to change")
        }
        HistoryEvent::RefundReserved {
            key,
            amount_minor,
            currency,
            instance,
        } => {
            let amount = chargeonce_core::Currency::from_code(currency)
                .ok()
                .and_then(|c| Money::from_minor(*amount_minor, c).ok())
                .map(money)
                .unwrap_or_else(|| format!("{amount_minor} minor units of {currency}"));
            format!("Refund of {amount} reserved (key {key}, instance {instance})")
        }
        HistoryEvent::RefundEnded { status } => format!("Refund ended {}", status.as_str()),
        HistoryEvent::EventAttempt {
            event_id,
            event_type,
            attempt,
            result,
            status,
        } => format!(
            "Merchant event {event_id} ({event_type}), delivery attempt {attempt}: {result}{}",
            status.map(|s| format!(" (HTTP {s})")).unwrap_or_default()
        ),
        HistoryEvent::EventResent { event_id } => {
            format!("Merchant event {event_id} made due again by an operator")
        }
        HistoryEvent::KeyExpired { key, repeats } => format!(
            "Key {key} expired and was swept: {}",
            repeats_words(&repeats.replays, &repeats.conflicts, &repeats.mismatches)
        ),
        HistoryEvent::Finding { finding_id, kind } => {
            format!("The reconciler found a {kind} (finding #{finding_id})")
        }
        HistoryEvent::FindingResolved { finding_id, how } => {
            format!("Finding #{finding_id} resolved ({how})")
        }
    }
}

/// The timeline of a history, oldest first.
pub fn timeline(entries: &[HistoryEntry]) -> Vec<TimelineEntry> {
    let first = entries.first().map(|e| e.at);
    entries
        .iter()
        .enumerate()
        .map(|(i, entry)| {
            let (outcome, call, status) = match &entry.event {
                HistoryEvent::AcquirerCall { call, outcome, .. } => {
                    (Some(outcome.as_str()), Some(call.as_str()), None)
                }
                HistoryEvent::Answered { status, .. } => (None, None, Some(*status)),
                _ => (None, None, None),
            };
            let offset = first
                .map(|f| format!("+{:.3} s", (entry.at - f).as_seconds_f64()))
                .unwrap_or_default();
            TimelineEntry {
                kind: entry.event.kind(),
                outcome,
                call,
                status,
                at: when(entry.at),
                offset,
                refund: entry.refund_id.as_ref().map(|id| id.as_str().to_owned()),
                sentence: sentence(entry, entries.get(i + 1)),
            }
        })
        .collect()
}

/// A tally in the page.
pub struct TallyView {
    /// How many.
    pub count: u64,
    /// When the last was, if any.
    pub last: Option<String>,
}

impl TallyView {
    fn of(tally: &Tally) -> Self {
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
    /// Its shop.
    pub shop: String,
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
}

impl EventRow {
    /// The row of an event.
    pub fn of(event: &Event) -> Self {
        let delivery = &event.delivery;
        let state = delivery.state();
        Self {
            id: event.id.as_str().to_owned(),
            shop: event.shop_id.as_str().to_owned(),
            kind: event.event_type.as_str(),
            payment: event.payment_id.as_str().to_owned(),
            state: state.as_str(),
            attempts: delivery.attempts,
            last_status: delivery.last_status,
            last_error: delivery.last_error.clone(),
            next_attempt: (state == DeliveryState::Pending
                && delivery.next_attempt_at_ms < PARKED_UNTIL_MS)
                .then(|| when_ms(delivery.next_attempt_at_ms)),
            delivered: delivery.delivered_at_ms.map(when_ms),
            created: when_ms(event.created_at_ms),
            resend_key: format!("resend-{}-{}", event.id, delivery.attempts),
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

/// The payment page.
#[derive(Template)]
#[template(path = "console/payment.html")]
struct PaymentPage {
    page: Chrome,
    id: String,
    shop: String,
    status: &'static str,
    amount: String,
    refunded: String,
    reference: String,
    provider_id: Option<String>,
    decline_code: Option<String>,
    created: String,
    refunds: Vec<RefundRow>,
    timeline: Vec<TimelineEntry>,
    keys: Vec<KeyView>,
    events: Vec<EventRow>,
    refund_key: String,
    refundable: bool,
    cancel_key: String,
    cancelable: bool,
    back: String,
}

fn not_found() -> ConsoleError {
    ConsoleError::NotFound("no such payment".to_owned())
}

/// The payment of a path id, any shop's.
pub(super) async fn payment_of(state: &Console, id: &str) -> Result<Payment, ConsoleError> {
    let id = PaymentId::parse(id).map_err(|_| not_found())?;
    state.store().any_payment(&id).await?.ok_or_else(not_found)
}

/// A fresh refund key for the form.
fn refund_key(payment: &PaymentId) -> String {
    let mut bytes = [0_u8; 8];
    rand::rng().fill_bytes(&mut bytes);
    format!("console-refund-{payment}-{}", hex::encode(bytes))
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
    html(&PaymentPage {
        page: Chrome::new(&operator, format!("Payment {}", payment.id), "payments"),
        id: payment.id.as_str().to_owned(),
        shop: payment.shop_id.as_str().to_owned(),
        status: payment.status.as_str(),
        amount: money(payment.amount),
        refunded: format!("{} {}", refunded.value, refunded.currency),
        reference: payment.reference.as_str().to_owned(),
        provider_id: payment.provider_payment_id.clone(),
        decline_code: payment.decline_code.clone(),
        created: when(payment.created_at),
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
        refund_key: refund_key(&payment.id),
        cancel_key: super::cancel::cancel_key(&payment.id),
        cancelable: payment.status == chargeonce_core::PaymentStatus::Pending,
        refundable: payment.status == chargeonce_core::PaymentStatus::Succeeded
            && payment.refunded_minor < payment.amount.minor_units(),
        back: format!("/console/payments/{}", payment.id),
    })
}

/// The refund form.
#[derive(Debug, Deserialize)]
pub struct RefundForm {
    csrf: Option<String>,
    key: Option<String>,
    amount: Option<String>,
    confirm: Option<String>,
}

/// The confirmation step of a refund.
#[derive(Template)]
#[template(path = "console/confirm_refund.html")]
struct ConfirmPage {
    page: Chrome,
    id: String,
    shop: String,
    reference: String,
    what: String,
    key: String,
    amount: String,
}

/// The engine's answer to a console action, read whole.
pub(super) struct Answered {
    /// Its HTTP status.
    pub(super) status: u16,
    /// A replay of the key's first answer.
    pub(super) replayed: bool,
    /// Its JSON body (`Null` when it has none).
    pub(super) body: Value,
}

impl Answered {
    /// The detail of a problem answer (or the resource's status).
    pub(super) fn detail(&self) -> String {
        self.body["detail"]
            .as_str()
            .map(str::to_owned)
            .or_else(|| self.body["status"].as_str().map(|s| format!("it is {s}")))
            .unwrap_or_default()
    }
}

/// Runs a console action through the same pipeline as the shop's API
/// request with this key, path and body would (so the same fingerprint:
/// a later API request with the key agrees with it); a claim refused
/// answers its problem.
pub(super) async fn through_engine(
    state: &Console,
    payment: &Payment,
    key: &IdempotencyKey,
    path: &str,
    body: &Value,
    command: Command,
) -> Answered {
    let response = match pipeline::claim(payment.shop_id.clone(), key.clone(), path, body) {
        Ok(claim) => match pipeline::answer(state, claim, command, &HeaderMap::new()).await {
            Ok(response) => response,
            Err(problem) => problem.into_response(),
        },
        Err(problem) => problem.into_response(),
    };
    let replayed = response
        .headers()
        .get("idempotent-replayed")
        .is_some_and(|v| v == "true");
    let status = response.status().as_u16();
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap_or_default();
    Answered {
        status,
        replayed,
        body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    }
}

/// `POST /console/payments/{id}/refund`: without `confirm=yes`, the
/// confirmation page; with it, the refund through the engine, then 303 back
/// to the payment with what happened.
pub async fn refund(
    State(state): State<Console>,
    operator: Operator,
    PathId(id): PathId,
    Form(form): Form<RefundForm>,
) -> Result<Response, ConsoleError> {
    operator.check_csrf(form.csrf.as_deref())?;
    let payment = payment_of(&state, &id).await?;
    let back = format!("/console/payments/{}", payment.id);
    let flash = |message: String| {
        state.console.sessions.flash(&operator.session, message);
        Ok(Redirect::to(&back).into_response())
    };
    let key = match form.key.as_deref().map(str::trim).map(IdempotencyKey::new) {
        Some(Ok(key)) => key,
        _ => return flash("the refund form had no valid key: reload the page".to_owned()),
    };
    let amount = match super::given(&form.amount) {
        None => None,
        Some(value) => match Money::parse(value, payment.amount.currency().code()) {
            Ok(amount) => Some(amount),
            Err(e) => return flash(format!("not refunded: {e}")),
        },
    };
    if form.confirm.as_deref() != Some("yes") {
        let what = match amount {
            Some(amount) => money(amount),
            None => "everything not refunded yet".to_owned(),
        };
        return html(&ConfirmPage {
            page: Chrome::new(&operator, "Confirm the refund", "payments"),
            id: payment.id.as_str().to_owned(),
            shop: payment.shop_id.as_str().to_owned(),
            reference: payment.reference.as_str().to_owned(),
            what,
            key: key.as_str().to_owned(),
            amount: amount.map(|a| a.to_decimal_string()).unwrap_or_default(),
        });
    }
    // The body a shop would send for this refund, so the fingerprint is
    // the one its API request with this key would have.
    let body = match amount {
        Some(amount) => json!({"amount": {
            "value": amount.to_decimal_string(),
            "currency": amount.currency().code(),
        }}),
        None => json!({}),
    };
    let path = format!("/v1/payments/{}/refunds", payment.id);
    let command = Command::Refund {
        payment_id: payment.id.clone(),
        amount,
    };
    let answered = through_engine(&state, &payment, &key, &path, &body, command).await;
    let (status, replayed, detail) = (answered.status, answered.replayed, answered.detail());
    tracing::info!(payment = %payment.id, key = key.as_str(), status, "console refund");
    let message = match status {
        201 if replayed => format!("already refunded under key {} (201)", key.as_str()),
        201 => format!("refunded (201, key {})", key.as_str()),
        202 => format!(
            "refund pending at the acquirer (202, key {}): it will be settled",
            key.as_str()
        ),
        _ => format!("not refunded ({status}): {detail}"),
    };
    flash(message)
}

#[cfg(test)]
mod tests {
    use chargeonce_core::history::RepeatCounts;
    use chargeonce_core::{
        AcquirerKey, CardToken, IdempotencyKey, PaymentStatus, Reference, RefundId, ShopId,
    };
    use time::OffsetDateTime;

    use super::*;

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
            refund_key: refund_key(&payment.id),
            refundable: true,
            cancel_key: super::super::cancel::cancel_key(&payment.id),
            cancelable: false,
            back: "/console/payments/x".into(),
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
