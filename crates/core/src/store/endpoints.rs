//! The webhook endpoints role: a shop's endpoints, made and managed through
//! the API (the operator's one is [`super::Shops::set_webhook`]).

use std::time::Duration;

use async_trait::async_trait;

use super::StoreError;
use crate::ShopId;
use crate::api_key::MakingRequest;
use crate::endpoint::{
    Endpoint, EndpointId, EndpointRefusal, EndpointUpdate, NewEndpoint, StoredEndpoint,
};
use crate::webhook::WebhookSecret;

/// A shop's webhook endpoints.
#[async_trait]
pub trait WebhookEndpoints: Send + Sync + 'static {
    /// Stores a new endpoint, unless the shop is unknown or has
    /// [`crate::endpoint::MAX_ENDPOINTS`] endpoints (checked in the same
    /// transaction). When it carries its making request and an endpoint of
    /// the shop was made with the same idempotency key, nothing is written:
    /// that endpoint is returned as replayed (same fingerprint), or the
    /// request is refused ([`EndpointRefusal::RequestReused`]). Checked
    /// first, so a repeat is answered even at the cap.
    async fn add_endpoint(
        &self,
        endpoint: &NewEndpoint,
    ) -> Result<Result<StoredEndpoint, EndpointRefusal>, StoreError>;

    /// A shop's endpoints (not deleted ones), oldest first.
    async fn endpoints(&self, shop_id: &ShopId) -> Result<Vec<Endpoint>, StoreError>;

    /// One endpoint of a shop; `None` when unknown or deleted.
    async fn endpoint(
        &self,
        shop_id: &ShopId,
        id: &EndpointId,
    ) -> Result<Option<Endpoint>, StoreError>;

    /// Changes an endpoint; `None` when unknown or deleted. Disabling parks
    /// its open deliveries; enabling makes them due now, their give-up
    /// clock restarted.
    async fn update_endpoint(
        &self,
        shop_id: &ShopId,
        id: &EndpointId,
        update: &EndpointUpdate,
    ) -> Result<Option<Endpoint>, StoreError>;

    /// Deletes an endpoint: no delivery is written for it any more, its
    /// open ones are given up, its secrets are wiped. `None` when unknown or
    /// deleted already.
    async fn delete_endpoint(
        &self,
        shop_id: &ShopId,
        id: &EndpointId,
    ) -> Result<Option<Endpoint>, StoreError>;

    /// Rolls an endpoint's signing secret: `secret` signs from now on and
    /// the one it replaces keeps signing (a second signature) for
    /// `overlap`, by the store's clock; one rolled over before is dropped.
    /// A repeat of the roll (the same idempotency key as the request that
    /// made the current secret, with the same fingerprint) writes nothing
    /// and returns the endpoint as replayed; the same key with another
    /// request is refused.
    async fn roll_endpoint_secret(
        &self,
        shop_id: &ShopId,
        id: &EndpointId,
        secret: &WebhookSecret,
        overlap: Duration,
        request: &MakingRequest,
    ) -> Result<Result<StoredEndpoint, EndpointRefusal>, StoreError>;
}
