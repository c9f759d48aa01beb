//! `/v1/api-keys`: a shop makes, lists, rolls and revokes its own API keys
//! with a `full` key (the scope check refuses every other key before a
//! handler runs). The rules are the operator's ([`chargeonce_core::keyring`]):
//! a secret is generated here, answered once and stored hashed.
//!
//! A make or a roll needs an `Idempotency-Key`, kept with the key it made
//! (with the request's fingerprint): a repeat answers that key, `201` with
//! `Idempotent-Replayed: true`, as it is now and **without its secret**
//! (only its hash was kept), and makes nothing; the same idempotency key
//! with another request is `422 idempotency_key_reused`. A revoke is
//! idempotent by nature (revoking a revoked key changes nothing): its key is
//! required but not stored.

use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::http::header::LOCATION;
use axum::response::{IntoResponse, Response};
use chargeonce_core::ShopId;
use chargeonce_core::api_key::{ApiKey, ApiKeyId, KeyRefusal, Mode};
use chargeonce_core::keyring::{self, KeyRequest, MAX_DESCRIPTION, Made};
use chargeonce_wire as wire;
use serde::Deserialize;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::AppState;
use crate::extract::{AuthenticatedShop, IdempotencyKeyHeader, JsonBody, PathId};
use crate::problem::{Problem, ProblemCode};
use crate::render::api_key::{api_key_view, scope_of};
use crate::respond::made::{making, secret_headers};
use crate::respond::store_problem;

/// The longest overlap a roll may give the old key: 7 days.
pub const MAX_ROLL_OVERLAP: Duration = Duration::from_secs(7 * 24 * 3600);

/// The overlap of a roll that names none: 24 hours.
pub const DEFAULT_ROLL_OVERLAP: Duration = Duration::from_secs(24 * 3600);

fn not_found() -> Problem {
    Problem::new(ProblemCode::NotFound, "no such API key for this shop")
}

fn invalid(detail: impl Into<String>) -> Problem {
    Problem::new(ProblemCode::InvalidRequest, detail)
}

fn refusal_problem(refusal: KeyRefusal) -> Problem {
    match refusal {
        KeyRefusal::NoShop(_) | KeyRefusal::NoKey(_) => not_found(),
        KeyRefusal::Inactive(_) => Problem::new(
            ProblemCode::ApiKeyInactive,
            "the key is revoked or expired; roll an active key",
        ),
        KeyRefusal::TooMany => Problem::new(ProblemCode::ApiKeyLimitReached, refusal.to_string()),
        KeyRefusal::RequestReused => {
            Problem::new(ProblemCode::IdempotencyKeyReused, refusal.to_string())
        }
        KeyRefusal::ExpiryPassed => invalid("expires_at must be in the future"),
    }
}

/// `201` with the key (its secret when made now), its `Location`, and
/// `Idempotent-Replayed: true` on a repeat.
fn made_response(made: Made) -> Response {
    let now = OffsetDateTime::now_utc();
    let (view, replayed) = match &made {
        Made::New(made) => (
            api_key_view(&made.key, now, Some(made.secret.expose())),
            false,
        ),
        Made::Replayed(key) => (api_key_view(key, now, None), true),
    };
    let location = format!("/v1/api-keys/{}", view.id);
    let response = (StatusCode::CREATED, [(LOCATION, location)], Json(view)).into_response();
    secret_headers(response, replayed)
}

/// The checks of a new key's description and expiry; it is of `mode`, the
/// mode of the key that asks (a key never makes one of the other mode).
fn key_request(body: wire::CreateApiKey, mode: Mode) -> Result<KeyRequest, Problem> {
    if let Some(description) = &body.description
        && (description.chars().count() > MAX_DESCRIPTION
            || description.chars().any(char::is_control))
    {
        return Err(invalid(format!(
            "description must be at most {MAX_DESCRIPTION} characters, without control characters"
        )));
    }
    let expires_at = body
        .expires_at
        .map(|at| {
            OffsetDateTime::parse(&at, &Rfc3339)
                .map_err(|_| invalid("expires_at must be an RFC 3339 time"))
        })
        .transpose()?;
    // Whether it is in the future is the store's to say, by its clock and
    // after it looked for a repeat (whose expiry may have passed since).
    Ok(KeyRequest {
        mode,
        scope: scope_of(body.scope),
        description: body.description,
        expires_at,
    })
}

/// Makes a key for the shop, or answers the key a repeat's first request made.
#[utoipa::path(
    post,
    path = "/v1/api-keys",
    operation_id = "createApiKey",
    tag = "api-keys",
    summary = "Make an API key (once per Idempotency-Key)",
    description = "Makes a key with the scope asked (a `full` key may make any scope), in the mode of the key \
        that asks (a test key makes test keys, a live key live ones). The answer carries \
        the secret, once: it is stored hashed. A repeat with the same Idempotency-Key answers the same key \
        without its secret (`Idempotent-Replayed: true`) and makes nothing. At most 32 active keys a shop.",
    security(("shop_basic" = [])),
    params(
        ("Idempotency-Key" = String, Header, description = "1 to 255 visible ASCII characters, exactly one header; kept with the key made, for as long as the key.",
            min_length = 1, max_length = 512, pattern = r#"^(?:[!#-~][!-~]{0,254}|"(?:[!#-\[\]-~]|\\["\\]){1,255}")$"#, example = "support-tool-key-1"),
    ),
    request_body(content = wire::CreateApiKey, content_type = "application/json",
        description = "The key's scope, and optionally a description and an expiry (at most 64 KiB, strict JSON)."),
    responses(
        (status = 201, description = "Made: the key with its `secret` (shown once). A repeat answers the key as it is now, without `secret`, with `Idempotent-Replayed: true`.",
            body = wire::ApiKey, headers(
                ("Location" = String, description = "`/v1/api-keys/{id}`"),
                ("Idempotent-Replayed" = String, description = "`true` on a repeat; absent otherwise."))),
        (status = 400, description = "`missing_idempotency_key`, `invalid_idempotency_key`, `duplicate_idempotency_key`, `malformed_json`, `bad_request`. Nothing was made."),
        (status = 403, description = "`insufficient_scope`: only a `full` key manages keys."),
        (status = 409, description = "`api_key_limit_reached`: the shop holds 32 active keys. Nothing was made."),
        (status = 413, description = "`payload_too_large`: the body is over 64 KiB."),
        (status = 415, description = "`unsupported_media_type`: the body is not `application/json`."),
        (status = 422, description = "`invalid_request`: an unknown scope or field, a description over 200 characters, an expiry not in the future; `idempotency_key_reused`: the key made a key with another request. Nothing was made."),
        (status = 503, description = "`store_unavailable`, `store_overloaded`: retry with the same key."),
    ),
)]
pub async fn create(
    State(state): State<AppState>,
    AuthenticatedShop(shop_id): AuthenticatedShop,
    IdempotencyKeyHeader(key): IdempotencyKeyHeader,
    JsonBody(body): JsonBody,
) -> Result<Response, Problem> {
    let request = wire::CreateApiKey::deserialize(&body).map_err(|e| invalid(e.to_string()))?;
    let request = key_request(request, shop_id.mode())?;
    let making = making(&key, "/v1/api-keys", &body)?;
    let shop = shop_id.shop();
    let made = keyring::make_once(state.store.as_ref(), &shop, request, Some(making))
        .await
        .map_err(store_problem)?
        .map_err(refusal_problem)?;
    // The new key works on this instance at once (on others, at their next
    // read of the shop's keys: a secret that matches no cached key has them
    // read again).
    state.auth_cache.forget(&shop);
    Ok(made_response(made))
}

/// The shop's keys, newest first.
#[utoipa::path(
    get,
    path = "/v1/api-keys",
    operation_id = "listApiKeys",
    tag = "api-keys",
    summary = "The shop's API keys, newest first (never their secrets)",
    description = "Every key of the shop in the asking key's mode (test keys for a test key, live keys for a live \
        one), revoked and expired ones too, newest first, in one page (`has_more` is false).",
    security(("shop_basic" = [])),
    responses(
        (status = 200, description = "The keys.", body = wire::List<wire::ApiKey>),
        (status = 403, description = "`insufficient_scope`: only a `full` key reads keys."),
    ),
)]
pub async fn list(
    State(state): State<AppState>,
    AuthenticatedShop(shop_id): AuthenticatedShop,
) -> Result<Response, Problem> {
    let keys = shop_keys(&state, &shop_id).await?;
    let now = OffsetDateTime::now_utc();
    let views = keys
        .iter()
        .rev()
        .map(|key| api_key_view(key, now, None))
        .collect();
    Ok(Json(wire::List::page(views, false)).into_response())
}

/// One key of the shop.
#[utoipa::path(
    get,
    path = "/v1/api-keys/{id}",
    operation_id = "getApiKey",
    tag = "api-keys",
    summary = "Get an API key (never its secret)",
    security(("shop_basic" = [])),
    params(("id" = String, Path, description = "The key's id (`key_...`).", example = "key_01a2297968c07d11b0f4c7e8e0d6a3b1")),
    responses(
        (status = 200, description = "The key.", body = wire::ApiKey),
        (status = 403, description = "`insufficient_scope`: only a `full` key reads keys."),
        (status = 404, description = "`not_found`: no such key for this shop."),
    ),
)]
pub async fn get(
    State(state): State<AppState>,
    AuthenticatedShop(shop_id): AuthenticatedShop,
    PathId(id): PathId,
) -> Result<Response, Problem> {
    let id = ApiKeyId::parse(&id).map_err(|_| not_found())?;
    let key = mode_key(&state, &shop_id, &id).await?;
    Ok(Json(api_key_view(&key, OffsetDateTime::now_utc(), None)).into_response())
}

/// Rolls a key of the shop, or answers the successor a repeat's first request made.
#[utoipa::path(
    post,
    path = "/v1/api-keys/{id}/roll",
    operation_id = "rollApiKey",
    tag = "api-keys",
    summary = "Roll an API key: its successor now, the old key expiring later (once per Idempotency-Key)",
    description = "Makes the successor (same scope and description; its `secret` answered once) and has the old \
        key expire after `expire_old_in_seconds` (24 h by default, 0 at once, at most 7 days; never later than \
        it was to expire), in one transaction. Every instance refuses the old key within `--auth-cache-ttl` \
        after its expiry. A repeat with the same Idempotency-Key answers the same successor without its secret \
        and changes nothing.",
    security(("shop_basic" = [])),
    params(
        ("id" = String, Path, description = "The key to roll (`key_...`).", example = "key_01a2297968c07d11b0f4c7e8e0d6a3b1"),
        ("Idempotency-Key" = String, Header, description = "1 to 255 visible ASCII characters, exactly one header; kept with the successor.",
            min_length = 1, max_length = 512, pattern = r#"^(?:[!#-~][!-~]{0,254}|"(?:[!#-\[\]-~]|\\["\\]){1,255}")$"#, example = "roll-2026-12"),
    ),
    request_body(content = wire::RollApiKey, content_type = "application/json",
        description = "`{}`, or how long the old key keeps working."),
    responses(
        (status = 201, description = "Rolled: the successor with its `secret` (shown once). A repeat answers it without `secret`, with `Idempotent-Replayed: true`.",
            body = wire::ApiKey, headers(
                ("Location" = String, description = "`/v1/api-keys/{id}` of the successor"),
                ("Idempotent-Replayed" = String, description = "`true` on a repeat; absent otherwise."))),
        (status = 400, description = "`missing_idempotency_key`, `invalid_idempotency_key`, `duplicate_idempotency_key`, `malformed_json`, `bad_request`. Nothing was changed."),
        (status = 403, description = "`insufficient_scope`: only a `full` key manages keys."),
        (status = 404, description = "`not_found`: no such key for this shop."),
        (status = 409, description = "`api_key_inactive`: the key is revoked or expired; `api_key_limit_reached`: the shop holds 32 active keys. Nothing was changed."),
        (status = 413, description = "`payload_too_large`: the body is over 64 KiB."),
        (status = 415, description = "`unsupported_media_type`: the body is not `application/json`."),
        (status = 422, description = "`invalid_request`: an overlap over 7 days or an unknown field; `idempotency_key_reused`: the key was used with another request. Nothing was changed."),
        (status = 503, description = "`store_unavailable`, `store_overloaded`: retry with the same key."),
    ),
)]
pub async fn roll(
    State(state): State<AppState>,
    AuthenticatedShop(shop_id): AuthenticatedShop,
    IdempotencyKeyHeader(key): IdempotencyKeyHeader,
    PathId(id): PathId,
    JsonBody(body): JsonBody,
) -> Result<Response, Problem> {
    let id = ApiKeyId::parse(&id).map_err(|_| not_found())?;
    let request = wire::RollApiKey::deserialize(&body).map_err(|e| invalid(e.to_string()))?;
    let overlap = request
        .expire_old_in_seconds
        .map_or(DEFAULT_ROLL_OVERLAP, Duration::from_secs);
    if overlap > MAX_ROLL_OVERLAP {
        return Err(invalid(
            "expire_old_in_seconds must be 0 to 604800 (7 days)",
        ));
    }
    let making = making(&key, &format!("/v1/api-keys/{id}/roll"), &body)?;
    mode_key(&state, &shop_id, &id).await?;
    let shop = shop_id.shop();
    let made = keyring::roll_once(state.store.as_ref(), &shop, &id, overlap, Some(making))
        .await
        .map_err(store_problem)?
        .map_err(refusal_problem)?;
    // The old key's new expiry holds on this instance at once.
    state.auth_cache.forget(&shop);
    Ok(made_response(made))
}

/// Revokes a key of the shop.
#[utoipa::path(
    post,
    path = "/v1/api-keys/{id}/revoke",
    operation_id = "revokeApiKey",
    tag = "api-keys",
    summary = "Revoke an API key now",
    description = "The key stops working at once on the instance that answers, and on every instance within \
        `--auth-cache-ttl`. Revoking a revoked key changes nothing and answers it as it is, so the \
        Idempotency-Key is required but not stored. A key may revoke itself.",
    security(("shop_basic" = [])),
    params(
        ("id" = String, Path, description = "The key to revoke (`key_...`).", example = "key_01a2297968c07d11b0f4c7e8e0d6a3b1"),
        ("Idempotency-Key" = String, Header, description = "1 to 255 visible ASCII characters, exactly one header (required on every state-changing POST; not stored here).",
            min_length = 1, max_length = 512, pattern = r#"^(?:[!#-~][!-~]{0,254}|"(?:[!#-\[\]-~]|\\["\\]){1,255}")$"#, example = "revoke-laptop-key"),
    ),
    request_body(content = wire::RevokeApiKey, content_type = "application/json", description = "`{}`."),
    responses(
        (status = 200, description = "Revoked (now, or earlier).", body = wire::ApiKey),
        (status = 400, description = "`missing_idempotency_key`, `invalid_idempotency_key`, `duplicate_idempotency_key`, `malformed_json`, `bad_request`."),
        (status = 403, description = "`insufficient_scope`: only a `full` key manages keys."),
        (status = 404, description = "`not_found`: no such key for this shop."),
        (status = 413, description = "`payload_too_large`: the body is over 64 KiB."),
        (status = 415, description = "`unsupported_media_type`: the body is not `application/json`."),
        (status = 422, description = "`invalid_request`: the body is not `{}`."),
        (status = 503, description = "`store_unavailable`, `store_overloaded`: retry."),
    ),
)]
pub async fn revoke(
    State(state): State<AppState>,
    AuthenticatedShop(shop_id): AuthenticatedShop,
    IdempotencyKeyHeader(_key): IdempotencyKeyHeader,
    PathId(id): PathId,
    JsonBody(body): JsonBody,
) -> Result<Response, Problem> {
    let id = ApiKeyId::parse(&id).map_err(|_| not_found())?;
    wire::RevokeApiKey::deserialize(&body).map_err(|e| invalid(e.to_string()))?;
    mode_key(&state, &shop_id, &id).await?;
    let shop = shop_id.shop();
    let key = state
        .store
        .revoke_api_key(&shop, &id)
        .await
        .map_err(store_problem)?
        .map_err(refusal_problem)?;
    state.auth_cache.forget(&shop);
    Ok(Json(api_key_view(&key, OffsetDateTime::now_utc(), None)).into_response())
}

/// The shop's keys of the mode `shop_id` names (the asking key's: a test
/// key sees and manages test keys only, a live key live ones), oldest first.
async fn shop_keys(state: &AppState, shop_id: &ShopId) -> Result<Vec<ApiKey>, Problem> {
    let mut keys = keyring::list(state.store.as_ref(), &shop_id.shop())
        .await
        .map_err(store_problem)?
        .ok_or_else(not_found)?;
    keys.retain(|key| key.mode == shop_id.mode());
    Ok(keys)
}

/// Key `id` of the shop in the asking key's mode; a key of the other mode
/// is not found (its id says nothing to this mode).
async fn mode_key(state: &AppState, shop_id: &ShopId, id: &ApiKeyId) -> Result<ApiKey, Problem> {
    shop_keys(state, shop_id)
        .await?
        .into_iter()
        .find(|key| key.id == *id)
        .ok_or_else(not_found)
}
