//! How lists and idempotency keys look on the wire: the list envelope of
//! `GET /v1/payments`, `GET /v1/refunds` and `GET /v1/payments/{id}/refunds`,
//! and the key resource of `GET /v1/idempotency-keys/{key}`.
//!
//! Self-contained serde structs, so they can move to a wire crate as they
//! are: [`ListView`], [`KeyView`], [`KeyRequestView`], [`KeyLeaseView`].

use chargeonce_core::{KeyInfo, RecoveryPoint};
use serde::Serialize;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// `{"object": "list", "data": [...], "has_more": bool}`: one page of a
/// list, newest first.
#[derive(Debug, Clone, Serialize)]
pub struct ListView<T> {
    /// Always `list`.
    pub object: &'static str,
    /// The page's objects, newest first.
    pub data: Vec<T>,
    /// Whether more objects lie beyond this page in the direction it was
    /// read: older after `starting_after` (or with no cursor), newer before
    /// `ending_before`.
    pub has_more: bool,
}

impl<T> ListView<T> {
    /// A page of `data`.
    pub fn new(data: Vec<T>, has_more: bool) -> Self {
        Self {
            object: "list",
            data,
            has_more,
        }
    }
}

/// The first request made with a key.
#[derive(Debug, Clone, Serialize)]
pub struct KeyRequestView {
    /// Its method.
    pub method: String,
    /// Its path.
    pub path: String,
    /// Its fingerprint (SHA-256 of method, path and canonical body), lower-case hex.
    pub fingerprint: String,
}

/// Who holds an in-progress key's lease. The lease's token (the fencing
/// secret) is never shown.
#[derive(Debug, Clone, Serialize)]
pub struct KeyLeaseView {
    /// The instance that holds it (its name, `hostname:pid` by default);
    /// null when unknown (a lease taken before holders were recorded).
    pub holder: Option<String>,
    /// When the lease runs out (RFC 3339); in the past: it ran out, and the
    /// next retry or the completer takes the key over.
    pub expires_at: String,
}

/// An idempotency key of the shop, as `GET /v1/idempotency-keys/{key}`
/// shows it.
#[derive(Debug, Clone, Serialize)]
pub struct KeyView {
    /// Always `idempotency_key`.
    pub object: &'static str,
    /// The key.
    pub key: String,
    /// `in_progress` or `finished`.
    pub state: &'static str,
    /// How far its operation got: `payment_created`, `order_already_paid`,
    /// `refund_created` or `finished`.
    pub recovery_point: &'static str,
    /// The first request made with it.
    pub request: KeyRequestView,
    /// When the first request came (RFC 3339).
    pub created_at: String,
    /// How many requests with this key reached the database after the first
    /// (repeats an instance answered from its cache are not counted).
    pub repeats: u64,
    /// When the last of those came (RFC 3339); null before any.
    pub last_repeat_at: Option<String>,
    /// When a finished key stops being replayed and counts as new (RFC 3339).
    pub expires_at: String,
    /// Who holds it and until when, while in progress and held; null when
    /// finished or parked.
    pub lease: Option<KeyLeaseView>,
    /// Until when it is parked (no holder, not to be taken over: the
    /// outcome of an acquirer call is awaited), while it is; else null.
    pub parked_until: Option<String>,
    /// The status code of the stored answer, once finished; else null.
    pub response_status: Option<u16>,
    /// The payment it answers with (for a refund key: the refunded payment).
    pub payment_id: Option<String>,
    /// The refund it created, for a refund key; else null.
    pub refund_id: Option<String>,
}

/// A time as RFC 3339.
fn rfc3339(at: OffsetDateTime) -> String {
    at.format(&Rfc3339).unwrap_or_default()
}

impl KeyView {
    /// The view of a key.
    pub fn of(info: &KeyInfo) -> Self {
        Self {
            object: "idempotency_key",
            key: info.key.as_str().to_owned(),
            state: if info.recovery_point == RecoveryPoint::Finished {
                "finished"
            } else {
                "in_progress"
            },
            recovery_point: info.recovery_point.as_str(),
            request: KeyRequestView {
                method: info.method.clone(),
                path: info.path.clone(),
                fingerprint: info.fingerprint.to_hex(),
            },
            created_at: rfc3339(info.created_at),
            repeats: info.repeats,
            last_repeat_at: info.last_repeat_at.map(rfc3339),
            expires_at: rfc3339(info.expires_at),
            lease: info.lease.as_ref().map(|lease| KeyLeaseView {
                holder: lease.holder.clone(),
                expires_at: rfc3339(lease.until),
            }),
            parked_until: info.parked_until.map(rfc3339),
            response_status: info.status,
            payment_id: info.payment_id.as_ref().map(|id| id.as_str().to_owned()),
            refund_id: info.refund_id.as_ref().map(|id| id.as_str().to_owned()),
        }
    }
}
