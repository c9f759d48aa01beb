//! HTTP Basic auth of a shop: `shop_id:secret_key`, then the shop's rate
//! limit (see [`crate::limits::ShopRateLimiter`]).

use axum::extract::FromRequestParts;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use chargeonce_core::{SecretHash, ShopId, ShopSecret};

use crate::AppState;
use crate::problem::{Problem, ProblemCode};
use crate::respond::store_problem;

/// The shop whose credentials the request carried, checked against the stored
/// hash in constant time.
#[derive(Debug, Clone)]
pub struct AuthenticatedShop(pub ShopId);

fn unauthorized(detail: &str) -> Problem {
    Problem::new(ProblemCode::Unauthorized, detail)
}

/// Splits `Basic base64(user:secret)`.
fn credentials(parts: &Parts) -> Result<(ShopId, ShopSecret), Problem> {
    let header = parts
        .headers
        .get(AUTHORIZATION)
        .ok_or_else(|| unauthorized("send HTTP Basic credentials: shop id and secret key"))?;
    let value = header
        .to_str()
        .map_err(|_| unauthorized("malformed Authorization header"))?;
    let (scheme, encoded) = value
        .trim()
        .split_once(' ')
        .ok_or_else(|| unauthorized("malformed Authorization header"))?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return Err(unauthorized("only HTTP Basic authentication is supported"));
    }
    let decoded = STANDARD
        .decode(encoded.trim())
        .map_err(|_| unauthorized("malformed Basic credentials"))?;
    let decoded =
        String::from_utf8(decoded).map_err(|_| unauthorized("malformed Basic credentials"))?;
    let (user, secret) = decoded
        .split_once(':')
        .ok_or_else(|| unauthorized("malformed Basic credentials"))?;
    let shop = ShopId::new(user).map_err(|_| unauthorized("unknown shop or wrong secret key"))?;
    Ok((shop, ShopSecret::from_string(secret)))
}

/// An authenticated shop's request, within the shop's rate limit (checked
/// only after the credentials: nobody can spend another shop's allowance).
fn admit(state: &AppState, shop: ShopId) -> Result<AuthenticatedShop, Problem> {
    match state.rate_limiter.check(&shop) {
        Ok(()) => Ok(AuthenticatedShop(shop)),
        Err(wait) => Err(crate::limits::rate_limited(wait)),
    }
}

impl FromRequestParts<AppState> for AuthenticatedShop {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Problem> {
        let (shop, secret) = credentials(parts)?;
        // A hash read in the last few seconds is trusted (see `crate::cache`);
        // the presented secret is still hashed and compared every time.
        if let Some(hash) = state.auth_cache.get(&shop) {
            return if hash.verify(&secret) {
                admit(state, shop)
            } else {
                Err(unauthorized("unknown shop or wrong secret key"))
            };
        }
        let stored = state
            .store
            .shop_secret(&shop)
            .await
            .map_err(store_problem)?;
        // Unknown shops cost the same comparison as known ones.
        let (hash, known) = match stored {
            Some(hash) => (hash, true),
            None => (
                SecretHash::from_bytes(&[0; 32]).unwrap_or_else(|| secret.hash()),
                false,
            ),
        };
        let verified = hash.verify(&secret);
        if known {
            state.auth_cache.insert(shop.clone(), hash);
        }
        if verified && known {
            admit(state, shop)
        } else {
            Err(unauthorized("unknown shop or wrong secret key"))
        }
    }
}
