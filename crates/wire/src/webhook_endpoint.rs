//! A webhook endpoint as `/v1/webhook-endpoints` shows it: never its
//! signing secret, except once, in the answer to the request that made it
//! (a create, or a secret roll).

use serde::{Deserialize, Serialize};

/// Always `webhook_endpoint`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum WebhookEndpointObject {
    /// `webhook_endpoint`.
    #[default]
    WebhookEndpoint,
}

/// A webhook endpoint of a shop: where its events go.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct WebhookEndpoint {
    /// `we_` and 32 hex digits.
    #[cfg_attr(
        feature = "openapi",
        schema(example = "we_01a2297968c07d11b0f4c7e8e0d6a3b1")
    )]
    pub id: String,
    /// Always `webhook_endpoint`.
    pub object: WebhookEndpointObject,
    /// `true` for an object of live mode (real money), `false` for test
    /// mode's (the simulator's). Absent only in answers stored before test
    /// mode existed, which were all live.
    #[serde(default = "crate::live")]
    pub livemode: bool,
    /// Where events are POSTed.
    #[cfg_attr(feature = "openapi", schema(example = "https://shop.example/webhooks"))]
    pub url: String,
    /// The event types it receives, sorted, or `["*"]` for every type (those
    /// added later too).
    #[cfg_attr(feature = "openapi", schema(example = json!(["payment.succeeded", "refund.succeeded"])))]
    pub enabled_events: Vec<String>,
    /// What it is for.
    pub description: Option<String>,
    /// Whether events are delivered to it now. While disabled, no delivery
    /// is made for new events and open ones wait.
    pub enabled: bool,
    /// `true` for the endpoint the operator set (`shops set-webhook`); the
    /// shop may change or delete it like its own.
    pub managed_by_operator: bool,
    /// When it was made (RFC 3339, UTC, milliseconds).
    pub created_at: String,
    /// While a rolled-over secret still signs (a second `v1=` on each
    /// delivery): when it stops.
    pub previous_secret_expires_at: Option<String>,
    /// The signing secret (`whsec_...`), in the answer to the create or the
    /// secret roll that made it only; never shown again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(example = "whsec_4f3a9c0e5b7d1f2a3c4e5f60718293a4b5c6d7e8f9011223")
    )]
    pub secret: Option<String>,
}

/// Hides the secret.
impl std::fmt::Debug for WebhookEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookEndpoint")
            .field("id", &self.id)
            .field("url", &self.url)
            .field("enabled_events", &self.enabled_events)
            .field("enabled", &self.enabled)
            .field("secret", &self.secret.as_ref().map(|_| "***"))
            .finish_non_exhaustive()
    }
}

/// The body of `POST /v1/webhook-endpoints`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CreateWebhookEndpoint {
    /// Where events go: `https://` (a public address; plain `http` only
    /// where the operator allows it), at most 2048 bytes.
    #[cfg_attr(feature = "openapi", schema(example = "https://shop.example/webhooks"))]
    pub url: String,
    /// The event types wanted (`payment.succeeded`...), or `["*"]` for all.
    #[cfg_attr(feature = "openapi", schema(example = json!(["payment.succeeded"])))]
    pub enabled_events: Vec<String>,
    /// What it is for (at most 200 characters).
    #[serde(default)]
    pub description: Option<String>,
}

/// The body of `POST /v1/webhook-endpoints/{id}`: the fields to change.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct UpdateWebhookEndpoint {
    /// New event types, or `["*"]`.
    #[serde(default)]
    pub enabled_events: Option<Vec<String>>,
    /// `false` to pause deliveries (open ones wait), `true` to resume them.
    #[serde(default)]
    pub enabled: Option<bool>,
    /// New description; `""` clears it.
    #[serde(default)]
    pub description: Option<String>,
}

/// The body of `POST /v1/webhook-endpoints/{id}/roll-secret`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RollWebhookEndpointSecret {
    /// Seconds the old secret keeps signing beside the new one: 0 (at once)
    /// to 604800 (7 days); 86400 (24 h) by default.
    #[serde(default)]
    #[cfg_attr(
        feature = "openapi",
        schema(minimum = 0, maximum = 604800, example = 3600)
    )]
    pub expire_old_in_seconds: Option<u64>,
}

/// The body of `POST /v1/events/{id}/resend`: `{}` (every endpoint that
/// wants the event), or one endpoint.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ResendEvent {
    /// Only to this endpoint (`we_...`).
    #[serde(default)]
    pub endpoint_id: Option<String>,
}
