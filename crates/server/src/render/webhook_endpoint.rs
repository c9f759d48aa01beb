//! A webhook endpoint as `/v1/webhook-endpoints` shows it.

use chargeonce_core::endpoint::{Endpoint, Origin};
use chargeonce_wire as wire;

use super::event::timestamp;

/// The endpoint as the API shows it, with `secret` only in the answer to
/// the request that made it (a create or a roll).
pub fn endpoint_view(endpoint: &Endpoint, secret: Option<&str>) -> wire::WebhookEndpoint {
    wire::WebhookEndpoint {
        id: endpoint.id.to_string(),
        object: wire::WebhookEndpointObject::WebhookEndpoint,
        livemode: endpoint.shop_id.is_live(),
        url: endpoint.url.clone(),
        enabled_events: endpoint
            .filter
            .names()
            .into_iter()
            .map(str::to_owned)
            .collect(),
        description: endpoint.description.clone(),
        enabled: endpoint.enabled,
        managed_by_operator: endpoint.origin == Origin::Operator,
        created_at: timestamp(endpoint.created_at_ms).unwrap_or_default(),
        previous_secret_expires_at: endpoint.previous_secret_until_ms.and_then(timestamp),
        secret: secret.map(str::to_owned),
    }
}
