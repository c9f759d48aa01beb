//! Turning rows into domain values and sqlx errors into [`StoreError`]s; shared
//! by both stores so they decode exactly alike.

use chargeonce_core::events::{
    AttemptOutcome, Delivery, Event, EventId, EventType, WebhookEndpoint,
};
use chargeonce_core::webhook::WebhookSecret;
use chargeonce_core::{
    AcquirerKey, CardToken, Currency, EventRecorded, Fingerprint, IdempotencyKey, KeyRecord, Money,
    NewRefund, Payment, PaymentId, PaymentStatus, RecoveryPoint, Reference, Refund, RefundId,
    RefundRefusal, RefundSettlement, RefundStatus, ShopId, StalledKey, StoreError, StoredResponse,
};
use std::time::Duration;

use time::OffsetDateTime;

/// Classifies a database error: connection trouble is `Unavailable` (the
/// caller answers 503 and executes nothing), bad rows are `Corrupt`.
pub(crate) fn store_error(error: sqlx::Error) -> StoreError {
    match &error {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => StoreError::Unavailable(error.to_string()),
        sqlx::Error::Database(db) => {
            let code = db.code().unwrap_or_default();
            // PostgreSQL: connection exceptions (08), operator intervention
            // (57P01..57P03), too many connections (53300), statement or lock
            // timeouts (57014, 55P03). SQLite: SQLITE_BUSY (5), SQLITE_LOCKED (6).
            let transient = code.starts_with("08")
                || code.starts_with("57P")
                || matches!(
                    code.as_ref(),
                    "53300" | "57014" | "55P03" | "5" | "6" | "517"
                );
            if transient {
                StoreError::Unavailable(error.to_string())
            } else {
                StoreError::Other(error.to_string())
            }
        }
        sqlx::Error::ColumnDecode { .. }
        | sqlx::Error::Decode(_)
        | sqlx::Error::ColumnNotFound(_)
        | sqlx::Error::TypeNotFound { .. } => StoreError::Corrupt(error.to_string()),
        _ => StoreError::Other(error.to_string()),
    }
}

fn corrupt(what: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(what.to_string())
}

/// A payment row's columns, read from either store.
pub(crate) struct PaymentColumns {
    pub id: String,
    pub shop_id: String,
    pub idempotency_key: String,
    pub reference: String,
    pub amount_minor: i64,
    pub currency: String,
    pub token: String,
    pub status: String,
    pub acquirer_key: String,
    pub provider_payment_id: Option<String>,
    pub decline_code: Option<String>,
    pub created_at: OffsetDateTime,
    pub refunded_minor: i64,
}

impl PaymentColumns {
    pub fn into_payment(self) -> Result<Payment, StoreError> {
        let currency = Currency::from_code(&self.currency).map_err(corrupt)?;
        Ok(Payment {
            id: PaymentId::parse(&self.id).map_err(corrupt)?,
            shop_id: ShopId::new(self.shop_id).map_err(corrupt)?,
            idempotency_key: IdempotencyKey::new(self.idempotency_key).map_err(corrupt)?,
            reference: Reference::new(self.reference).map_err(corrupt)?,
            amount: Money::from_minor(self.amount_minor, currency).map_err(corrupt)?,
            token: CardToken::new(self.token).map_err(corrupt)?,
            status: PaymentStatus::parse(&self.status)
                .ok_or_else(|| corrupt(format!("payment status `{}`", self.status)))?,
            acquirer_key: AcquirerKey::from_stored(self.acquirer_key),
            provider_payment_id: self.provider_payment_id,
            decline_code: self.decline_code,
            refunded_minor: self.refunded_minor,
            created_at: self.created_at,
        })
    }
}

/// A key row's columns, read from either store.
pub(crate) struct KeyColumns {
    pub shop_id: String,
    pub key: String,
    pub fingerprint: Vec<u8>,
    pub method: String,
    pub path: String,
    pub recovery_point: String,
    pub payment_id: Option<String>,
    pub response_status: Option<i64>,
    pub response_headers: Option<String>,
    pub response_body: Option<Vec<u8>>,
    pub lease_active: bool,
    pub refund_id: Option<String>,
    pub settling_ms: Option<i64>,
    pub created_at_ms: i64,
    pub expires_at_ms: i64,
    pub replays: i64,
}

impl KeyColumns {
    pub fn into_record(self) -> Result<KeyRecord, StoreError> {
        let response = match (self.response_status, self.response_body) {
            (Some(status), Some(body)) => Some(StoredResponse {
                status: u16::try_from(status).map_err(corrupt)?,
                headers: decode_headers(self.response_headers.as_deref())?,
                body,
            }),
            _ => None,
        };
        Ok(KeyRecord {
            shop_id: ShopId::new(self.shop_id).map_err(corrupt)?,
            key: IdempotencyKey::new(self.key).map_err(corrupt)?,
            fingerprint: Fingerprint::from_bytes(&self.fingerprint)
                .ok_or_else(|| corrupt("fingerprint is not 32 bytes"))?,
            method: self.method,
            path: self.path,
            recovery_point: RecoveryPoint::parse(&self.recovery_point)
                .ok_or_else(|| corrupt(format!("recovery point `{}`", self.recovery_point)))?,
            payment_id: self
                .payment_id
                .map(|id| PaymentId::parse(&id))
                .transpose()
                .map_err(corrupt)?,
            response,
            lease_active: self.lease_active,
            refund_id: self
                .refund_id
                .map(|id| RefundId::parse(&id))
                .transpose()
                .map_err(corrupt)?,
            settling: self
                .settling_ms
                .and_then(|ms| u64::try_from(ms).ok())
                .filter(|ms| *ms > 0)
                .map(Duration::from_millis),
            created_at_ms: self.created_at_ms,
            expires_at_ms: self.expires_at_ms,
            replays: u64::try_from(self.replays).unwrap_or(0),
        })
    }
}

/// Stored response headers are a JSON array of `[name, value]` pairs.
pub(crate) fn encode_headers(headers: &[(String, String)]) -> Result<String, StoreError> {
    serde_json::to_string(headers).map_err(|e| StoreError::Other(e.to_string()))
}

fn decode_headers(raw: Option<&str>) -> Result<Vec<(String, String)>, StoreError> {
    match raw {
        None => Ok(Vec::new()),
        Some(raw) => serde_json::from_str(raw).map_err(corrupt),
    }
}

/// Milliseconds in a duration, saturated to what an SQL BIGINT holds.
pub(crate) fn millis(duration: std::time::Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

/// The stored result of an acquirer event.
pub(crate) fn event_result(recorded: &EventRecorded) -> &'static str {
    match recorded {
        EventRecorded::Settled(_) => "settled",
        EventRecorded::UnknownPayment => "unknown_payment",
        EventRecorded::Unchanged(_) | EventRecorded::Duplicate => "unchanged",
    }
}

/// A stalled key's columns, read from either store.
pub(crate) fn stalled_key(
    shop_id: String,
    key: String,
    fingerprint: &[u8],
) -> Result<StalledKey, StoreError> {
    Ok(StalledKey {
        shop_id: ShopId::new(shop_id).map_err(corrupt)?,
        key: IdempotencyKey::new(key).map_err(corrupt)?,
        fingerprint: Fingerprint::from_bytes(fingerprint)
            .ok_or_else(|| corrupt("fingerprint is not 32 bytes"))?,
    })
}

/// A refund row's columns, read from either store.
pub(crate) struct RefundColumns {
    pub id: String,
    pub shop_id: String,
    pub payment_id: String,
    pub idempotency_key: String,
    pub amount_minor: i64,
    pub currency: String,
    pub status: String,
    pub acquirer_key: String,
    pub provider_refund_id: Option<String>,
    pub failure_code: Option<String>,
    pub created_at: OffsetDateTime,
}

impl RefundColumns {
    pub fn into_refund(self) -> Result<Refund, StoreError> {
        let currency = Currency::from_code(&self.currency).map_err(corrupt)?;
        Ok(Refund {
            id: RefundId::parse(&self.id).map_err(corrupt)?,
            shop_id: ShopId::new(self.shop_id).map_err(corrupt)?,
            payment_id: PaymentId::parse(&self.payment_id).map_err(corrupt)?,
            idempotency_key: IdempotencyKey::new(self.idempotency_key).map_err(corrupt)?,
            amount: Money::from_minor(self.amount_minor, currency).map_err(corrupt)?,
            status: RefundStatus::parse(&self.status)
                .ok_or_else(|| corrupt(format!("refund status `{}`", self.status)))?,
            acquirer_key: AcquirerKey::from_stored(self.acquirer_key),
            provider_refund_id: self.provider_refund_id,
            failure_code: self.failure_code,
            created_at: self.created_at,
        })
    }
}

/// Decides a refund's amount against its payment (read under the lock that
/// serialises refunds of the payment), or why it is refused. `reserved` is
/// what pending and succeeded refunds already hold.
pub(crate) fn reservation(
    payment: &Payment,
    reserved: i64,
    refund: &NewRefund,
) -> Result<Money, RefundRefusal> {
    if payment.status != PaymentStatus::Succeeded {
        return Err(RefundRefusal::NotRefundable(payment.status));
    }
    let total = payment.amount.minor_units();
    let available_minor = total.saturating_sub(reserved).max(0);
    let amount = match refund.amount {
        Some(amount) if amount.currency() != payment.amount.currency() => {
            return Err(RefundRefusal::CurrencyMismatch);
        }
        Some(amount) => amount.minor_units(),
        None => available_minor,
    };
    if amount <= 0 || amount > available_minor {
        return Err(RefundRefusal::ExceedsAmount { available_minor });
    }
    Money::from_minor(amount, payment.amount.currency())
        .map_err(|_| RefundRefusal::ExceedsAmount { available_minor })
}

/// The pending refund row phase 1 inserts.
pub(crate) fn new_refund_row(refund: &NewRefund, amount: Money) -> Refund {
    Refund {
        id: refund.id.clone(),
        shop_id: refund.shop_id.clone(),
        payment_id: refund.payment_id.clone(),
        idempotency_key: refund.idempotency_key.clone(),
        amount,
        status: RefundStatus::Pending,
        acquirer_key: refund.id.acquirer_key(),
        provider_refund_id: None,
        failure_code: None,
        created_at: refund.created_at,
    }
}

/// The refund columns a settlement writes: status, provider id, failure code.
pub(crate) fn refund_settlement_columns(
    settlement: &RefundSettlement,
) -> (RefundStatus, Option<String>, Option<String>) {
    match settlement {
        RefundSettlement::Succeeded { provider_refund_id } => (
            RefundStatus::Succeeded,
            Some(provider_refund_id.clone()),
            None,
        ),
        RefundSettlement::Failed { code } => (RefundStatus::Failed, None, Some(code.clone())),
    }
}

/// An event row's columns, read from either store (times in unix ms).
pub(crate) struct EventColumns {
    pub seq: i64,
    pub id: String,
    pub shop_id: String,
    pub event_type: String,
    pub payment_id: String,
    pub refund_id: Option<String>,
    pub payload: Vec<u8>,
    pub created_at_ms: i64,
    pub attempts: i64,
    pub next_attempt_at_ms: i64,
    pub delivered_at_ms: Option<i64>,
    pub gave_up_at_ms: Option<i64>,
    pub last_status: Option<i64>,
    pub last_error: Option<String>,
}

impl EventColumns {
    /// The stored event, and its commit-order sequence number.
    pub fn into_event(self) -> Result<(i64, Event), StoreError> {
        let event = Event {
            id: EventId::parse(&self.id).map_err(|_| corrupt(format!("event id `{}`", self.id)))?,
            shop_id: ShopId::new(self.shop_id).map_err(corrupt)?,
            event_type: EventType::parse(&self.event_type)
                .ok_or_else(|| corrupt(format!("event type `{}`", self.event_type)))?,
            payment_id: PaymentId::parse(&self.payment_id).map_err(corrupt)?,
            refund_id: self
                .refund_id
                .map(|id| RefundId::parse(&id))
                .transpose()
                .map_err(corrupt)?,
            payload: self.payload,
            created_at_ms: self.created_at_ms,
            delivery: Delivery {
                attempts: u32::try_from(self.attempts).map_err(corrupt)?,
                next_attempt_at_ms: self.next_attempt_at_ms,
                delivered_at_ms: self.delivered_at_ms,
                gave_up_at_ms: self.gave_up_at_ms,
                last_status: self
                    .last_status
                    .map(u16::try_from)
                    .transpose()
                    .map_err(corrupt)?,
                last_error: self.last_error,
            },
        };
        Ok((self.seq, event))
    }
}

/// The columns an attempt's outcome writes: status, error, whether delivered,
/// retry delay and give-up time in ms.
pub(crate) fn attempt_columns(
    outcome: &AttemptOutcome,
) -> (Option<i64>, Option<String>, bool, i64, i64) {
    match outcome {
        AttemptOutcome::Delivered { status } => (Some(i64::from(*status)), None, true, 0, 0),
        AttemptOutcome::Failed {
            status,
            error,
            retry_in,
            give_up_after,
        } => (
            status.map(i64::from),
            // Bounded: a long error page is not a log.
            Some(error.chars().take(500).collect()),
            false,
            millis(*retry_in),
            millis(*give_up_after),
        ),
    }
}

/// A shop's endpoint from its stored columns, if it has one.
pub(crate) fn endpoint(url: Option<String>, secret: Option<String>) -> Option<WebhookEndpoint> {
    match (url, secret) {
        (Some(url), Some(secret)) => Some(WebhookEndpoint {
            url,
            secret: WebhookSecret::new(secret),
        }),
        _ => None,
    }
}
