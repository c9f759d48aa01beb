//! The shops role: the API's tenants and their webhook endpoints (their
//! API keys are [`super::ApiKeys`]).

use async_trait::async_trait;

use super::StoreError;
use time::OffsetDateTime;

use crate::events::WebhookEndpoint;
use crate::webhook::WebhookSecret;
use crate::{SecretHash, ShopId};

/// The shops: registering one, its secret, its webhook endpoint.
#[async_trait]
pub trait Shops: Send + Sync + 'static {
    /// Registers a shop with the hash of its secret.
    async fn add_shop(&self, shop_id: &ShopId, secret: &SecretHash) -> Result<(), StoreError>;

    /// Sets a shop's webhook endpoint (or removes it, with `None`). `false`
    /// when there is no such shop.
    async fn set_webhook(
        &self,
        shop_id: &ShopId,
        endpoint: Option<&WebhookEndpoint>,
    ) -> Result<bool, StoreError>;

    /// Rolls a shop's webhook signing secret: `secret` signs from now on,
    /// and the one it replaces keeps signing too (a second signature on
    /// every delivery) until `old_valid_until`, by the store's clock. A
    /// secret rolled over before that is dropped (two at most). `false`
    /// when there is no such shop or it has no webhook.
    async fn roll_webhook_secret(
        &self,
        shop_id: &ShopId,
        secret: &WebhookSecret,
        old_valid_until: OffsetDateTime,
    ) -> Result<bool, StoreError>;
}
