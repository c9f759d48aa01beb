//! `GET /v1/payments/{id}/history`: everything that happened to one of the
//! shop's payments (and its refunds), oldest first, with its keys' repeat
//! counts. The operator console renders the same entries as a timeline.

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use chargeonce_core::history::{HistoryEntry, HistoryEvent};
use chargeonce_core::store::KeyRepeats;
use chargeonce_core::{IdempotencyKey, Payment, PaymentId, ShopId, Store};
use chargeonce_wire as wire;

use crate::AppState;
use crate::extract::{AuthenticatedShop, PathId};
use crate::problem::Problem;
use crate::render;
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
    Ok(Json(render::history::view(&payment, &entries, &keys)).into_response())
}

/// The keys a payment's history names (its first key first, then in the
/// order the entries name them, each once): claims, links, take-overs,
/// refund and capture reservations and voids.
pub fn keys_of(payment: &Payment, entries: &[HistoryEntry]) -> Vec<IdempotencyKey> {
    let mut keys = vec![payment.idempotency_key.clone()];
    for entry in entries {
        let named = match &entry.event {
            HistoryEvent::Claimed { key, .. }
            | HistoryEvent::Linked { key, .. }
            | HistoryEvent::TakenOver { key, .. }
            | HistoryEvent::RefundReserved { key, .. }
            | HistoryEvent::CaptureReserved { key, .. }
            | HistoryEvent::ReleaseRequested { key: Some(key), .. } => key,
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
