//! Payments settled outside their own request: by the reconciler
//! (`settle_payment`) and by the acquirer's webhooks (`record_event`, which
//! also records the event id, once), each a conditional `pending` -> final
//! transition with its merchant event.

use chargeonce_core::events::NewEvent;
use chargeonce_core::history::{HistoryEvent, SettledBy};
use chargeonce_core::{
    EventRecorded, InboundEvent, Payment, PaymentId, SettleOutcome, Settlement, ShopId, StoreError,
};
use chargeonce_sqlite::Write;
use chargeonce_sqlite::rusqlite::params;

use super::history::record;
use super::outbox::insert_event;
use super::payments::{SettleBy, payment_in, settle_where};
use super::{SqliteStore, now_ms, one};
use crate::codec::event_result;
use crate::columns::payment_columns;
use crate::rows::PaymentRow;

/// Settles a pending payment with an answer learnt outside its request
/// (the reconciler), with its merchant event.
pub(super) async fn settle_payment(
    store: &SqliteStore,
    shop_id: &ShopId,
    id: &PaymentId,
    settlement: &Settlement,
) -> Result<SettleOutcome, StoreError> {
    let (shop_id, id, settlement) = (shop_id.clone(), id.clone(), settlement.clone());
    store
        .write(move |conn| {
            let outcome =
                match settle_where(conn, SettleBy::Id, id.as_str(), &shop_id, &settlement)? {
                    Some(payment) => {
                        record(
                            conn,
                            payment.id.as_str(),
                            None,
                            &HistoryEvent::Settled {
                                status: payment.status,
                                by: SettledBy::Reconciler,
                            },
                        )?;
                        insert_event(conn, NewEvent::payment_settled(&payment))?;
                        SettleOutcome::Settled(payment)
                    }
                    None => match payment_in(conn, &shop_id, &id)? {
                        Some(payment) => SettleOutcome::AlreadyFinal(payment),
                        None => SettleOutcome::NotFound,
                    },
                };
            Ok(Write::Commit(outcome))
        })
        .await
}

/// Records an acquirer event once and applies its settlement, if any.
pub(super) async fn record_event(
    store: &SqliteStore,
    event: &InboundEvent,
) -> Result<EventRecorded, StoreError> {
    let event = event.clone();
    store
        .write_new(move |conn| {
            let inserted = conn
                .prepare_cached(concat!(
                    "INSERT INTO acquirer_events \
                     (event_id, event_type, acquirer_key, shop_id, result, received_at) \
                 VALUES (?1, ?2, ?3, ?4, 'unchanged', ",
                    now_ms!(),
                    ") ON CONFLICT (event_id) DO NOTHING"
                ))?
                .execute(params![
                    event.event_id,
                    event.kind.as_str(),
                    event.acquirer_key.as_str(),
                    event.shop_id.as_str(),
                ])?;
            if inserted == 0 {
                return Ok(Write::Rollback(EventRecorded::Duplicate));
            }
            let settled = match &event.settlement {
                Some(settlement) => settle_where(
                    conn,
                    SettleBy::AcquirerKey,
                    event.acquirer_key.as_str(),
                    &event.shop_id,
                    settlement,
                )?,
                None => None,
            };
            let recorded = match settled {
                Some(payment) => {
                    record(
                        conn,
                        payment.id.as_str(),
                        None,
                        &HistoryEvent::Settled {
                            status: payment.status,
                            by: SettledBy::Webhook {
                                event_id: event.event_id.clone(),
                            },
                        },
                    )?;
                    insert_event(conn, NewEvent::payment_settled(&payment))?;
                    EventRecorded::Settled(payment)
                }
                None => {
                    let found: Option<Payment> = one::<PaymentRow, _>(
                        conn,
                        concat!(
                            "SELECT ",
                            payment_columns!(),
                            " FROM payments WHERE acquirer_key = ?1 AND shop_id = ?2"
                        ),
                        params![event.acquirer_key.as_str(), event.shop_id.as_str()],
                    )?;
                    match found {
                        Some(payment) => {
                            record(
                                conn,
                                payment.id.as_str(),
                                None,
                                &HistoryEvent::WebhookReceived {
                                    event_id: event.event_id.clone(),
                                    kind: event.kind.as_str().to_owned(),
                                },
                            )?;
                            EventRecorded::Unchanged(payment)
                        }
                        None => EventRecorded::UnknownPayment,
                    }
                }
            };
            conn.prepare_cached("UPDATE acquirer_events SET result = ?2 WHERE event_id = ?1")?
                .execute(params![event.event_id, event_result(&recorded)])?;
            Ok(Write::Commit(recorded))
        })
        .await
}
