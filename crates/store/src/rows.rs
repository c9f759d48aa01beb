//! The rows the stores read back, one type per row with one decoder each,
//! and their conversion into domain values.
//!
//! A row type is declared once with [`rows!`], which gives it both decoders:
//! `sqlx::FromRow` for PostgreSQL rows and [`FromSqliteRow`] for the
//! rusqlite rows of the SQLite store (which runs on rusqlite, not sqlx).
//! Both read each field by its column name, so a statement must name its
//! columns as the fields are named (see [`crate::columns`]). A value that
//! does not fit its domain type becomes [`StoreError::Corrupt`] in the
//! `TryFrom` conversion, the same for both stores.

use std::time::Duration;

use chargeonce_core::api_key::MakingRequest;
use chargeonce_core::authorization::{Authorization, Hold};
use chargeonce_core::endpoint::{Destination, Endpoint, EndpointId, EventFilter, Origin};
use chargeonce_core::events::{Delivery, DueEvent, EndpointDelivery, Event, EventId, EventType};
use chargeonce_core::history::{RepeatCounts, Tally};
use chargeonce_core::webhook::WebhookSecret;
use chargeonce_core::{
    AcquirerKey, CardToken, Currency, Fingerprint, IdempotencyKey, KeyInfo, KeyLease, KeyRecord,
    Metadata, Money, Payment, PaymentId, PaymentStatus, RecoveryPoint, Reference, Refund, RefundId,
    RefundStatus, ShopId, StalledKey, StoreError, StoredResponse,
};
use chargeonce_core::{Capture, CaptureId, CaptureMethod, CaptureStatus, PaymentCapture};
use chargeonce_sqlite::rusqlite;

use crate::stored_body;
use rusqlite::types::{FromSql, FromSqlError, FromSqlResult, ValueRef};
use time::OffsetDateTime;

/// Decodes a row of the SQLite store (the counterpart of `sqlx::FromRow`).
pub(crate) trait FromSqliteRow: Sized {
    /// Reads every field from the column of its name.
    fn from_sqlite(row: &rusqlite::Row<'_>) -> rusqlite::Result<Self>;
}

/// Declares row types: each gets `sqlx::FromRow` and [`FromSqliteRow`],
/// both reading every field from the column of the same name.
macro_rules! rows {
    ($(
        $(#[$meta:meta])*
        struct $name:ident {
            $($(#[$field_meta:meta])* $field:ident: $ty:ty,)*
        }
    )*) => {$(
        $(#[$meta])*
        #[derive(Debug, sqlx::FromRow)]
        pub(crate) struct $name {
            $($(#[$field_meta])* pub(crate) $field: $ty,)*
        }

        impl $name {
            /// The columns this row is read from, by name.
            #[cfg(test)]
            #[allow(dead_code, reason = "only the rows of shared column lists are checked")]
            pub(crate) const COLUMNS: &[&str] = &[$(stringify!($field)),*];
        }

        impl FromSqliteRow for $name {
            fn from_sqlite(row: &rusqlite::Row<'_>) -> rusqlite::Result<Self> {
                Ok(Self {
                    $($field: row.get(stringify!($field))?,)*
                })
            }
        }
    )*};
}
pub(crate) use rows;

/// A stored time: `timestamptz` in PostgreSQL, unix milliseconds (an
/// INTEGER) in SQLite.
#[derive(Debug, Clone, Copy, sqlx::Type)]
#[sqlx(transparent)]
pub(crate) struct At(pub(crate) OffsetDateTime);

impl FromSql for At {
    fn column_result(value: ValueRef<'_>) -> FromSqlResult<Self> {
        let ms = i64::column_result(value)?;
        OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
            .map(At)
            .map_err(|e| FromSqlError::Other(format!("timestamp {ms}: {e}").into()))
    }
}

rows! {
    /// A payment row ([`crate::columns::payment_columns`]).
    struct PaymentRow {
        id: String,
        shop_id: String,
        idempotency_key: String,
        reference: String,
        amount_minor: i64,
        currency: String,
        token: String,
        status: String,
        /// NULL on PostgreSQL from migration 0025 on: derived from `id`.
        acquirer_key: Option<String>,
        provider_payment_id: Option<String>,
        decline_code: Option<String>,
        created_at: At,
        refunded_minor: i64,
        metadata: Option<String>,
        capture_method: String,
        hold: Option<String>,
        authorization_expires_at: Option<At>,
        captured_minor: i64,
        capture_reserved_minor: i64,
        captures_in_flight: i32,
    }

    /// A refund row ([`crate::columns::refund_columns`]).
    struct RefundRow {
        id: String,
        shop_id: String,
        payment_id: String,
        idempotency_key: String,
        amount_minor: i64,
        currency: String,
        status: String,
        acquirer_key: String,
        provider_refund_id: Option<String>,
        failure_code: Option<String>,
        created_at: At,
    }

    /// A capture row ([`crate::columns::capture_columns`]).
    struct CaptureRow {
        id: String,
        shop_id: String,
        payment_id: String,
        idempotency_key: String,
        amount_minor: i64,
        currency: String,
        is_final: bool,
        status: String,
        acquirer_key: String,
        provider_capture_id: Option<String>,
        failure_code: Option<String>,
        created_at: At,
    }

    /// A key row, with lease liveness and times as the database judges them
    /// (each dialect's `key_columns!`).
    struct KeyRow {
        shop_id: String,
        key: String,
        fingerprint: Vec<u8>,
        method: String,
        path: String,
        recovery_point: String,
        payment_id: Option<String>,
        response_status: Option<i64>,
        response_headers: Option<String>,
        response_body: Option<Vec<u8>>,
        lease_active: bool,
        refund_id: Option<String>,
        capture_id: Option<String>,
        settling_ms: Option<i64>,
        created_at_ms: i64,
        expires_at_ms: i64,
        replays: i64,
    }

    /// A key as introspection shows it, times in unix milliseconds (each
    /// dialect's `key_info`).
    struct KeyInfoRow {
        key: String,
        recovery_point: String,
        method: String,
        path: String,
        fingerprint: Vec<u8>,
        created_at_ms: i64,
        last_repeat_at_ms: Option<i64>,
        replays: i64,
        expires_at_ms: i64,
        leased: bool,
        lease_holder: Option<String>,
        locked_until_ms: Option<i64>,
        response_status: Option<i64>,
        payment_id: Option<String>,
        refund_id: Option<String>,
        capture_id: Option<String>,
        replayed: i64,
        last_replayed_at_ms: Option<i64>,
        conflicted: i64,
        last_conflicted_at_ms: Option<i64>,
        mismatched: i64,
        last_mismatched_at_ms: Option<i64>,
    }

    /// A merchant event row, times in unix milliseconds (each dialect's
    /// `event_columns!`).
    struct EventRow {
        /// Commit order.
        seq: i64,
        id: String,
        shop_id: String,
        event_type: String,
        payment_id: String,
        refund_id: Option<String>,
        payload: Vec<u8>,
        created_at_ms: i64,
    }

    /// An event's delivery to one endpoint (`event_deliveries`), with times
    /// as unix milliseconds.
    struct DeliveryRow {
        event_seq: i64,
        endpoint_id: String,
        attempts: i64,
        next_attempt_at_ms: i64,
        delivered_at_ms: Option<i64>,
        gave_up_at_ms: Option<i64>,
        last_status: Option<i64>,
        last_error: Option<String>,
    }

    /// A claimed delivery: its event's columns, the endpoint's URL and
    /// secrets (the rolled-over one only while it still signs), and the
    /// attempts made before.
    struct DueRow {
        seq: i64,
        id: String,
        shop_id: String,
        event_type: String,
        payment_id: String,
        refund_id: Option<String>,
        payload: Vec<u8>,
        created_at_ms: i64,
        endpoint_id: String,
        url: String,
        secret: Option<String>,
        previous_secret: Option<String>,
        attempts: i64,
    }

    /// An unfinished key nobody drives: `shop_id, key, fingerprint`.
    struct StalledKeyRow {
        shop_id: String,
        key: String,
        fingerprint: Vec<u8>,
    }

    /// What a take-over reads back of the key it took:
    /// `payment_id, refund_id, recovery_point`.
    struct TakenKeyRow {
        payment_id: String,
        refund_id: Option<String>,
        capture_id: Option<String>,
        recovery_point: String,
    }

    /// A webhook endpoint, without its secrets, times as unix milliseconds.
    struct EndpointRow {
        shop_id: String,
        id: String,
        origin: String,
        url: String,
        enabled_events: String,
        description: Option<String>,
        enabled: bool,
        created_at_ms: i64,
        previous_secret_until_ms: Option<i64>,
    }

    /// An endpoint with what a repeat of a create or roll is judged by: the
    /// idempotency key of the request that made it, of the one that made
    /// its current secret, and their fingerprints.
    struct EndpointRequestRow {
        idempotency_key: Option<String>,
        request_sha256: Option<Vec<u8>>,
        secret_key: Option<String>,
        secret_request_sha256: Option<Vec<u8>>,
    }
}

fn recovery_point(stored: &str) -> Result<RecoveryPoint, StoreError> {
    RecoveryPoint::parse(stored)
        .ok_or_else(|| StoreError::corrupt(format!("recovery point `{stored}`")))
}

fn fingerprint(stored: &[u8]) -> Result<Fingerprint, StoreError> {
    Fingerprint::from_bytes(stored)
        .ok_or_else(|| StoreError::corrupt("fingerprint is not 32 bytes"))
}

fn capture_id(stored: Option<String>) -> Result<Option<CaptureId>, StoreError> {
    stored
        .map(|id| CaptureId::parse(&id))
        .transpose()
        .map_err(StoreError::corrupt_by)
}

fn refund_id(stored: Option<String>) -> Result<Option<RefundId>, StoreError> {
    stored
        .map(|id| RefundId::parse(&id))
        .transpose()
        .map_err(StoreError::corrupt_by)
}

impl TryFrom<PaymentRow> for Payment {
    type Error = StoreError;

    fn try_from(row: PaymentRow) -> Result<Self, StoreError> {
        let currency = Currency::from_code(&row.currency).map_err(StoreError::corrupt_by)?;
        let capture = capture(&row)?;
        let id = PaymentId::parse(&row.id).map_err(StoreError::corrupt_by)?;
        let acquirer_key = row
            .acquirer_key
            .map_or_else(|| AcquirerKey::for_payment(&id), AcquirerKey::from_stored);
        Ok(Payment {
            id,
            shop_id: ShopId::new(row.shop_id).map_err(StoreError::corrupt_by)?,
            idempotency_key: IdempotencyKey::new(row.idempotency_key)
                .map_err(StoreError::corrupt_by)?,
            reference: Reference::new(row.reference).map_err(StoreError::corrupt_by)?,
            amount: Money::from_minor(row.amount_minor, currency)
                .map_err(StoreError::corrupt_by)?,
            token: CardToken::new(row.token).map_err(StoreError::corrupt_by)?,
            status: PaymentStatus::parse(&row.status)
                .ok_or_else(|| StoreError::corrupt(format!("payment status `{}`", row.status)))?,
            acquirer_key,
            provider_payment_id: row.provider_payment_id,
            decline_code: row.decline_code,
            refunded_minor: row.refunded_minor,
            created_at: row.created_at.0,
            metadata: Metadata::from_stored(row.metadata.as_deref())
                .map_err(StoreError::corrupt_by)?,
            capture,
        })
    }
}

/// A payment row's capture method and hold, as one value: a hold exactly
/// when the payment is only authorized.
fn capture(row: &PaymentRow) -> Result<PaymentCapture, StoreError> {
    let method = CaptureMethod::parse(&row.capture_method).ok_or_else(|| {
        StoreError::corrupt(format!("payment capture method `{}`", row.capture_method))
    })?;
    match (method, row.hold.as_deref(), row.authorization_expires_at) {
        (CaptureMethod::Automatic, None, None) => Ok(PaymentCapture::Automatic),
        (CaptureMethod::Manual, Some(hold), Some(expires_at)) => {
            let hold = Hold::parse(hold)
                .ok_or_else(|| StoreError::corrupt(format!("payment hold `{hold}`")))?;
            let in_flight =
                u32::try_from(row.captures_in_flight).map_err(StoreError::corrupt_by)?;
            Ok(PaymentCapture::Manual {
                hold: Authorization::from_parts(
                    row.amount_minor,
                    row.captured_minor,
                    row.capture_reserved_minor,
                    in_flight,
                    hold,
                ),
                expires_at: expires_at.0,
            })
        }
        _ => Err(StoreError::corrupt(format!(
            "payment {}: capture method {} with hold {:?}",
            row.id, row.capture_method, row.hold
        ))),
    }
}

impl TryFrom<CaptureRow> for Capture {
    type Error = StoreError;

    fn try_from(row: CaptureRow) -> Result<Self, StoreError> {
        let currency = Currency::from_code(&row.currency).map_err(StoreError::corrupt_by)?;
        Ok(Capture {
            id: CaptureId::parse(&row.id).map_err(StoreError::corrupt_by)?,
            shop_id: ShopId::new(row.shop_id).map_err(StoreError::corrupt_by)?,
            payment_id: PaymentId::parse(&row.payment_id).map_err(StoreError::corrupt_by)?,
            idempotency_key: IdempotencyKey::new(row.idempotency_key)
                .map_err(StoreError::corrupt_by)?,
            amount: Money::from_minor(row.amount_minor, currency)
                .map_err(StoreError::corrupt_by)?,
            last: row.is_final,
            status: CaptureStatus::parse(&row.status)
                .ok_or_else(|| StoreError::corrupt(format!("capture status `{}`", row.status)))?,
            acquirer_key: AcquirerKey::from_stored(row.acquirer_key),
            provider_capture_id: row.provider_capture_id,
            failure_code: row.failure_code,
            created_at: row.created_at.0,
        })
    }
}

impl TryFrom<RefundRow> for Refund {
    type Error = StoreError;

    fn try_from(row: RefundRow) -> Result<Self, StoreError> {
        let currency = Currency::from_code(&row.currency).map_err(StoreError::corrupt_by)?;
        Ok(Refund {
            id: RefundId::parse(&row.id).map_err(StoreError::corrupt_by)?,
            shop_id: ShopId::new(row.shop_id).map_err(StoreError::corrupt_by)?,
            payment_id: PaymentId::parse(&row.payment_id).map_err(StoreError::corrupt_by)?,
            idempotency_key: IdempotencyKey::new(row.idempotency_key)
                .map_err(StoreError::corrupt_by)?,
            amount: Money::from_minor(row.amount_minor, currency)
                .map_err(StoreError::corrupt_by)?,
            status: RefundStatus::parse(&row.status)
                .ok_or_else(|| StoreError::corrupt(format!("refund status `{}`", row.status)))?,
            acquirer_key: AcquirerKey::from_stored(row.acquirer_key),
            provider_refund_id: row.provider_refund_id,
            failure_code: row.failure_code,
            created_at: row.created_at.0,
        })
    }
}

impl TryFrom<KeyRow> for KeyRecord {
    type Error = StoreError;

    fn try_from(row: KeyRow) -> Result<Self, StoreError> {
        let response = match (row.response_status, row.response_body) {
            (Some(status), Some(body)) => Some(StoredResponse {
                status: u16::try_from(status).map_err(StoreError::corrupt_by)?,
                headers: decode_headers(row.response_headers.as_deref())?,
                body: stored_body::decode(body)?,
            }),
            _ => None,
        };
        Ok(KeyRecord {
            shop_id: ShopId::new(row.shop_id).map_err(StoreError::corrupt_by)?,
            key: IdempotencyKey::new(row.key).map_err(StoreError::corrupt_by)?,
            fingerprint: fingerprint(&row.fingerprint)?,
            method: row.method,
            path: row.path,
            recovery_point: recovery_point(&row.recovery_point)?,
            payment_id: row
                .payment_id
                .map(|id| PaymentId::parse(&id))
                .transpose()
                .map_err(StoreError::corrupt_by)?,
            response,
            lease_active: row.lease_active,
            refund_id: refund_id(row.refund_id)?,
            capture_id: capture_id(row.capture_id)?,
            settling: row
                .settling_ms
                .and_then(|ms| u64::try_from(ms).ok())
                .filter(|ms| *ms > 0)
                .map(Duration::from_millis),
            created_at_ms: row.created_at_ms,
            expires_at_ms: row.expires_at_ms,
            replays: u64::try_from(row.replays).unwrap_or(0),
        })
    }
}

/// A time stored as unix milliseconds.
pub(crate) fn from_ms(ms: i64) -> Result<OffsetDateTime, StoreError> {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .map_err(StoreError::corrupt_by)
}

/// One kind of a key's repeats, as its row counts them.
pub(crate) fn tally(count: i64, last_at_ms: Option<i64>) -> Result<Tally, StoreError> {
    Ok(Tally {
        count: u64::try_from(count).unwrap_or(0),
        last_at: last_at_ms.map(from_ms).transpose()?,
    })
}

impl TryFrom<KeyInfoRow> for KeyInfo {
    type Error = StoreError;

    fn try_from(row: KeyInfoRow) -> Result<Self, StoreError> {
        let recovery_point = recovery_point(&row.recovery_point)?;
        let unfinished = recovery_point != RecoveryPoint::Finished;
        let until = row.locked_until_ms.map(from_ms).transpose()?;
        let (lease, parked_until) = match until {
            Some(until) if unfinished && row.leased => (
                Some(KeyLease {
                    holder: row.lease_holder,
                    until,
                }),
                None,
            ),
            Some(until) if unfinished => (None, Some(until)),
            _ => (None, None),
        };
        Ok(KeyInfo {
            key: IdempotencyKey::new(row.key).map_err(StoreError::corrupt_by)?,
            recovery_point,
            method: row.method,
            path: row.path,
            fingerprint: fingerprint(&row.fingerprint)?,
            created_at: from_ms(row.created_at_ms)?,
            last_repeat_at: row.last_repeat_at_ms.map(from_ms).transpose()?,
            repeats: u64::try_from(row.replays).unwrap_or(0),
            expires_at: from_ms(row.expires_at_ms)?,
            lease,
            parked_until,
            status: row
                .response_status
                .map(u16::try_from)
                .transpose()
                .map_err(StoreError::corrupt_by)?,
            payment_id: row
                .payment_id
                .map(|id| PaymentId::parse(&id))
                .transpose()
                .map_err(StoreError::corrupt_by)?,
            refund_id: refund_id(row.refund_id)?,
            capture_id: capture_id(row.capture_id)?,
            repeats_by: RepeatCounts {
                replays: tally(row.replayed, row.last_replayed_at_ms)?,
                conflicts: tally(row.conflicted, row.last_conflicted_at_ms)?,
                mismatches: tally(row.mismatched, row.last_mismatched_at_ms)?,
            },
        })
    }
}

/// Stored response headers, in either stored form
/// ([`crate::stored_headers`], written by [`crate::codec::encode_headers`]).
fn decode_headers(raw: Option<&str>) -> Result<Vec<(String, String)>, StoreError> {
    crate::stored_headers::decode(raw)
}

impl TryFrom<EventRow> for Event {
    type Error = StoreError;

    fn try_from(row: EventRow) -> Result<Self, StoreError> {
        Ok(Event {
            id: EventId::parse(&row.id)
                .map_err(|_| StoreError::corrupt(format!("event id `{}`", row.id)))?,
            shop_id: ShopId::new(row.shop_id).map_err(StoreError::corrupt_by)?,
            event_type: EventType::parse(&row.event_type)
                .ok_or_else(|| StoreError::corrupt(format!("event type `{}`", row.event_type)))?,
            payment_id: PaymentId::parse(&row.payment_id).map_err(StoreError::corrupt_by)?,
            refund_id: refund_id(row.refund_id)?,
            payload: stored_body::decode(row.payload)?,
            created_at_ms: row.created_at_ms,
            deliveries: Vec::new(),
        })
    }
}

/// An event with its commit-order sequence number, to sort a batch by and
/// to attach its deliveries to.
impl TryFrom<EventRow> for (i64, Event) {
    type Error = StoreError;

    fn try_from(row: EventRow) -> Result<Self, StoreError> {
        let seq = row.seq;
        Ok((seq, Event::try_from(row)?))
    }
}

/// A delivery with the sequence number of its event.
impl TryFrom<DeliveryRow> for (i64, EndpointDelivery) {
    type Error = StoreError;

    fn try_from(row: DeliveryRow) -> Result<Self, StoreError> {
        Ok((
            row.event_seq,
            EndpointDelivery {
                endpoint_id: EndpointId::parse(&row.endpoint_id).map_err(StoreError::corrupt_by)?,
                delivery: Delivery {
                    attempts: u32::try_from(row.attempts).map_err(StoreError::corrupt_by)?,
                    next_attempt_at_ms: row.next_attempt_at_ms,
                    delivered_at_ms: row.delivered_at_ms,
                    gave_up_at_ms: row.gave_up_at_ms,
                    last_status: row
                        .last_status
                        .map(u16::try_from)
                        .transpose()
                        .map_err(StoreError::corrupt_by)?,
                    last_error: row.last_error,
                },
            },
        ))
    }
}

/// Attaches deliveries (each with its event's sequence number) to the
/// events of `events` (the same), in endpoint id order.
pub(crate) fn attach_deliveries(
    events: Vec<(i64, Event)>,
    deliveries: Vec<(i64, EndpointDelivery)>,
) -> Vec<Event> {
    let mut by_seq: std::collections::HashMap<i64, Vec<EndpointDelivery>> =
        std::collections::HashMap::new();
    for (seq, delivery) in deliveries {
        by_seq.entry(seq).or_default().push(delivery);
    }
    events
        .into_iter()
        .map(|(seq, mut event)| {
            let mut deliveries = by_seq.remove(&seq).unwrap_or_default();
            deliveries.sort_by(|a, b| a.endpoint_id.cmp(&b.endpoint_id));
            event.deliveries = deliveries;
            event
        })
        .collect()
}

impl TryFrom<DueRow> for (i64, DueEvent) {
    type Error = StoreError;

    fn try_from(row: DueRow) -> Result<Self, StoreError> {
        let event = Event::try_from(EventRow {
            seq: row.seq,
            id: row.id,
            shop_id: row.shop_id,
            event_type: row.event_type,
            payment_id: row.payment_id,
            refund_id: row.refund_id,
            payload: row.payload,
            created_at_ms: row.created_at_ms,
        })?;
        let secret = row.secret.ok_or_else(|| {
            StoreError::corrupt(format!("endpoint {} has no secret", row.endpoint_id))
        })?;
        Ok((
            row.seq,
            DueEvent {
                event,
                destination: Destination {
                    endpoint_id: EndpointId::parse(&row.endpoint_id)
                        .map_err(StoreError::corrupt_by)?,
                    url: row.url,
                    secret: WebhookSecret::new(secret),
                    previous_secret: row.previous_secret.map(WebhookSecret::new),
                },
                attempts: u32::try_from(row.attempts).map_err(StoreError::corrupt_by)?,
            },
        ))
    }
}

impl TryFrom<EndpointRow> for Endpoint {
    type Error = StoreError;

    fn try_from(row: EndpointRow) -> Result<Self, StoreError> {
        Ok(Endpoint {
            id: EndpointId::parse(&row.id).map_err(StoreError::corrupt_by)?,
            shop_id: ShopId::new(row.shop_id).map_err(StoreError::corrupt_by)?,
            origin: Origin::parse(&row.origin)
                .ok_or_else(|| StoreError::corrupt(format!("endpoint origin `{}`", row.origin)))?,
            url: row.url,
            filter: EventFilter::from_stored(&row.enabled_events)
                .map_err(StoreError::corrupt_by)?,
            description: row.description,
            enabled: row.enabled,
            created_at_ms: row.created_at_ms,
            previous_secret_until_ms: row.previous_secret_until_ms,
        })
    }
}

impl EndpointRequestRow {
    /// How this endpoint answers `request` that found it by its
    /// idempotency key: as a repeat of the request that made it (`Some(true)`
    /// when the fingerprint matches, `Some(false)` when not), or `None`
    /// when it was not made with that key.
    pub(crate) fn made_by(&self, request: &MakingRequest) -> Option<bool> {
        (self.idempotency_key.as_deref() == Some(request.idempotency_key.as_str()))
            .then(|| self.request_sha256.as_deref() == Some(request.fingerprint.as_slice()))
    }

    /// As [`Self::made_by`], for the request that made the current secret.
    pub(crate) fn secret_made_by(&self, request: &MakingRequest) -> Option<bool> {
        (self.secret_key.as_deref() == Some(request.idempotency_key.as_str()))
            .then(|| self.secret_request_sha256.as_deref() == Some(request.fingerprint.as_slice()))
    }
}

impl TryFrom<StalledKeyRow> for StalledKey {
    type Error = StoreError;

    fn try_from(row: StalledKeyRow) -> Result<Self, StoreError> {
        Ok(StalledKey {
            shop_id: ShopId::new(row.shop_id).map_err(StoreError::corrupt_by)?,
            key: IdempotencyKey::new(row.key).map_err(StoreError::corrupt_by)?,
            fingerprint: fingerprint(&row.fingerprint)?,
        })
    }
}

/// A taken-over key: where it resumes and what it points at.
pub(crate) struct TakenKey {
    pub(crate) recovery_point: RecoveryPoint,
    pub(crate) payment_id: PaymentId,
    pub(crate) refund_id: Option<RefundId>,
    pub(crate) capture_id: Option<CaptureId>,
}

impl TakenKeyRow {
    /// Where the taken-over operation resumes, and what it points at.
    pub(crate) fn parse(self) -> Result<TakenKey, StoreError> {
        Ok(TakenKey {
            recovery_point: recovery_point(&self.recovery_point)?,
            payment_id: PaymentId::parse(&self.payment_id).map_err(StoreError::corrupt_by)?,
            refund_id: refund_id(self.refund_id)?,
            capture_id: capture_id(self.capture_id)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names in a column list (the last word of each item: its alias).
    fn names(list: &str) -> Vec<&str> {
        let mut names: Vec<&str> = list
            .split(", ")
            .map(|item| item.rsplit(' ').next().unwrap_or(item).trim())
            .collect();
        names.sort_unstable();
        names
    }

    fn fields(columns: &[&'static str]) -> Vec<&'static str> {
        let mut fields = columns.to_vec();
        fields.sort_unstable();
        fields
    }

    #[test]
    fn the_shared_column_lists_name_exactly_the_fields_of_their_rows() {
        assert_eq!(
            names(crate::columns::payment_columns!()),
            fields(PaymentRow::COLUMNS)
        );
        assert_eq!(
            names(crate::columns::refund_columns!()),
            fields(RefundRow::COLUMNS)
        );
        assert_eq!(
            names(crate::columns::capture_columns!()),
            fields(CaptureRow::COLUMNS)
        );
    }
}
