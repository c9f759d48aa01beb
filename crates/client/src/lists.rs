//! The API's lists and idempotency keys as the client reads them (the wire
//! crate's types: [`Page`], [`IdempotencyKeyInfo`], [`KeyRequest`],
//! [`KeyLease`]), and the parameters of a list ([`ListParams`],
//! [`PaymentListParams`]).

/// One page of a list (`{"data": [...], "has_more": bool, "object": "list"}`),
/// newest first: the wire crate's envelope, holding the client's model of
/// each object. `has_more` says whether more objects lie beyond this page
/// in the direction it was read (older after `starting_after` or with no
/// cursor, newer before `ending_before`).
pub type Page<T> = chargeonce_wire::List<T>;

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

/// An idempotency key of the shop (`GET /v1/idempotency-keys/{key}`),
/// as the wire crate defines it.
pub use chargeonce_wire::IdempotencyKeyInfo;
pub use chargeonce_wire::{KeyLease, KeyRecoveryPoint, KeyRequest, KeyState};
