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
    Ok(Json(render::to_value(&render::key(&info))).into_response())
}
