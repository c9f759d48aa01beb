//! Phase 3 of a payment: the fenced write of its answer with the settlement
//! of its payment and that settlement's merchant event.

use chargeonce_core::history::AcquirerAttempt;
use std::time::Duration;

use chargeonce_core::events::NewEvent;
use chargeonce_core::{FinishOutcome, Lease, Payment, Settlement, StoreError, StoredResponse};
use chargeonce_sqlite::Write;

use super::SqliteStore;
use super::keys::finish_key;
use super::outbox::insert_event;
use super::payments::{SettleBy, settle_row};

/// Stores the final response, settling the payment when a settlement is
/// given; one write, so it is all or nothing.
pub(super) async fn finish(
    store: &SqliteStore,
    lease: &Lease,
    settlement: Option<(&Payment, &Settlement)>,
    response: &StoredResponse,
    ttl: Duration,
    _attempts: &[AcquirerAttempt],
) -> Result<FinishOutcome, StoreError> {
    let lease = lease.clone();
    let settlement = settlement.map(|(payment, s)| (payment.clone(), s.clone()));
    let response = response.clone();
    store
        .write(move |conn| {
            if !finish_key(conn, &lease, &response, ttl)? {
                return Ok(Write::Rollback(FinishOutcome::LeaseLost));
            }
            if let Some((payment, settlement)) = settlement {
                if !settle_row(
                    conn,
                    SettleBy::Id,
                    payment.id.as_str(),
                    &lease.shop_id,
                    &settlement,
                )? {
                    return Ok(Write::Rollback(FinishOutcome::PaymentAlreadySettled));
                }
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
