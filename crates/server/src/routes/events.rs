//! `GET /v1/events`, `GET /v1/events/{id}`, `POST /v1/events/{id}/resend`:
//! a shop's merchant events and their delivery log.

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use chargeonce_core::endpoint::EndpointId;
use chargeonce_core::events::{EventId, EventQuery, EventType};
use chargeonce_wire as wire;
use serde::Deserialize;

use crate::AppState;
use crate::extract::{
    AuthenticatedShop, IdempotencyKeyHeader, OptionalJsonBody, PathId, StrictQuery,
};
use crate::problem::{Problem, ProblemCode};
use crate::render::event::event_view;
use crate::respond::store_problem;

/// Events per page unless `limit` says otherwise.
pub const DEFAULT_LIMIT: u32 = 20;
/// The largest `limit`.
pub const MAX_LIMIT: u32 = 100;

fn not_found() -> Problem {
    Problem::new(ProblemCode::NotFound, "no such event for this shop")
}

fn invalid(detail: impl Into<String>) -> Problem {
    Problem::new(ProblemCode::InvalidRequest, detail)
}

/// The query of `GET /v1/events`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    limit: Option<u32>,
    starting_after: Option<String>,
    #[serde(rename = "type")]
    event_type: Option<String>,
}

/// The authenticated shop's events, newest first: `?limit=` (1 to 100,
/// default 20), `?starting_after=<the last id of the previous page>`,
/// `?type=payment.succeeded`.
#[utoipa::path(
    get,
    path = "/v1/events",
    operation_id = "listEvents",
    tag = "events",
    summary = "The shop's events, newest first",
    security(("shop_basic" = [])),
    params(
        ("limit" = Option<u32>, Query, description = "Events per page: 1 to 100 (default 20).", minimum = 1, maximum = 100, example = 20),
        ("starting_after" = Option<String>, Query, description = "The last id of the previous page.",
            pattern = "^evt_[0-9a-f]{32}$", example = "evt_01a2297968c07d11b0f4c7e8e0d6a3b1"),
        ("type" = Option<wire::EventType>, Query, description = "Only events of this type."),
    ),
    responses(
        (status = 200, description = "A page of events; `has_more` tells whether another follows.", body = wire::List<wire::Event>),
        (status = 422, description = "`invalid_request`: `limit` out of 1 to 100, `starting_after` not an event id, an unknown `type`, or an unknown or repeated parameter."),
    ),
)]
pub async fn list(
    State(state): State<AppState>,
    AuthenticatedShop(shop_id): AuthenticatedShop,
    StrictQuery(query): StrictQuery<ListQuery>,
) -> Result<Response, Problem> {
    let limit = query.limit.unwrap_or(DEFAULT_LIMIT);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(invalid(format!("limit must be 1 to {MAX_LIMIT}")));
    }
    let starting_after = query
        .starting_after
        .map(|id| EventId::parse(&id).map_err(|_| invalid("starting_after is not an event id")))
        .transpose()?;
    let event_type = query
        .event_type
        .map(|t| {
            EventType::parse(&t).ok_or_else(|| {
                invalid("type must be payment.succeeded, payment.declined, refund.succeeded or refund.failed")
            })
        })
        .transpose()?;
    // One more than asked tells whether another page follows.
    let mut events = state
        .store
        .events(
            &shop_id,
            &EventQuery {
                limit: limit + 1,
                starting_after,
                event_type,
            },
        )
        .await
        .map_err(store_problem)?;
    let has_more = events.len() > limit as usize;
    events.truncate(limit as usize);
    let list = wire::List::page(events.iter().map(event_view).collect(), has_more);
    Ok(Json(list).into_response())
}

/// One event of the authenticated shop, with its delivery log.
#[utoipa::path(
    get,
    path = "/v1/events/{id}",
    operation_id = "getEvent",
    tag = "events",
    summary = "Get an event and its delivery log",
    security(("shop_basic" = [])),
    params(("id" = String, Path, description = "The event's id (`evt_...`).", example = "evt_01a2297968c07d11b0f4c7e8e0d6a3b1")),
    responses(
        (status = 200, description = "The event.", body = wire::Event),
        (status = 404, description = "`not_found`: no such event for this shop."),
    ),
)]
pub async fn get(
    State(state): State<AppState>,
    AuthenticatedShop(shop_id): AuthenticatedShop,
    PathId(id): PathId,
) -> Result<Response, Problem> {
    let id = EventId::parse(&id).map_err(|_| not_found())?;
    let event = state
        .store
        .event(&shop_id, &id)
        .await
        .map_err(store_problem)?
        .ok_or_else(not_found)?;
    Ok(Json(event_view(&event)).into_response())
}

/// Makes an event due again now (a delivered or given-up one too) at every
/// enabled endpoint that wants it, or at the one named: the relay sends it
/// again with the same id and body. Like every state-changing POST it needs
/// an `Idempotency-Key`; repeating it is harmless (at most one more delivery,
/// which the receiver deduplicates by event id), so the key is not stored.
#[utoipa::path(
    post,
    path = "/v1/events/{id}/resend",
    operation_id = "resendEvent",
    tag = "events",
    summary = "Deliver an event again",
    description = "Makes the event due again now (a delivered or given-up one too) at every enabled webhook endpoint whose `enabled_events` match it, or only at `endpoint_id`: it is sent again with the same id and body. An endpoint made after the event gets it too. Repeating it is harmless, so the key is required but not stored. The body may be left out.",
    security(("shop_basic" = [])),
    params(
        ("id" = String, Path, description = "The event's id (`evt_...`).", example = "evt_01a2297968c07d11b0f4c7e8e0d6a3b1"),
        ("Idempotency-Key" = String, Header, description = "1 to 255 visible ASCII characters, exactly one header (required on every state-changing POST; not stored here).",
            min_length = 1, max_length = 512, pattern = r#"^(?:[!#-~][!-~]{0,254}|"(?:[!#-\[\]-~]|\\["\\]){1,255}")$"#, example = "evt-resend-1"),
    ),
    request_body(content = wire::ResendEvent, content_type = "application/json",
        description = "Optional (no body is `{}`): `{\"endpoint_id\": \"we_...\"}` to resend to one endpoint only."),
    responses(
        (status = 202, description = "Due again; the relay will deliver it.", body = wire::Event),
        (status = 400, description = "`missing_idempotency_key`, `invalid_idempotency_key`, `duplicate_idempotency_key`, `malformed_json`: the key header is missing, malformed or repeated, or the body is not JSON."),
        (status = 404, description = "`not_found`: no such event (or endpoint) for this shop."),
        (status = 409, description = "`no_webhook_endpoint`: no enabled endpoint wants this event (or the one named is disabled or does not want its type). Nothing changed."),
        (status = 415, description = "`unsupported_media_type`: a body that is not `application/json`."),
        (status = 422, description = "`invalid_request`: an unknown field, or `endpoint_id` not an endpoint id."),
    ),
)]
pub async fn resend(
    State(state): State<AppState>,
    AuthenticatedShop(shop_id): AuthenticatedShop,
    IdempotencyKeyHeader(_key): IdempotencyKeyHeader,
    PathId(id): PathId,
    OptionalJsonBody(body): OptionalJsonBody,
) -> Result<Response, Problem> {
    let id = EventId::parse(&id).map_err(|_| not_found())?;
    let request = body
        .filter(|body| !body.is_null())
        .map(|body| wire::ResendEvent::deserialize(&body).map_err(|e| invalid(e.to_string())))
        .transpose()?
        .unwrap_or_default();
    let endpoint = request
        .endpoint_id
        .map(|id| EndpointId::parse(&id).map_err(|_| invalid("endpoint_id is not an endpoint id")))
        .transpose()?;
    if let Some(endpoint) = &endpoint {
        state
            .store
            .endpoint(&shop_id, endpoint)
            .await
            .map_err(store_problem)?
            .ok_or_else(|| {
                Problem::new(
                    ProblemCode::NotFound,
                    "no such webhook endpoint for this shop",
                )
            })?;
    }
    let (event, due) = state
        .store
        .resend_event(&shop_id, &id, endpoint.as_ref())
        .await
        .map_err(store_problem)?
        .ok_or_else(not_found)?;
    if due == 0 {
        return Err(Problem::new(
            ProblemCode::NoWebhookEndpoint,
            "no enabled webhook endpoint wants this event; nothing was resent",
        ));
    }
    Ok((axum::http::StatusCode::ACCEPTED, Json(event_view(&event))).into_response())
}
