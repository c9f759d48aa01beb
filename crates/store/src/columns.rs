//! The column lists that both dialects read back alike, written once.
//!
//! They are macros, not `const`s, so that `concat!` can splice them into a
//! statement at compile time (a `const` cannot be `concat!`ed, and `format!`
//! would build every statement at run time). Each list names exactly the
//! fields of its row type in [`crate::rows`], in any order: rows are decoded
//! by column name.
//!
//! The key and event rows are not here: PostgreSQL computes their times from
//! `timestamptz` columns and SQLite stores unix milliseconds, so each dialect
//! has its own list, beside the only statements that read it (`keys.rs`,
//! `outbox.rs`).

/// The columns of a payment row ([`crate::rows::PaymentRow`]).
macro_rules! payment_columns {
    () => {
        "id, shop_id, idempotency_key, reference, amount_minor, currency, token, status, \
         acquirer_key, provider_payment_id, decline_code, created_at, refunded_minor, metadata, \
         capture_method, hold, authorization_expires_at, captured_minor, capture_reserved_minor, \
         captures_in_flight"
    };
}
pub(crate) use payment_columns;

/// The columns of a refund row ([`crate::rows::RefundRow`]).
macro_rules! refund_columns {
    () => {
        "id, shop_id, payment_id, idempotency_key, amount_minor, currency, status, \
         acquirer_key, provider_refund_id, failure_code, created_at"
    };
}
pub(crate) use refund_columns;

/// The columns of a capture row ([`crate::rows::CaptureRow`]).
macro_rules! capture_columns {
    () => {
        "id, shop_id, payment_id, idempotency_key, amount_minor, currency, is_final, status, \
         acquirer_key, provider_capture_id, failure_code, created_at"
    };
}
pub(crate) use capture_columns;

/// A payment's status as the API shows it ([`chargeonce_core::ShownStatus`]),
/// as an SQL expression over its row, the same in both dialects: the
/// charge's status, or an authorization's own once it stands (the rule of
/// `Authorization::status`).
macro_rules! shown_status {
    () => {
        "(CASE WHEN hold IS NULL OR status <> 'succeeded' THEN status \
              WHEN hold = 'captured' \
                  OR (hold IN ('released_void', 'released_expiry') AND captured_minor > 0) \
                  THEN 'succeeded' \
              WHEN hold = 'released_void' THEN 'voided' \
              WHEN hold = 'released_expiry' THEN 'expired' \
              WHEN captured_minor > 0 THEN 'partially_captured' \
              ELSE 'authorized' END)"
    };
}
pub(crate) use shown_status;
