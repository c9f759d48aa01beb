//! A cancel's claim (its key, naming the payment, and the request in the
//! payment's history) and the request recorded alone (the completer's
//! give-up, or a cancel resumed after a crash).

use chargeonce_core::history::HistoryEvent;
use chargeonce_core::{
    CancelClaim, ClaimRequest, IdempotencyKey, KeyTiming, LeaseToken, Payment, PaymentId,
    PaymentStatus, RecoveryPoint, ShopId, StoreError,
};
use sqlx::{Postgres, Transaction};

use super::CLAIM_ATTEMPTS;
use super::history::{Entries, record};
use super::keys::{KeyTarget, count_repeat, insert_key};
use super::{PgStore, store_error};
use crate::codec::acquired;
use crate::columns::payment_columns;
use crate::rows::PaymentRow;

/// A cancel's claim, one transaction: the key row and, for a pending
/// payment, the request in its history. The payment row is read `FOR
/// SHARE`, so a settle of it waits for this commit (or this read for
/// the settle's): the request is recorded only on a payment still pending.
pub(super) async fn claim_cancel(
    store: &PgStore,
    claim: &ClaimRequest,
    payment_id: &PaymentId,
    timing: KeyTiming,
) -> Result<CancelClaim, StoreError> {
    for _ in 0..CLAIM_ATTEMPTS {
        let token = LeaseToken::generate();
        let mut tx = store.conns.begin().await.map_err(store_error)?;
        let Some(payment) = locked_payment(&mut tx, &claim.shop_id, payment_id).await? else {
            tx.rollback().await.map_err(store_error)?;
            // A key reused for another payment's cancel is a mismatch,
            // whether or not that payment exists.
            return Ok(match count_repeat(store, claim).await? {
                Some(record) => CancelClaim::Exists(record),
                None => CancelClaim::NoPayment,
            });
        };
        let target = KeyTarget {
            recovery_point: RecoveryPoint::CancelRequested,
            payment_id,
            refund_id: None,
            holder: &store.instance,
            capture_id: None,
        };
        if !insert_key(&mut tx, claim, target, token, timing).await? {
            tx.rollback().await.map_err(store_error)?;
            // Re-read in a new statement: its snapshot includes the winner's commit.
            if let Some(record) = count_repeat(store, claim).await? {
                return Ok(CancelClaim::Exists(record));
            }
            continue;
        }
        if payment.status == PaymentStatus::Pending {
            record_request(&mut tx, store, &claim.shop_id, payment_id, Some(&claim.key)).await?;
        }
        tx.commit().await.map_err(store_error)?;
        return Ok(CancelClaim::Acquired(acquired(
            claim,
            token,
            RecoveryPoint::CancelRequested,
            payment,
            None,
        )));
    }
    Err(StoreError::other(format!(
        "claim of key {} did not settle after {CLAIM_ATTEMPTS} attempts",
        claim.key
    )))
}

/// Records a cancel request on a pending payment; returns the payment.
pub(super) async fn request_cancel(
    store: &PgStore,
    shop_id: &ShopId,
    payment_id: &PaymentId,
    key: Option<&IdempotencyKey>,
) -> Result<Option<Payment>, StoreError> {
    let mut tx = store.conns.begin().await.map_err(store_error)?;
    let payment = locked_payment(&mut tx, shop_id, payment_id).await?;
    if let Some(payment) = &payment
        && payment.status == PaymentStatus::Pending
    {
        record_request(&mut tx, store, shop_id, payment_id, key).await?;
    }
    tx.commit().await.map_err(store_error)?;
    Ok(payment)
}

/// The payment, its row locked `FOR SHARE` until the transaction ends.
async fn locked_payment(
    tx: &mut Transaction<'static, Postgres>,
    shop_id: &ShopId,
    payment_id: &PaymentId,
) -> Result<Option<Payment>, StoreError> {
    let row: Option<PaymentRow> = sqlx::query_as(concat!(
        "SELECT ",
        payment_columns!(),
        " FROM payments WHERE shop_id = $1 AND id = $2 FOR SHARE"
    ))
    .bind(shop_id.as_str())
    .bind(payment_id.as_str())
    .fetch_optional(&mut **tx)
    .await
    .map_err(store_error)?;
    row.map(Payment::try_from).transpose()
}

async fn record_request(
    tx: &mut Transaction<'static, Postgres>,
    store: &PgStore,
    shop_id: &ShopId,
    payment_id: &PaymentId,
    key: Option<&IdempotencyKey>,
) -> Result<(), StoreError> {
    let requested = HistoryEvent::CancelRequested {
        key: key.map(|key| key.as_str().to_owned()),
        instance: store.instance.to_string(),
    };
    record(
        &mut **tx,
        shop_id.as_str(),
        payment_id.as_str(),
        None,
        &Entries::of([requested]),
    )
    .await
}
