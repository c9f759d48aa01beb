//! `GET /console/shops/{id}/webhook-endpoints`: a shop's webhook endpoints
//! (never a secret): the URL, the event types each receives, whether it is
//! on, who made it (the operator's `set-webhook`, or the shop through the
//! API), and until when a rolled-over secret still signs. The deliveries
//! of each event to each endpoint are on the events pages.

use askama::Template;
use axum::extract::State;
use axum::response::Response;
use chargeonce_core::ShopId;
use chargeonce_core::endpoint::{Endpoint, Origin};
use chargeonce_server::extract::PathId;

use super::{Chrome, ConsoleError, Operator, html, when_ms};
use crate::Console;

/// An endpoint's row.
pub struct EndpointRow {
    /// Its id.
    pub id: String,
    /// Its URL.
    pub url: String,
    /// The event types it receives (`*`: all).
    pub events: String,
    /// `enabled` or `disabled`.
    pub state: &'static str,
    /// `operator` or `api`.
    pub origin: &'static str,
    /// What it is for.
    pub description: Option<String>,
    /// When it was made.
    pub created: String,
    /// Until when a rolled-over secret still signs.
    pub rollover_ends: Option<String>,
}

impl EndpointRow {
    fn of(endpoint: &Endpoint) -> Self {
        Self {
            id: endpoint.id.to_string(),
            url: endpoint.url.clone(),
            events: endpoint.filter.names().join(", "),
            state: if endpoint.enabled {
                "enabled"
            } else {
                "disabled"
            },
            origin: match endpoint.origin {
                Origin::Operator => "operator",
                Origin::Api => "api",
            },
            description: endpoint.description.clone(),
            created: when_ms(endpoint.created_at_ms),
            rollover_ends: endpoint.previous_secret_until_ms.map(when_ms),
        }
    }
}

/// The page.
#[derive(Template)]
#[template(path = "console/webhook_endpoints.html")]
struct EndpointsPage {
    page: Chrome,
    /// The shop's own id.
    shop: String,
    /// `live` or `test`: whose endpoints these are (`{shop}.test` in the
    /// path shows test mode's).
    mode: &'static str,
    endpoints: Vec<EndpointRow>,
}

/// `GET /console/shops/{id}/webhook-endpoints`.
pub async fn page(
    State(state): State<Console>,
    operator: Operator,
    PathId(shop): PathId,
) -> Result<Response, ConsoleError> {
    let not_found = || ConsoleError::NotFound("no such shop".to_owned());
    let shop = ShopId::new(shop).map_err(|_| not_found())?;
    let known = state
        .store()
        .shops()
        .await?
        .iter()
        .any(|s| s.shop_id == shop.shop());
    if !known {
        return Err(not_found());
    }
    let endpoints = state.store().endpoints(&shop).await?;
    html(&EndpointsPage {
        page: Chrome::new(&operator, "Webhook endpoints", "shops"),
        shop: shop.shop().as_str().to_owned(),
        mode: shop.mode().as_str(),
        endpoints: endpoints.iter().map(EndpointRow::of).collect(),
    })
}
