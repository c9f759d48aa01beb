//! An idempotency key as `GET /v1/idempotency-keys/{key}` shows it: what the
//! service knows of it, never the lease's token (the fencing secret) nor the
//! stored answer's bytes.

use serde::{Deserialize, Serialize};

/// Always `idempotency_key`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum IdempotencyKeyObject {
    /// `idempotency_key`.
    #[default]
    IdempotencyKey,
}

/// Whether the key's operation has its final answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum KeyState {
    /// Still running, or interrupted and waiting to be resumed: a retry with
    /// the same key (or the completer) finishes it.
    InProgress,
    /// The answer is stored; every repeat gets it until the key expires.
    Finished,
}

/// How far the key's operation got (saved atomically with what it names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum KeyRecoveryPoint {
    /// The payment row exists; the acquirer call is next (or its outcome is
    /// awaited).
    PaymentCreated,
    /// The order already had a live payment: the key answers with it and
    /// charges nothing.
    OrderAlreadyPaid,
    /// The refund row and its reservation exist; the acquirer's refund call
    /// is next.
    RefundCreated,
    /// A cancel key: the cancel is recorded on its payment; the payment's
    /// end (and the refund of a charge found) is next.
    CancelRequested,
    /// A capture key: the capture row and its reservation on the payment's
    /// authorization exist; the acquirer's capture call is next.
    CaptureCreated,
    /// A void key: the payment's authorization is being released; the
    /// acquirer's void call is next.
    VoidRequested,
    /// The answer is stored.
    Finished,
}

/// The first request made with a key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct KeyRequest {
    /// Its method.
    #[cfg_attr(feature = "openapi", schema(example = "POST"))]
    pub method: String,
    /// Its path.
    #[cfg_attr(feature = "openapi", schema(example = "/v1/payments"))]
    pub path: String,
    /// Its fingerprint: SHA-256 of method, path and canonical (JCS) body,
    /// lower-case hex. A repeat with another fingerprint is
    /// `422 idempotency_key_reused`.
    #[cfg_attr(feature = "openapi", schema(pattern = "^[0-9a-f]{64}$"))]
    pub fingerprint: String,
}

/// Who holds an in-progress key's lease, and until when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct KeyLease {
    /// The instance that holds it (`--instance`, `hostname:pid` by default);
    /// null for a lease taken before holders were recorded.
    #[cfg_attr(feature = "openapi", schema(example = "api-1:4242"))]
    pub holder: Option<String>,
    /// When the lease runs out; once past, the next retry or the completer
    /// takes the key over.
    #[cfg_attr(feature = "openapi", schema(format = DateTime))]
    pub expires_at: String,
}

// Named `IdempotencyKeyInfo` in Rust (core's `IdempotencyKey` is the key
// itself), `IdempotencyKey` in the contract.
/// An idempotency key of the shop.
///
/// The members are declared in the order the server sends them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(
    feature = "openapi",
    schema(as = IdempotencyKey, example = json!({
        "object": "idempotency_key",
        "key": "order-123-pay",
        "state": "finished",
        "recovery_point": "finished",
        "request": {
            "method": "POST",
            "path": "/v1/payments",
            "fingerprint": "9f2c7d1e5b8a3f60c4e2d9b7a1f08e6c5d4b3a2918f7e6d5c4b3a29180f7e6d5"
        },
        "created_at": "2026-11-29T22:42:32.201Z",
        "repeats": 1,
        "last_repeat_at": "2026-11-29T22:42:40.007Z",
        "expires_at": "2026-11-30T22:42:32.243Z",
        "lease": null,
        "parked_until": null,
        "response_status": 201,
        "payment_id": "pay_01a2297968b375bcb36eb8e661248216",
        "refund_id": null
    }))
)]
pub struct IdempotencyKeyInfo {
    /// Always `idempotency_key`.
    pub object: IdempotencyKeyObject,
    /// The key.
    #[cfg_attr(feature = "openapi", schema(example = "order-123-pay"))]
    pub key: String,
    /// In progress or finished.
    pub state: KeyState,
    /// How far its operation got.
    pub recovery_point: KeyRecoveryPoint,
    /// The first request made with it.
    pub request: KeyRequest,
    /// When the first request came.
    #[cfg_attr(feature = "openapi", schema(format = DateTime))]
    pub created_at: String,
    /// How many requests with this key reached the database after the first
    /// (repeats an instance answered from its response cache are not counted).
    pub repeats: u64,
    /// When the last of those came; null before any.
    #[cfg_attr(feature = "openapi", schema(format = DateTime))]
    pub last_repeat_at: Option<String>,
    /// When a finished key stops being replayed (a request with it is then
    /// new; the order still cannot be paid twice).
    #[cfg_attr(feature = "openapi", schema(format = DateTime))]
    pub expires_at: String,
    /// Who holds it and until when, while in progress and held; null when
    /// finished or parked.
    pub lease: Option<KeyLease>,
    /// Until when it is parked (the outcome of an acquirer call is awaited;
    /// no one takes it over before), while it is; else null.
    #[cfg_attr(feature = "openapi", schema(format = DateTime))]
    pub parked_until: Option<String>,
    /// The status code of the stored answer, once finished; else null.
    pub response_status: Option<u16>,
    /// The payment it answers with (for a refund key: the refunded payment).
    pub payment_id: Option<String>,
    /// The refund it created, for a refund key; else null.
    pub refund_id: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_it_writes_in_declared_order() {
        let body = r#"{"object":"idempotency_key","key":"k","state":"in_progress","recovery_point":"payment_created","request":{"method":"POST","path":"/v1/payments","fingerprint":"00"},"created_at":"2026-11-29T22:42:32.201Z","repeats":0,"last_repeat_at":null,"expires_at":"2026-11-30T22:42:32.243Z","lease":{"holder":"api-1:1","expires_at":"2026-11-29T22:42:42.201Z"},"parked_until":null,"response_status":null,"payment_id":"pay_1","refund_id":null}"#;
        let key: IdempotencyKeyInfo = serde_json::from_str(body).unwrap();
        assert_eq!(key.state, KeyState::InProgress);
        assert_eq!(key.recovery_point, KeyRecoveryPoint::PaymentCreated);
        assert_eq!(serde_json::to_string(&key).unwrap(), body);
    }
}
