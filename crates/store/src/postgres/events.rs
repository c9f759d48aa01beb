//! Payments settled outside their own request: by the reconciler
//! (`settle_payment`) and by the acquirer's webhooks (`record_event`, which
//! also records the event id, once), each a conditional `pending` -> final
//! transition with its merchant event.

use chargeonce_core::events::NewEvent;
use chargeonce_core::history::{HistoryEvent, SettledBy};
use chargeonce_core::store::Payments;
use chargeonce_core::{
    EventRecorded, InboundEvent, Payment, PaymentId, SettleOutcome, Settlement, ShopId, StoreError,
};

use super::history::{Entries, record};
use super::outbox::insert_event;
use super::{PgStore, store_error};
use crate::codec::event_result;
use crate::columns::payment_columns;
use crate::rows::PaymentRow;

/// The reconciler's settle of one pending payment, picked by its shop (`$1`)
/// and id (`$2`); `$3`, `$4`, `$5` are the settlement's status, provider id
/// and decline code. It updates the row (and the order its status frees,
/// `live_reference`: migration 0027) and takes the payment off the
/// pending queue (migration 0009: the queue is a table, so the row is updated
/// in place), and returns the settled payment's columns.
const SETTLE_BY_ID: &str = concat!(
    "WITH settled AS ( \
         UPDATE payments SET status = $3, provider_payment_id = $4, \
             decline_code = $5, updated_at = now(), \
             live_reference = payment_live_reference($3, hold, captured_minor, reference) \
         WHERE shop_id = $1 AND id = $2 AND status = 'pending' RETURNING ",
    payment_columns!(),
    "), \
     dequeued AS ( \
         DELETE FROM pending_payments q USING settled \
         WHERE q.created_at = settled.created_at AND q.payment_id = settled.id \
           AND q.shop_id = settled.shop_id) \
     SELECT ",
    payment_columns!(),
    " FROM settled"
);

/// Runs [`SETTLE_BY_ID`] in `tx` for the shop's payment `id`. The settled
/// payment's row, or `None` when no pending payment matched.
async fn settle(
    tx: &mut sqlx::Transaction<'static, sqlx::Postgres>,
    shop_id: &ShopId,
    id: &PaymentId,
    settlement: &Settlement,
) -> Result<Option<PaymentRow>, StoreError> {
    sqlx::query_as::<_, PaymentRow>(SETTLE_BY_ID)
        .bind(shop_id.as_str())
        .bind(id.as_str())
        .bind(settlement.status.as_str())
        .bind(&settlement.provider_payment_id)
        .bind(&settlement.decline_code)
        .fetch_optional(&mut **tx)
        .await
        .map_err(store_error)
}

/// Settles a pending payment with an answer learnt outside its request
/// (the reconciler), with its merchant event and its history entry.
pub(super) async fn settle_payment(
    store: &PgStore,
    shop_id: &ShopId,
    id: &PaymentId,
    settlement: &Settlement,
) -> Result<SettleOutcome, StoreError> {
    let mut tx = store.conns.begin().await.map_err(store_error)?;
    let row = settle(&mut tx, shop_id, id, settlement).await?;
    if let Some(row) = row {
        let payment = Payment::try_from(row)?;
        let settled = HistoryEvent::Settled {
            status: payment.status,
            by: SettledBy::Reconciler,
        };
        record(
            &mut *tx,
            payment.shop_id.as_str(),
            payment.id.as_str(),
            None,
            &Entries::of([settled]),
        )
        .await?;
        insert_event(&mut tx, NewEvent::payment_settled(&payment)).await?;
        tx.commit().await.map_err(store_error)?;
        return Ok(SettleOutcome::Settled(payment));
    }
    tx.rollback().await.map_err(store_error)?;
    Ok(match store.payment(shop_id, id).await? {
        Some(payment) => SettleOutcome::AlreadyFinal(payment),
        None => SettleOutcome::NotFound,
    })
}

/// Records an acquirer event once and applies its settlement, if any; the
/// payment's history gets the settlement, or (when the event changed
/// nothing) the event's receipt.
pub(super) async fn record_event(
    store: &PgStore,
    event: &InboundEvent,
) -> Result<EventRecorded, StoreError> {
    let mut tx = store.conns.begin().await.map_err(store_error)?;
    let inserted = sqlx::query(
        "INSERT INTO acquirer_events (event_id, event_type, acquirer_key, shop_id, result) \
         VALUES ($1, $2, $3, $4, 'unchanged') ON CONFLICT (event_id, shop_id) DO NOTHING RETURNING 1",
    )
    .bind(&event.event_id)
    .bind(event.kind.as_str())
    .bind(event.acquirer_key.as_str())
    .bind(event.shop_id.as_str())
    .fetch_optional(&mut *tx)
    .await
    .map_err(store_error)?;
    if inserted.is_none() {
        tx.rollback().await.map_err(store_error)?;
        return Ok(EventRecorded::Duplicate);
    }
    // The payment the event is about is the one its acquirer key names
    // (migration 0025: the key is derived from the payment's id, not
    // stored); a key that names none (a refund's, a void's, a stranger's)
    // settles nothing and is recorded as received by no payment.
    let Some(payment_id) = event.acquirer_key.payment_id() else {
        return finish_recording(tx, event, EventRecorded::UnknownPayment).await;
    };
    let mut settled = None;
    if let Some(settlement) = &event.settlement {
        settled = settle(&mut tx, &event.shop_id, &payment_id, settlement).await?;
    }
    let recorded = match settled {
        Some(row) => {
            let payment = Payment::try_from(row)?;
            let settled = HistoryEvent::Settled {
                status: payment.status,
                by: SettledBy::Webhook {
                    event_id: event.event_id.clone(),
                },
            };
            record(
                &mut *tx,
                payment.shop_id.as_str(),
                payment.id.as_str(),
                None,
                &Entries::of([settled]),
            )
            .await?;
            insert_event(&mut tx, NewEvent::payment_settled(&payment)).await?;
            EventRecorded::Settled(payment)
        }
        None => {
            let row = sqlx::query_as::<_, PaymentRow>(concat!(
                "SELECT ",
                payment_columns!(),
                " FROM payments WHERE id = $1 AND shop_id = $2"
            ))
            .bind(payment_id.as_str())
            .bind(event.shop_id.as_str())
            .fetch_optional(&mut *tx)
            .await
            .map_err(store_error)?;
            match row {
                Some(row) => {
                    let payment = Payment::try_from(row)?;
                    let received = HistoryEvent::WebhookReceived {
                        event_id: event.event_id.clone(),
                        kind: event.kind.as_str().to_owned(),
                    };
                    record(
                        &mut *tx,
                        payment.shop_id.as_str(),
                        payment.id.as_str(),
                        None,
                        &Entries::of([received]),
                    )
                    .await?;
                    EventRecorded::Unchanged(payment)
                }
                None => EventRecorded::UnknownPayment,
            }
        }
    };
    finish_recording(tx, event, recorded).await
}

/// Records what the event did on its row and commits the recording.
async fn finish_recording(
    mut tx: sqlx::Transaction<'static, sqlx::Postgres>,
    event: &InboundEvent,
    recorded: EventRecorded,
) -> Result<EventRecorded, StoreError> {
    sqlx::query("UPDATE acquirer_events SET result = $2 WHERE event_id = $1 AND shop_id = $3")
        .bind(&event.event_id)
        .bind(event_result(&recorded))
        .bind(event.shop_id.as_str())
        .execute(&mut *tx)
        .await
        .map_err(store_error)?;
    tx.commit().await.map_err(store_error)?;
    Ok(recorded)
}
