//! The shapes of the API's lists and of an idempotency key, as the client
//! reads them, and the parameters of a list: self-contained serde structs
//! ([`Page`], [`ListParams`], [`PaymentListParams`], [`IdempotencyKeyInfo`],
//! [`KeyRequest`], [`KeyLease`]).

use serde::{Deserialize, Serialize};

/// One page of a list (`{"object": "list", "data": [...], "has_more": bool}`),
/// newest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Page<T> {
    /// The page's objects, newest first.
    pub data: Vec<T>,
    /// Whether more objects lie beyond this page in the direction it was
    /// read (older after `starting_after` or with no cursor, newer before
    /// `ending_before`).
    pub has_more: bool,
}

/// Paging of a list: at most one of `starting_after` and `ending_before`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListParams {
    /// 1 to 100 objects (the server's default: 10).
    pub limit: Option<u32>,
    /// The page after (older than) this object id.
    pub starting_after: Option<String>,
    /// The page before (newer than) this object id.
    pub ending_before: Option<String>,
}

impl ListParams {
    /// The query pairs.
    pub fn pairs(&self) -> Vec<(&'static str, String)> {
        let mut pairs = Vec::new();
        if let Some(limit) = self.limit {
            pairs.push(("limit", limit.to_string()));
        }
        if let Some(id) = &self.starting_after {
            pairs.push(("starting_after", id.clone()));
        }
        if let Some(id) = &self.ending_before {
            pairs.push(("ending_before", id.clone()));
        }
        pairs
    }
}

/// Paging and filters of `GET /v1/payments`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PaymentListParams {
    /// Paging.
    pub page: ListParams,
    /// Only payments in this status (`pending`, `succeeded`, `declined`).
    pub status: Option<String>,
    /// Only the payments of this order.
    pub reference: Option<String>,
    /// Only payments created at or after this RFC 3339 time.
    pub created_gte: Option<String>,
    /// Only payments created before this RFC 3339 time.
    pub created_lt: Option<String>,
}

impl PaymentListParams {
    /// The query pairs.
    pub fn pairs(&self) -> Vec<(&'static str, String)> {
        let mut pairs = self.page.pairs();
        for (name, value) in [
            ("status", &self.status),
            ("reference", &self.reference),
            ("created_gte", &self.created_gte),
            ("created_lt", &self.created_lt),
        ] {
            if let Some(value) = value {
                pairs.push((name, value.clone()));
            }
        }
        pairs
    }
}

/// The first request made with a key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyRequest {
    /// Its method.
    pub method: String,
    /// Its path.
    pub path: String,
    /// Its fingerprint, lower-case hex.
    pub fingerprint: String,
}

/// Who holds an in-progress key's lease.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyLease {
    /// The instance that holds it, when known.
    pub holder: Option<String>,
    /// When the lease runs out (RFC 3339).
    pub expires_at: String,
}

/// An idempotency key of the shop (`GET /v1/idempotency-keys/{key}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdempotencyKeyInfo {
    /// The key.
    pub key: String,
    /// `in_progress` or `finished`.
    pub state: String,
    /// How far its operation got.
    pub recovery_point: String,
    /// The first request made with it.
    pub request: KeyRequest,
    /// When the first request came (RFC 3339).
    pub created_at: String,
    /// How many requests with it reached the database after the first.
    pub repeats: u64,
    /// When the last of those came (RFC 3339).
    pub last_repeat_at: Option<String>,
    /// When a finished key stops being replayed (RFC 3339).
    pub expires_at: String,
    /// Who holds it, while in progress and held.
    pub lease: Option<KeyLease>,
    /// Until when it is parked, while it is.
    pub parked_until: Option<String>,
    /// The stored answer's status code, once finished.
    pub response_status: Option<u16>,
    /// The payment it answers with (for a refund key: the refunded payment).
    pub payment_id: Option<String>,
    /// The refund it created, for a refund key.
    pub refund_id: Option<String>,
}
