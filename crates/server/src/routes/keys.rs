//! `GET /v1/idempotency-keys/{key}`: what the service knows of one of the
//! shop's keys (its state, first request, repeats, lease holder), never
//! the lease's token nor the stored answer itself.

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use chargeonce_core::IdempotencyKey;

use crate::AppState;
use crate::extract::{AuthenticatedShop, PathId};
use crate::problem::{Problem, ProblemCode};
use crate::render;
use crate::respond::store_problem;

fn not_found() -> Problem {
    Problem::new(
        ProblemCode::NotFound,
        "no such idempotency key for this shop",
    )
}

/// One idempotency key of the authenticated shop. The path segment is
/// percent-decoded; one that is not a valid key (1 to 255 visible ASCII
/// characters), another shop's key, an unknown key and a finished key whose
/// retention ran out are all `404 not_found`.
#[utoipa::path(
    get,
    path = "/v1/idempotency-keys/{key}",
    operation_id = "getIdempotencyKey",
    tag = "idempotency-keys",
    summary = "What the service knows of one of the shop's idempotency keys",
    security(("shop_basic" = [])),
    params(("key" = String, Path, description = "The key, percent-encoded (1 to 255 visible ASCII characters once decoded).", example = "order-123-pay")),
    responses(
        (status = 200, description = "The key: state, recovery point, first request, repeats, lease holder and deadline while in progress, the stored status and the payment or refund it belongs to. Never the lease's token nor the stored answer.", body = chargeonce_wire::IdempotencyKeyInfo),
        (status = 404, description = "`not_found`: no such key for this shop (another shop's key, a key that is not valid syntax, a finished key whose retention ran out)."),
    ),
)]
pub async fn get(
    State(state): State<AppState>,
    AuthenticatedShop(shop_id): AuthenticatedShop,
    PathId(key): PathId,
) -> Result<Response, Problem> {
    let key = IdempotencyKey::new(key).map_err(|_| not_found())?;
    let info = state
        .store
        .key_info(&shop_id, &key)
        .await
        .map_err(store_problem)?
        .ok_or_else(not_found)?;
    Ok(Json(render::key(&info)).into_response())
}
