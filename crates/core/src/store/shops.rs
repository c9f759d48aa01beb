//! The shops role: the API's tenants and their webhook endpoints (their
//! API keys are [`super::ApiKeys`]).

use async_trait::async_trait;

use super::StoreError;
use std::time::Duration;

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
    /// every delivery) for `overlap`, counted and compared by the store's
    /// clock. A secret rolled over before that is dropped (two at most).
    /// The end of the overlap; `None` when there is no such shop, it has no
    /// webhook, or `secret` is the one it signs with already (a roll to the
    /// same secret would rotate nothing).
    async fn roll_webhook_secret(
        &self,
        shop_id: &ShopId,
        secret: &WebhookSecret,
        overlap: Duration,
    ) -> Result<Option<OffsetDateTime>, StoreError>;

    /// Wipes the rolled-over webhook secrets whose overlap has ended (by
    /// the store's clock): a secret rotated away after a leak should not
    /// stay in the database. How many were wiped.
    async fn forget_rolled_webhook_secrets(&self) -> Result<u64, StoreError>;
}
