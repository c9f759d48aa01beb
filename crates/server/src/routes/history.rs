//! `GET /v1/payments/{id}/history`: everything that happened to one of the
//! shop's payments (and its refunds), oldest first, with its keys' repeat
//! counts. The operator console renders the same entries as a timeline.

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use chargeonce_core::history::{HistoryEntry, HistoryEvent, RepeatCounts, SettledBy, Tally};
use chargeonce_core::store::KeyRepeats;
use chargeonce_core::{
    AcquirerCall, AcquirerOutcomeKind, Currency, IdempotencyKey, Money, Payment, PaymentId,
    PaymentStatus, RecoveryPoint, RefundStatus, ShopId, Store,
};
use chargeonce_wire as wire;

use crate::AppState;
use crate::extract::{AuthenticatedShop, PathId};
use crate::problem::Problem;
use crate::respond::store_problem;
use crate::routes::payments::not_found;

/// One payment's history, oldest first, and the repeats of its keys.
#[utoipa::path(
    get,
    path = "/v1/payments/{id}/history",
    operation_id = "getPaymentHistory",
    tag = "payments",
    summary = "Everything that happened to a payment, oldest first",
    description = "Every entry of the payment's history (and its refunds'), oldest first: its claim, take-overs, each acquirer call and its outcome, the answer stored, the settlement and who made it, refunds, merchant event deliveries, reconciliation findings, expired keys. Written by the store in the same transaction as each change it records. `keys` has the repeat counts (replays, 409s, 422s) of the payment's keys that still exist.",
    security(("shop_basic" = [])),
    params(("id" = String, Path, description = "The payment's id (`pay_...`).", example = "pay_01a2297968b375bcb36eb8e661248216")),
    responses(
        (status = 200, description = "The history.", body = wire::PaymentHistory),
        (status = 404, description = "`not_found`: no such payment for this shop."),
    ),
)]
pub async fn get(
    State(state): State<AppState>,
    AuthenticatedShop(shop_id): AuthenticatedShop,
    PathId(id): PathId,
) -> Result<Response, Problem> {
    let id = PaymentId::parse(&id).map_err(|_| not_found())?;
    let payment = state
        .store
        .payment(&shop_id, &id)
        .await
        .map_err(store_problem)?
        .ok_or_else(not_found)?;
    let (entries, keys) = read(state.store.as_ref(), Some(&shop_id), &payment)
        .await
        .map_err(store_problem)?;
    Ok(Json(view(&payment, &entries, &keys)).into_response())
}

/// The keys a payment's history names (its first key first, then in the
/// order the entries name them, each once): claims, links, take-overs and
/// refund reservations.
pub fn keys_of(payment: &Payment, entries: &[HistoryEntry]) -> Vec<IdempotencyKey> {
    let mut keys = vec![payment.idempotency_key.clone()];
    for entry in entries {
        let named = match &entry.event {
            HistoryEvent::Claimed { key, .. }
            | HistoryEvent::Linked { key, .. }
            | HistoryEvent::TakenOver { key, .. }
            | HistoryEvent::RefundReserved { key, .. } => key,
            _ => continue,
        };
        if let Ok(key) = IdempotencyKey::new(named.clone())
            && !keys.contains(&key)
        {
            keys.push(key);
        }
    }
    keys
}

/// A payment's history and its keys' repeats (`shop_id` restricts the
/// history to that shop's payment; the console reads any).
pub async fn read(
    store: &dyn Store,
    shop_id: Option<&ShopId>,
    payment: &Payment,
) -> Result<(Vec<HistoryEntry>, Vec<KeyRepeats>), chargeonce_core::StoreError> {
    let entries = store.payment_history(shop_id, &payment.id).await?;
    let keys = keys_of(payment, &entries);
    let repeats = store.key_repeats(&payment.shop_id, &keys).await?;
    Ok((entries, repeats))
}

fn tally(tally: &Tally) -> wire::HistoryTally {
    wire::HistoryTally {
        count: tally.count,
        last_at: tally.last_at.map(crate::render::rfc3339),
    }
}

fn payment_status(status: PaymentStatus) -> wire::PaymentStatus {
    match status {
        PaymentStatus::Pending => wire::PaymentStatus::Pending,
        PaymentStatus::Succeeded => wire::PaymentStatus::Succeeded,
        PaymentStatus::Declined => wire::PaymentStatus::Declined,
        PaymentStatus::Canceled => wire::PaymentStatus::Canceled,
    }
}

fn recovery_point(point: RecoveryPoint) -> wire::KeyRecoveryPoint {
    match point {
        RecoveryPoint::PaymentCreated => wire::KeyRecoveryPoint::PaymentCreated,
        RecoveryPoint::OrderAlreadyPaid => wire::KeyRecoveryPoint::OrderAlreadyPaid,
        RecoveryPoint::RefundCreated => wire::KeyRecoveryPoint::RefundCreated,
        RecoveryPoint::CancelRequested => wire::KeyRecoveryPoint::CancelRequested,
        RecoveryPoint::Finished => wire::KeyRecoveryPoint::Finished,
    }
}

/// An amount in minor units of a currency given by its code, as a decimal
/// string (the raw minor units if the code is not one we know, which a
/// stored entry cannot have).
fn amount(minor: i64, currency: &str) -> wire::Amount {
    let value = Currency::from_code(currency)
        .ok()
        .and_then(|c| Money::from_minor(minor, c).ok())
        .map(|m| m.to_decimal_string())
        .unwrap_or_else(|| minor.to_string());
    wire::Amount::new(value, currency)
}

/// One event as the API shows it.
pub fn event_view(event: &HistoryEvent) -> wire::HistoryEvent {
    match event.clone() {
        HistoryEvent::Claimed { key, instance } => wire::HistoryEvent::Claimed { key, instance },
        HistoryEvent::Linked { key, instance } => wire::HistoryEvent::Linked { key, instance },
        HistoryEvent::TakenOver {
            key,
            instance,
            recovery_point: point,
        } => wire::HistoryEvent::TakenOver {
            key,
            instance,
            recovery_point: recovery_point(point),
        },
        HistoryEvent::AcquirerCall {
            call,
            outcome,
            latency_ms,
            acquirer_key,
            instance,
            // The reason is the acquirer client's own error text (it may name
            // the acquirer's URL): operators read it in the console, shops
            // get the outcome only.
            reason: _,
        } => wire::HistoryEvent::AcquirerCall {
            call: match call {
                AcquirerCall::Charge => wire::HistoryAcquirerCall::Charge,
                AcquirerCall::Lookup => wire::HistoryAcquirerCall::Lookup,
                AcquirerCall::Refund => wire::HistoryAcquirerCall::Refund,
            },
            outcome: match outcome {
                AcquirerOutcomeKind::Succeeded => wire::HistoryCallOutcome::Succeeded,
                AcquirerOutcomeKind::Declined => wire::HistoryCallOutcome::Declined,
                AcquirerOutcomeKind::Refused => wire::HistoryCallOutcome::Refused,
                AcquirerOutcomeKind::NotFound => wire::HistoryCallOutcome::NotFound,
                AcquirerOutcomeKind::Unknown => wire::HistoryCallOutcome::Unknown,
                AcquirerOutcomeKind::NotSent => wire::HistoryCallOutcome::NotSent,
            },
            latency_ms,
            acquirer_key,
            instance,
            reason: None,
        },
        HistoryEvent::Answered { key, status } => wire::HistoryEvent::Answered { key, status },
        HistoryEvent::CancelRequested { key, instance } => {
            wire::HistoryEvent::CancelRequested { key, instance }
        }
        HistoryEvent::Settled { status, by } => {
            let (by, key, event_id) = match by {
                SettledBy::Request { key } => (wire::HistorySettledBy::Request, Some(key), None),
                SettledBy::Webhook { event_id } => {
                    (wire::HistorySettledBy::Webhook, None, Some(event_id))
                }
                SettledBy::Reconciler => (wire::HistorySettledBy::Reconciler, None, None),
            };
            wire::HistoryEvent::Settled {
                status: payment_status(status),
                by,
                key,
                event_id,
            }
        }
        HistoryEvent::WebhookReceived { event_id, kind } => {
            wire::HistoryEvent::WebhookReceived { event_id, kind }
        }
        HistoryEvent::RefundReserved {
            key,
            amount_minor,
            currency,
            instance,
        } => wire::HistoryEvent::RefundReserved {
            key,
            amount: amount(amount_minor, &currency),
            instance,
        },
        HistoryEvent::RefundEnded { status } => wire::HistoryEvent::RefundEnded {
            status: match status {
                RefundStatus::Pending => wire::RefundStatus::Pending,
                RefundStatus::Succeeded => wire::RefundStatus::Succeeded,
                RefundStatus::Failed => wire::RefundStatus::Failed,
            },
        },
        HistoryEvent::EventAttempt {
            event_id,
            event_type,
            attempt,
            result,
            status,
        } => wire::HistoryEvent::EventAttempt {
            event_id,
            event_type,
            attempt,
            result,
            status,
        },
        HistoryEvent::EventResent { event_id } => wire::HistoryEvent::EventResent { event_id },
        HistoryEvent::KeyExpired { key, repeats } => {
            let RepeatCounts {
                replays,
                conflicts,
                mismatches,
            } = repeats;
            wire::HistoryEvent::KeyExpired {
                key,
                replays: tally(&replays),
                conflicts: tally(&conflicts),
                mismatches: tally(&mismatches),
            }
        }
        HistoryEvent::Finding { finding_id, kind } => {
            wire::HistoryEvent::Finding { finding_id, kind }
        }
        HistoryEvent::FindingResolved { finding_id, how } => {
            wire::HistoryEvent::FindingResolved { finding_id, how }
        }
    }
}

/// A key's repeats as the API shows them.
pub fn key_view(key: &KeyRepeats) -> wire::HistoryKey {
    wire::HistoryKey {
        key: key.key.as_str().to_owned(),
        replays: tally(&key.repeats.replays),
        conflicts: tally(&key.repeats.conflicts),
        mismatches: tally(&key.repeats.mismatches),
    }
}

/// The history as the API shows it.
pub fn view(
    payment: &Payment,
    entries: &[HistoryEntry],
    keys: &[KeyRepeats],
) -> wire::PaymentHistory {
    wire::PaymentHistory {
        object: wire::PaymentHistoryObject::PaymentHistory,
        payment_id: payment.id.as_str().to_owned(),
        entries: entries
            .iter()
            .map(|entry| wire::HistoryEntry {
                seq: entry.seq,
                at: crate::render::rfc3339(entry.at),
                refund_id: entry.refund_id.as_ref().map(|id| id.as_str().to_owned()),
                event: event_view(&entry.event),
            })
            .collect(),
        keys: keys.iter().map(key_view).collect(),
    }
}
