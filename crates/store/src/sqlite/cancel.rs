//! A cancel's claim (its key, naming the payment, and the request in the
//! payment's history) and the request recorded alone (the completer's
//! give-up, or a cancel resumed after a crash).

use chargeonce_core::history::HistoryEvent;
use chargeonce_core::{
    CancelClaim, ClaimRequest, IdempotencyKey, KeyTiming, LeaseToken, Payment, PaymentId,
    PaymentStatus, RecoveryPoint, ShopId, StoreError,
};
use chargeonce_sqlite::Write;
use chargeonce_sqlite::rusqlite::Connection;

use super::history::record;
use super::keys::{KeyTarget, count_repeat, insert_key};
use super::payments::payment_in;
use super::{Result, SqliteStore};
use crate::codec::acquired;

/// A cancel's claim, one write: the key row and, for a pending payment,
/// the request in its history (the writer is the only one: the payment
/// cannot settle between the read and the write).
pub(super) async fn claim_cancel(
    store: &SqliteStore,
    claim: &ClaimRequest,
    payment_id: &PaymentId,
    timing: KeyTiming,
) -> Result<CancelClaim, StoreError> {
    let (claim, payment_id) = (claim.clone(), payment_id.clone());
    let holder = store.instance.clone();
    store
        .write_new(move |conn| {
            let exists = |conn: &Connection| {
                count_repeat(conn, &claim.shop_id, &claim.key, &claim.fingerprint)
            };
            let Some(payment) = payment_in(conn, &claim.shop_id, &payment_id)? else {
                // A key reused for another payment's cancel is a mismatch,
                // whether or not that payment exists.
                return Ok(Write::Commit(match exists(conn)? {
                    Some(record) => CancelClaim::Exists(record),
                    None => CancelClaim::NoPayment,
                }));
            };
            let token = LeaseToken::generate();
            let target = KeyTarget {
                recovery_point: RecoveryPoint::CancelRequested,
                payment_id: &payment_id,
                refund_id: None,
                holder: &holder,
                capture_id: None,
            };
            if !insert_key(conn, &claim, target, token, timing)? {
                let record = exists(conn)?.ok_or_else(|| {
                    StoreError::other(format!("key {} conflicted but cannot be read", claim.key))
                })?;
                return Ok(Write::Commit(CancelClaim::Exists(record)));
            }
            if payment.status == PaymentStatus::Pending {
                record_request(conn, &payment_id, Some(&claim.key), &holder)?;
            }
            Ok(Write::Commit(CancelClaim::Acquired(acquired(
                &claim,
                token,
                RecoveryPoint::CancelRequested,
                payment,
                None,
            ))))
        })
        .await
}

/// Records a cancel request on a pending payment; returns the payment.
pub(super) async fn request_cancel(
    store: &SqliteStore,
    shop_id: &ShopId,
    payment_id: &PaymentId,
    key: Option<&IdempotencyKey>,
) -> Result<Option<Payment>, StoreError> {
    let (shop_id, payment_id, key) = (shop_id.clone(), payment_id.clone(), key.cloned());
    let holder = store.instance.clone();
    store
        .write(move |conn| {
            let payment = payment_in(conn, &shop_id, &payment_id)?;
            if let Some(payment) = &payment
                && payment.status == PaymentStatus::Pending
            {
                record_request(conn, &payment_id, key.as_ref(), &holder)?;
            }
            Ok(Write::Commit(payment))
        })
        .await
}

fn record_request(
    conn: &Connection,
    payment_id: &PaymentId,
    key: Option<&IdempotencyKey>,
    holder: &str,
) -> Result<()> {
    let requested = HistoryEvent::CancelRequested {
        key: key.map(|key| key.as_str().to_owned()),
        instance: holder.to_owned(),
    };
    record(conn, payment_id.as_str(), None, &requested)
}
