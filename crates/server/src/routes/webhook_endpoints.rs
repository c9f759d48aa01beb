//! `/v1/webhook-endpoints`: a shop makes, lists, changes, deletes its
//! webhook endpoints and rolls their signing secrets, with a `full` key
//! (the scope check refuses every other key before a handler runs).
//!
//! A URL is judged at registration by the workers' egress guard
//! ([`chargeonce_core::endpoint::UrlCheck`]): `https` unless the operator
//! allows `http`, and a host whose every address is public unless the
//! operator allows its network. The relay judges it again at every
//! connection.
//!
//! A create or a secret roll needs an `Idempotency-Key`, kept on the
//! endpoint with the request's fingerprint: a repeat answers the endpoint,
//! `201`/`200` with `Idempotent-Replayed: true`, as it is now and **without
//! its secret** (shown to the first answer only), and changes nothing; the
//! same key with another request is `422 idempotency_key_reused`. An update
//! sets values and a delete deletes: each is idempotent by nature, so an
//! update's key is required but not stored, and a delete takes none.

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::http::header::LOCATION;
use axum::response::{IntoResponse, Response};
use chargeonce_core::endpoint::{
    EndpointId, EndpointRefusal, EndpointUpdate, EventFilter, MAX_DESCRIPTION, MAX_URL,
    NewEndpoint, Origin, StoredEndpoint,
};
use chargeonce_core::webhook::WebhookSecret;
use chargeonce_wire as wire;
use serde::Deserialize;

use crate::AppState;
use crate::extract::{AuthenticatedShop, IdempotencyKeyHeader, JsonBody, PathId};
use crate::problem::{Problem, ProblemCode};
use crate::render::webhook_endpoint::endpoint_view;
use crate::respond::made::{making, secret_headers};
use crate::respond::store_problem;

/// The longest overlap a secret roll may give the old secret: 7 days.
pub const MAX_ROLL_OVERLAP: Duration = Duration::from_secs(7 * 24 * 3600);

/// The overlap of a secret roll that names none: 24 hours.
pub const DEFAULT_ROLL_OVERLAP: Duration = Duration::from_secs(24 * 3600);

fn not_found() -> Problem {
    Problem::new(
        ProblemCode::NotFound,
        "no such webhook endpoint for this shop",
    )
}

fn invalid(detail: impl Into<String>) -> Problem {
    Problem::new(ProblemCode::InvalidRequest, detail)
}

fn refusal_problem(refusal: EndpointRefusal) -> Problem {
    match refusal {
        EndpointRefusal::NoShop(_) | EndpointRefusal::NoEndpoint(_) => not_found(),
        EndpointRefusal::TooMany => Problem::new(
            ProblemCode::WebhookEndpointLimitReached,
            refusal.to_string(),
        ),
        EndpointRefusal::RequestReused => {
            Problem::new(ProblemCode::IdempotencyKeyReused, refusal.to_string())
        }
    }
}

/// The endpoint, with its secret when it was made now; `status` and, on a
/// repeat, `Idempotent-Replayed: true`; never cached on the way.
fn made_response(status: StatusCode, stored: &StoredEndpoint, secret: &WebhookSecret) -> Response {
    let secret = (!stored.replayed).then(|| secret.expose());
    let view = endpoint_view(&stored.endpoint, secret.as_deref());
    let location = format!("/v1/webhook-endpoints/{}", view.id);
    let response = (status, [(LOCATION, location)], Json(view)).into_response();
    secret_headers(response, stored.replayed)
}

/// A filter from the names a shop sent.
fn filter(names: &[String]) -> Result<EventFilter, Problem> {
    EventFilter::parse(names.iter().map(String::as_str))
        .map_err(|e| invalid(format!("enabled_events: {e}")))
}

/// A description as stored: `""` is none.
fn description(text: Option<String>) -> Result<Option<String>, Problem> {
    let Some(text) = text else { return Ok(None) };
    if text.chars().count() > MAX_DESCRIPTION || text.chars().any(char::is_control) {
        return Err(invalid(format!(
            "description must be at most {MAX_DESCRIPTION} characters, without control characters"
        )));
    }
    Ok((!text.is_empty()).then_some(text))
}

/// Judges a URL a shop registers.
async fn check_url(state: &AppState, url: &str) -> Result<(), Problem> {
    if url.len() > MAX_URL {
        return Err(invalid(format!("url must be at most {MAX_URL} bytes")));
    }
    let Some(check) = &state.url_check else {
        return Err(invalid("url: this server accepts no webhook endpoints"));
    };
    check
        .check(url)
        .await
        .map_err(|why| invalid(format!("url: {why}")))
}

/// Makes a webhook endpoint, or answers the one a repeat's first request made.
#[utoipa::path(
    post,
    path = "/v1/webhook-endpoints",
    operation_id = "createWebhookEndpoint",
    tag = "webhook-endpoints",
    summary = "Make a webhook endpoint (once per Idempotency-Key)",
    description = "Registers a URL for the event types given (`[\"*\"]`: all). The answer carries its signing \
        `secret`, once. Every event written from now on goes to each enabled endpoint whose `enabled_events` \
        match it, with a delivery of its own. The URL must be `https` with a host whose every address is \
        public (the operator may allow more); it is judged again at every delivery. A repeat with the same \
        Idempotency-Key answers the same endpoint without its secret (`Idempotent-Replayed: true`) and makes \
        nothing. At most 16 endpoints a shop.",
    security(("shop_basic" = [])),
    params(
        ("Idempotency-Key" = String, Header, description = "1 to 255 visible ASCII characters, exactly one header; kept with the endpoint made.",
            min_length = 1, max_length = 512, pattern = r#"^(?:[!#-~][!-~]{0,254}|"(?:[!#-\[\]-~]|\\["\\]){1,255}")$"#, example = "orders-service-endpoint"),
    ),
    request_body(content = wire::CreateWebhookEndpoint, content_type = "application/json",
        description = "The URL, the event types, optionally a description (at most 64 KiB, strict JSON)."),
    responses(
        (status = 201, description = "Made: the endpoint with its `secret` (shown once). A repeat answers it as it is now, without `secret`, with `Idempotent-Replayed: true`.",
            body = wire::WebhookEndpoint, headers(
                ("Location" = String, description = "`/v1/webhook-endpoints/{id}`"),
                ("Idempotent-Replayed" = String, description = "`true` on a repeat; absent otherwise."))),
        (status = 400, description = "`missing_idempotency_key`, `invalid_idempotency_key`, `duplicate_idempotency_key`, `malformed_json`, `bad_request`. Nothing was made."),
        (status = 403, description = "`insufficient_scope`: only a `full` key manages endpoints."),
        (status = 409, description = "`webhook_endpoint_limit_reached`: the shop has 16 endpoints. Nothing was made."),
        (status = 413, description = "`payload_too_large`: the body is over 64 KiB."),
        (status = 415, description = "`unsupported_media_type`: the body is not `application/json`."),
        (status = 422, description = "`invalid_request`: a URL that is not https or not public, an unknown event type or field, a description over 200 characters; `idempotency_key_reused`: the key made an endpoint with another request. Nothing was made."),
        (status = 503, description = "`store_unavailable`, `store_overloaded`: retry with the same key."),
    ),
)]
pub async fn create(
    State(state): State<AppState>,
    AuthenticatedShop(shop_id): AuthenticatedShop,
    IdempotencyKeyHeader(key): IdempotencyKeyHeader,
    JsonBody(body): JsonBody,
) -> Result<Response, Problem> {
    let request =
        wire::CreateWebhookEndpoint::deserialize(&body).map_err(|e| invalid(e.to_string()))?;
    let filter = filter(&request.enabled_events)?;
    let description = description(request.description)?;
    let making = making(&key, "/v1/webhook-endpoints", &body)?;
    check_url(&state, &request.url).await?;
    let secret = WebhookSecret::generate();
    let endpoint = NewEndpoint {
        id: EndpointId::generate(),
        shop_id,
        origin: Origin::Api,
        url: request.url,
        filter,
        description,
        secret: secret.clone(),
        request: Some(making),
    };
    let stored = state
        .store
        .add_endpoint(&endpoint)
        .await
        .map_err(store_problem)?
        .map_err(refusal_problem)?;
    Ok(made_response(StatusCode::CREATED, &stored, &secret))
}

/// The shop's endpoints, oldest first.
#[utoipa::path(
    get,
    path = "/v1/webhook-endpoints",
    operation_id = "listWebhookEndpoints",
    tag = "webhook-endpoints",
    summary = "The shop's webhook endpoints, oldest first (never their secrets)",
    description = "Every endpoint of the shop (16 at most), in one page (`has_more` is false).",
    security(("shop_basic" = [])),
    responses(
        (status = 200, description = "The endpoints.", body = wire::List<wire::WebhookEndpoint>),
        (status = 403, description = "`insufficient_scope`: only a `full` key reads endpoints."),
    ),
)]
pub async fn list(
    State(state): State<AppState>,
    AuthenticatedShop(shop_id): AuthenticatedShop,
) -> Result<Response, Problem> {
    let endpoints = state
        .store
        .endpoints(&shop_id)
        .await
        .map_err(store_problem)?;
    let views = endpoints.iter().map(|e| endpoint_view(e, None)).collect();
    Ok(Json(wire::List::page(views, false)).into_response())
}

/// One endpoint of the shop.
#[utoipa::path(
    get,
    path = "/v1/webhook-endpoints/{id}",
    operation_id = "getWebhookEndpoint",
    tag = "webhook-endpoints",
    summary = "Get a webhook endpoint (never its secret)",
    security(("shop_basic" = [])),
    params(("id" = String, Path, description = "The endpoint's id (`we_...`).", example = "we_01a2297968c07d11b0f4c7e8e0d6a3b1")),
    responses(
        (status = 200, description = "The endpoint.", body = wire::WebhookEndpoint),
        (status = 403, description = "`insufficient_scope`: only a `full` key reads endpoints."),
        (status = 404, description = "`not_found`: no such endpoint for this shop (or it was deleted)."),
    ),
)]
pub async fn get(
    State(state): State<AppState>,
    AuthenticatedShop(shop_id): AuthenticatedShop,
    PathId(id): PathId,
) -> Result<Response, Problem> {
    let id = EndpointId::parse(&id).map_err(|_| not_found())?;
    let endpoint = state
        .store
        .endpoint(&shop_id, &id)
        .await
        .map_err(store_problem)?
        .ok_or_else(not_found)?;
    Ok(Json(endpoint_view(&endpoint, None)).into_response())
}

/// Changes an endpoint's event types, switch or description.
#[utoipa::path(
    post,
    path = "/v1/webhook-endpoints/{id}",
    operation_id = "updateWebhookEndpoint",
    tag = "webhook-endpoints",
    summary = "Change a webhook endpoint",
    description = "Sets the fields given. `enabled: false` pauses it: no delivery is made for events written \
        meanwhile and its open deliveries wait; `enabled: true` resumes them at once (their give-up clock \
        restarts). Setting values is idempotent, so the Idempotency-Key is required but not stored.",
    security(("shop_basic" = [])),
    params(
        ("id" = String, Path, description = "The endpoint (`we_...`).", example = "we_01a2297968c07d11b0f4c7e8e0d6a3b1"),
        ("Idempotency-Key" = String, Header, description = "1 to 255 visible ASCII characters, exactly one header (required on every state-changing POST; not stored here).",
            min_length = 1, max_length = 512, pattern = r#"^(?:[!#-~][!-~]{0,254}|"(?:[!#-\[\]-~]|\\["\\]){1,255}")$"#, example = "pause-orders-endpoint"),
    ),
    request_body(content = wire::UpdateWebhookEndpoint, content_type = "application/json",
        description = "The fields to change."),
    responses(
        (status = 200, description = "Changed.", body = wire::WebhookEndpoint),
        (status = 400, description = "`missing_idempotency_key`, `invalid_idempotency_key`, `duplicate_idempotency_key`, `malformed_json`, `bad_request`."),
        (status = 403, description = "`insufficient_scope`: only a `full` key manages endpoints."),
        (status = 404, description = "`not_found`: no such endpoint for this shop."),
        (status = 413, description = "`payload_too_large`: the body is over 64 KiB."),
        (status = 415, description = "`unsupported_media_type`: the body is not `application/json`."),
        (status = 422, description = "`invalid_request`: an unknown event type or field, a description over 200 characters. Nothing was changed."),
        (status = 503, description = "`store_unavailable`, `store_overloaded`: retry."),
    ),
)]
pub async fn update(
    State(state): State<AppState>,
    AuthenticatedShop(shop_id): AuthenticatedShop,
    IdempotencyKeyHeader(_key): IdempotencyKeyHeader,
    PathId(id): PathId,
    JsonBody(body): JsonBody,
) -> Result<Response, Problem> {
    let id = EndpointId::parse(&id).map_err(|_| not_found())?;
    let request =
        wire::UpdateWebhookEndpoint::deserialize(&body).map_err(|e| invalid(e.to_string()))?;
    let update = EndpointUpdate {
        filter: request.enabled_events.as_deref().map(filter).transpose()?,
        enabled: request.enabled,
        description: request
            .description
            .map(|text| description(Some(text)))
            .transpose()?,
    };
    let endpoint = state
        .store
        .update_endpoint(&shop_id, &id, &update)
        .await
        .map_err(store_problem)?
        .ok_or_else(not_found)?;
    Ok(Json(endpoint_view(&endpoint, None)).into_response())
}

/// Deletes an endpoint.
#[utoipa::path(
    delete,
    path = "/v1/webhook-endpoints/{id}",
    operation_id = "deleteWebhookEndpoint",
    tag = "webhook-endpoints",
    summary = "Delete a webhook endpoint",
    description = "No delivery is made to it any more: its open deliveries are given up (`last_error` says \
        why) and its secrets are wiped. Answers the endpoint as it was deleted; deleting it again is \
        `404`.",
    security(("shop_basic" = [])),
    params(("id" = String, Path, description = "The endpoint (`we_...`).", example = "we_01a2297968c07d11b0f4c7e8e0d6a3b1")),
    responses(
        (status = 200, description = "Deleted.", body = wire::WebhookEndpoint),
        (status = 403, description = "`insufficient_scope`: only a `full` key manages endpoints."),
        (status = 404, description = "`not_found`: no such endpoint for this shop (or it was deleted)."),
        (status = 503, description = "`store_unavailable`, `store_overloaded`: retry."),
    ),
)]
pub async fn delete(
    State(state): State<AppState>,
    AuthenticatedShop(shop_id): AuthenticatedShop,
    PathId(id): PathId,
) -> Result<Response, Problem> {
    let id = EndpointId::parse(&id).map_err(|_| not_found())?;
    let endpoint = state
        .store
        .delete_endpoint(&shop_id, &id)
        .await
        .map_err(store_problem)?
        .ok_or_else(not_found)?;
    Ok(Json(endpoint_view(&endpoint, None)).into_response())
}

/// Rolls an endpoint's signing secret, or answers a repeat's first roll.
#[utoipa::path(
    post,
    path = "/v1/webhook-endpoints/{id}/roll-secret",
    operation_id = "rollWebhookEndpointSecret",
    tag = "webhook-endpoints",
    summary = "Roll a webhook endpoint's signing secret (once per Idempotency-Key)",
    description = "A new `secret` signs from now on (answered once); the old one keeps signing beside it for \
        `expire_old_in_seconds` (24 h by default, 0 to stop at once, at most 7 days): each delivery meanwhile \
        carries one `v1=` signature per secret, so a receiver verifying with either accepts it. A secret rolled \
        over earlier is dropped. A repeat with the same Idempotency-Key answers the endpoint without a secret \
        and changes nothing.",
    security(("shop_basic" = [])),
    params(
        ("id" = String, Path, description = "The endpoint (`we_...`).", example = "we_01a2297968c07d11b0f4c7e8e0d6a3b1"),
        ("Idempotency-Key" = String, Header, description = "1 to 255 visible ASCII characters, exactly one header; kept with the new secret.",
            min_length = 1, max_length = 512, pattern = r#"^(?:[!#-~][!-~]{0,254}|"(?:[!#-\[\]-~]|\\["\\]){1,255}")$"#, example = "roll-orders-secret-2026-12"),
    ),
    request_body(content = wire::RollWebhookEndpointSecret, content_type = "application/json",
        description = "`{}`, or how long the old secret keeps signing."),
    responses(
        (status = 200, description = "Rolled: the endpoint with its new `secret` (shown once). A repeat answers it without `secret`, with `Idempotent-Replayed: true`.",
            body = wire::WebhookEndpoint, headers(
                ("Idempotent-Replayed" = String, description = "`true` on a repeat; absent otherwise."))),
        (status = 400, description = "`missing_idempotency_key`, `invalid_idempotency_key`, `duplicate_idempotency_key`, `malformed_json`, `bad_request`. Nothing was changed."),
        (status = 403, description = "`insufficient_scope`: only a `full` key manages endpoints."),
        (status = 404, description = "`not_found`: no such endpoint for this shop."),
        (status = 413, description = "`payload_too_large`: the body is over 64 KiB."),
        (status = 415, description = "`unsupported_media_type`: the body is not `application/json`."),
        (status = 422, description = "`invalid_request`: an overlap over 7 days or an unknown field; `idempotency_key_reused`: the key was used with another request. Nothing was changed."),
        (status = 503, description = "`store_unavailable`, `store_overloaded`: retry with the same key."),
    ),
)]
pub async fn roll_secret(
    State(state): State<AppState>,
    AuthenticatedShop(shop_id): AuthenticatedShop,
    IdempotencyKeyHeader(key): IdempotencyKeyHeader,
    PathId(id): PathId,
    JsonBody(body): JsonBody,
) -> Result<Response, Problem> {
    let id = EndpointId::parse(&id).map_err(|_| not_found())?;
    let request =
        wire::RollWebhookEndpointSecret::deserialize(&body).map_err(|e| invalid(e.to_string()))?;
    let overlap = request
        .expire_old_in_seconds
        .map_or(DEFAULT_ROLL_OVERLAP, Duration::from_secs);
    if overlap > MAX_ROLL_OVERLAP {
        return Err(invalid(
            "expire_old_in_seconds must be 0 to 604800 (7 days)",
        ));
    }
    let making = making(
        &key,
        &format!("/v1/webhook-endpoints/{id}/roll-secret"),
        &body,
    )?;
    let secret = WebhookSecret::generate();
    let stored = state
        .store
        .roll_endpoint_secret(&shop_id, &id, &secret, overlap, &making)
        .await
        .map_err(store_problem)?
        .map_err(refusal_problem)?;
    Ok(made_response(StatusCode::OK, &stored, &secret))
}
