//! Phase 3 of a payment: the fenced write of its answer with the settlement
//! of its payment and that settlement's merchant event.

use std::time::Duration;

use chargeonce_core::events::NewEvent;
use chargeonce_core::history::{AcquirerAttempt, HistoryEvent, SettledBy, answered_events};
use chargeonce_core::{FinishOutcome, Lease, Payment, Settlement, StoreError, StoredResponse};
use chargeonce_sqlite::Write;

use super::SqliteStore;
use super::history::{HistoryOf, history_of, record_all};
use super::keys::finish_key;
use super::outbox::insert_event;
use super::payments::{SettleBy, settle_row};

/// Stores the final response, settling the payment when a settlement is
/// given; one write, so it is all or nothing, its history entries (the
/// acquirer calls, the answer, the settlement) included.
pub(super) async fn finish(
    store: &SqliteStore,
    lease: &Lease,
    settlement: Option<(&Payment, &Settlement)>,
    response: &StoredResponse,
    ttl: Duration,
    attempts: &[AcquirerAttempt],
) -> Result<FinishOutcome, StoreError> {
    let lease = lease.clone();
    let settlement = settlement.map(|(payment, s)| (payment.clone(), s.clone()));
    let response = response.clone();
    let attempts = attempts.to_vec();
    let instance = store.instance.clone();
    store
        .write(move |conn| {
            if !finish_key(conn, &lease, &response, ttl)? {
                return Ok(Write::Rollback(FinishOutcome::LeaseLost));
            }
            if let Some((payment, settlement)) = &settlement
                && !settle_row(
                    conn,
                    SettleBy::Id,
                    payment.id.as_str(),
                    &lease.shop_id,
                    settlement,
                )?
            {
                return Ok(Write::Rollback(FinishOutcome::PaymentAlreadySettled));
            }
            // The entries in the order of the story: the calls, the answer,
            // the settlement, in one row. A settlement names the key's
            // payment: no read of the key row on the common path.
            let target = match &settlement {
                Some((payment, _)) => Some(HistoryOf {
                    payment_id: payment.id.as_str().to_owned(),
                    refund_id: None,
                }),
                None => history_of(conn, lease.shop_id.as_str(), lease.key.as_str())?,
            };
            if let Some(target) = target {
                let mut events = answered_events(&lease, &response, &attempts, &instance);
                if let Some((_, settlement)) = &settlement {
                    events.push(HistoryEvent::Settled {
                        status: settlement.status,
                        by: SettledBy::Request {
                            key: lease.key.as_str().to_owned(),
                        },
                    });
                }
                record_all(
                    conn,
                    &target.payment_id,
                    target.refund_id.as_deref(),
                    &events,
                )?;
            }
            if let Some((payment, settlement)) = settlement {
                // A payment's order and amount never change: the event is
                // built from the caller's payment, settled.
                insert_event(
                    conn,
                    NewEvent::payment_settled(&payment.settled(&settlement)),
                )?;
            }
            Ok(Write::Commit(FinishOutcome::Stored))
        })
        .await
}
