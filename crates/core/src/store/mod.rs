//! The store: where keys and payments live, and the final arbiter of races.
//!
//! Each method is one atomic step of the engine. Implementations live in the
//! `chargeonce-store` crate (PostgreSQL and SQLite); the engine only sees
//! [`Store`]. The methods are grouped in role traits, one a file, so a
//! worker can ask for only the role it uses (the relay an
//! `Arc<dyn Outbox>`, the sweeper a `&dyn Keys`): [`Keys`], [`Refunds`], [`Authorizations`],
//! [`Payments`], [`Reconciliation`], [`Outbox`], [`Shops`], [`Health`],
//! [`History`], [`Findings`] and [`Operator`].
//! [`Store`] is all of them, implemented for every type that implements
//! them, so `Arc<dyn Store>` upcasts to any one.
//!
//! A method of a role is called on a `dyn Store` as it is; on a concrete
//! store (or a generic one), the role's trait must be in scope:
//! `use chargeonce_core::store::prelude::*;` brings them all.

use async_trait::async_trait;

mod api_keys;
mod authorizations;
mod endpoints;
mod error;
mod findings;
mod history;
mod keys;
mod operator;
mod outbox;
mod page;
mod payments;
mod reconciliation;
mod refunds;
mod shops;

pub use api_keys::ApiKeys;
pub use authorizations::{Authorizations, CaptureClaim, ReleaseClaim};
pub use endpoints::WebhookEndpoints;
pub use error::{BoxError, StoreError};
pub use findings::Findings;
pub use history::{History, KeyRepeats};
pub use keys::{
    Acquired, CancelClaim, Claim, ClaimRequest, FinishOutcome, KeyInfo, KeyLease, KeyRecord,
    KeyTiming, Keys, Lease, LeaseToken, RecoveryPoint, StalledKey, StoredResponse,
};
pub use operator::{
    Operator, PoolUse, ShopSummary, StoreCounts, StorePressure, WaitHistogram, WriteQueue,
};
pub use outbox::Outbox;
pub use page::{Cursor, MAX_PAGE_LIMIT, Page, PageLimit, PageRequest};
pub use payments::{PaymentFilter, Payments};
pub use reconciliation::{EventRecorded, InboundEvent, Reconciliation, SettleOutcome};
pub use refunds::{RefundAnswer, RefundClaim, Refunds};
pub use shops::Shops;

/// Every role trait, and [`Store`], to call a store's methods on a concrete
/// or generic store.
pub mod prelude {
    pub use super::{
        ApiKeys, Authorizations, Findings, Health, History, Keys, Operator, Outbox, Payments,
        Reconciliation, Refunds, Shops, Store, WebhookEndpoints,
    };
}

/// Whether the store answers (readiness checks).
#[async_trait]
pub trait Health: Send + Sync + 'static {
    /// Whether the store answers.
    async fn ping(&self) -> Result<(), StoreError>;
}

/// Storage for keys, payments and shops: every role. Every method is
/// atomic; leases and expiry are judged by the store's clock, never the
/// caller's.
pub trait Store:
    Keys
    + ApiKeys
    + Refunds
    + Authorizations
    + Payments
    + Reconciliation
    + Outbox
    + Shops
    + WebhookEndpoints
    + Health
    + History
    + Findings
    + Operator
{
}

impl<T> Store for T where
    T: Keys
        + ApiKeys
        + Refunds
        + Authorizations
        + Payments
        + Reconciliation
        + Outbox
        + Shops
        + WebhookEndpoints
        + WebhookEndpoints
        + Health
        + History
        + Findings
        + Operator
{
}
