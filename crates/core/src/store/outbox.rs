//! The outbox role: the merchant events, for the shop's API and the relay.

use std::time::Duration;

use async_trait::async_trait;

use super::StoreError;
use crate::ShopId;
use crate::endpoint::EndpointId;
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
    ///
    /// Due again: a delivery to every enabled endpoint whose filter matches
    /// the event (or only to `endpoint`, when named), made if there was
    /// none. The event as it is then, and how many deliveries were made
    /// due (0 when no endpoint qualifies).
    async fn resend_event(
        &self,
        shop_id: &ShopId,
        id: &EventId,
        endpoint: Option<&EndpointId>,
    ) -> Result<Option<(Event, usize)>, StoreError>;

    /// Claims up to `limit` deliveries that are due, to enabled endpoints,
    /// for one attempt each: a lease of `lease` keeps other relays off them
    /// meanwhile. A delivery is only due once every earlier delivery of its
    /// payment to the same endpoint is delivered or given up (per-payment
    /// order per endpoint). Oldest first.
    async fn claim_due_events(
        &self,
        limit: u32,
        lease: Duration,
    ) -> Result<Vec<DueEvent>, StoreError>;

    /// Records how an attempt of the event's delivery to the endpoint
    /// ended and ends its lease: delivered,
    /// or due again later, or given up once the give-up time has passed.
    /// `true` when this attempt gave the event up (the relay counts it as
    /// `gave_up`); `false` otherwise, and when there is no such event.
    async fn record_attempt(
        &self,
        shop_id: &ShopId,
        id: &EventId,
        endpoint_id: &EndpointId,
        outcome: &AttemptOutcome,
    ) -> Result<bool, StoreError>;
}
