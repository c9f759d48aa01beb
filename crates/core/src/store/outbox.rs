//! The outbox role: the merchant events, for the shop's API and the relay.

use std::time::Duration;

use async_trait::async_trait;

use super::StoreError;
use crate::ShopId;
use crate::events::{AttemptOutcome, DueEvent, Event, EventId, EventQuery};

/// The merchant events written with their transitions: a shop's reads and
/// resends, and the relay's claims and delivery attempts.
#[async_trait]
pub trait Outbox: Send + Sync + 'static {
    /// A shop's merchant events, newest first.
    async fn events(&self, shop_id: &ShopId, query: &EventQuery) -> Result<Vec<Event>, StoreError>;

    /// One merchant event of one shop, with its delivery log.
    async fn event(&self, shop_id: &ShopId, id: &EventId) -> Result<Option<Event>, StoreError>;

    /// Makes an event of the shop due again now, as if just written (its
    /// give-up clock restarts; its attempts are kept). `None` when the shop
    /// has no such event.
    async fn resend_event(
        &self,
        shop_id: &ShopId,
        id: &EventId,
    ) -> Result<Option<Event>, StoreError>;

    /// Claims up to `limit` events that are due, of shops with a webhook
    /// endpoint, for one delivery attempt each: a lease of `lease` keeps
    /// other relays off them meanwhile. An event is only due once every
    /// earlier event of its payment is delivered or given up (per-payment
    /// order). Oldest first.
    async fn claim_due_events(
        &self,
        limit: u32,
        lease: Duration,
    ) -> Result<Vec<DueEvent>, StoreError>;

    /// Records how a delivery attempt ended and ends its lease: delivered,
    /// or due again later, or given up once the give-up time has passed.
    /// `true` when this attempt gave the event up (the relay counts it as
    /// `gave_up`); `false` otherwise, and when there is no such event.
    async fn record_attempt(
        &self,
        id: &EventId,
        outcome: &AttemptOutcome,
    ) -> Result<bool, StoreError>;
}
