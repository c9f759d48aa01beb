//! `GET /console/events?shop=`: recent merchant events with their delivery
//! state, and `POST /console/events/{id}/resend` (also the payment page's
//! resend button).
//!
//! A resend goes to every endpoint that wants the event, or to the one its
//! form names (each delivery's own button). Its key is `resend-<event
//! id>-<attempts so far>` (with `-<endpoint id>` and that delivery's
//! attempts for one endpoint): a second click on the same button (the same
//! count) is answered "already resent" and does nothing. It is remembered on this instance only; a resend that slips
//! through on another costs at most one more delivery, which the shop
//! deduplicates by event id.

use askama::Template;
use axum::Form;
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Redirect, Response};
use chargeonce_core::ShopId;
use chargeonce_core::endpoint::EndpointId;
use chargeonce_core::events::{EventId, EventQuery};
use serde::Deserialize;

use super::payment::EventRow;
use super::{Chrome, ConsoleError, Operator, back_to, given, html};
use crate::Console;
use chargeonce_core::api_key::Mode;
use chargeonce_server::extract::PathId;

/// Events listed per shop.
const PER_SHOP: u32 = 50;

/// The filter.
#[derive(Debug, Default, Deserialize)]
pub struct EventsQuery {
    shop: Option<String>,
    mode: Option<String>,
}

/// The page.
#[derive(Template)]
#[template(path = "console/events.html")]
struct EventsPage {
    page: Chrome,
    shop: String,
    /// `live` or `test`: the mode shown (one at a time).
    mode: &'static str,
    shops: Vec<String>,
    events: Vec<EventRow>,
    back: String,
}

/// `GET /console/events`: one shop's recent events, or every shop's.
pub async fn page(
    State(state): State<Console>,
    operator: Operator,
    Query(query): Query<EventsQuery>,
) -> Result<Response, ConsoleError> {
    let shops: Vec<ShopId> = state
        .store()
        .shops()
        .await?
        .into_iter()
        .map(|s| s.shop_id)
        .collect();
    let mode = match given(&query.mode) {
        None => Mode::Live,
        Some(mode) => Mode::parse(mode)
            .ok_or_else(|| ConsoleError::BadRequest("mode: live or test".to_owned()))?,
    };
    let wanted: Vec<ShopId> = match given(&query.shop) {
        Some(shop) => {
            vec![ShopId::new(shop).map_err(|e| ConsoleError::BadRequest(format!("shop: {e}")))?]
        }
        None => shops.clone(),
    };
    // Each shop in the mode shown: its events are stored under that mode.
    let wanted: Vec<ShopId> = wanted.iter().map(|shop| shop.in_mode(mode)).collect();
    let mut events = Vec::new();
    for shop in &wanted {
        let query = EventQuery {
            limit: PER_SHOP,
            starting_after: None,
            event_type: None,
        };
        events.extend(state.store().events(shop, &query).await?);
    }
    events.sort_by_key(|e| std::cmp::Reverse(e.created_at_ms));
    events.truncate(PER_SHOP as usize * 2);
    let shop = given(&query.shop).unwrap_or_default().to_owned();
    let back = if shop.is_empty() {
        format!("/console/events?mode={}", mode.as_str())
    } else {
        format!(
            "/console/events?shop={}&mode={}",
            super::encode(&shop),
            mode.as_str()
        )
    };
    html(&EventsPage {
        page: Chrome::new(&operator, "Merchant events", "events"),
        shop,
        mode: mode.as_str(),
        shops: shops.iter().map(|s| s.as_str().to_owned()).collect(),
        events: events.iter().map(EventRow::of).collect(),
        back,
    })
}

/// The resend form.
#[derive(Debug, Deserialize)]
pub struct ResendForm {
    csrf: Option<String>,
    key: Option<String>,
    back: Option<String>,
    endpoint: Option<String>,
}

/// `POST /console/events/{id}/resend`: makes the event due again (once per
/// key), then 303 back.
pub async fn resend(
    State(state): State<Console>,
    operator: Operator,
    PathId(id): PathId,
    Form(form): Form<ResendForm>,
) -> Result<Response, ConsoleError> {
    operator.check_csrf(form.csrf.as_deref())?;
    let back = back_to(form.back.as_deref(), "/console/events");
    let not_found = || ConsoleError::NotFound("no such event".to_owned());
    let id = EventId::parse(&id).map_err(|_| not_found())?;
    let shop = state.store().event_shop(&id).await?.ok_or_else(not_found)?;
    let event = state
        .store()
        .event(&shop, &id)
        .await?
        .ok_or_else(not_found)?;
    let endpoint = form
        .endpoint
        .as_deref()
        .filter(|e| !e.is_empty())
        .map(|e| EndpointId::parse(e).map_err(|_| not_found()))
        .transpose()?;
    let (attempts, current) = match &endpoint {
        None => {
            let attempts = event.delivery().attempts;
            (attempts, format!("resend-{}-{}", event.id, attempts))
        }
        Some(endpoint) => {
            let attempts = event
                .deliveries
                .iter()
                .find(|d| &d.endpoint_id == endpoint)
                .map_or(0, |d| d.delivery.attempts);
            (
                attempts,
                format!("resend-{}-{endpoint}-{attempts}", event.id),
            )
        }
    };
    let key = form.key.unwrap_or_default();
    let message = if key != current {
        format!(
            "event {id} was not resent: it has {} attempt(s) since the page was shown; \
             reload to resend it",
            attempts
        )
    } else if !state.console.first_resend(&key) {
        format!("event {id} was already resent (its delivery is due again)")
    } else {
        let (_, due) = state
            .store()
            .resend_event(&shop, &id, endpoint.as_ref())
            .await?
            .ok_or_else(not_found)?;
        tracing::info!(event = %id, shop = %shop, due, "console resend");
        if due == 0 {
            format!(
                "event {id} was not resent: no enabled webhook endpoint of its shop (or not the one named) wants it"
            )
        } else {
            format!("event {id} resent: due again now at {due} endpoint(s)")
        }
    };
    state.console.sessions.flash(&operator.session, message);
    Ok(Redirect::to(&back).into_response())
}
