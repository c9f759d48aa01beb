//! HTTP Basic auth of a shop: `shop_id:secret_key`, where the secret is one
//! of the shop's API keys (`chargeonce_core::api_key`) that is neither
//! revoked nor expired and whose scope allows the request; then the shop's
//! rate limit (see [`crate::limits::ShopRateLimiter`]). Before the store is asked
//! about a shop, the limits on unauthenticated work apply
//! ([`crate::auth_limits`]).

use axum::extract::FromRequestParts;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use std::sync::Arc;
use std::time::Instant;

use chargeonce_core::api_key::{ApiKey, KeyCredential, Mode, position};
use chargeonce_core::{SecretHash, ShopId, ShopSecret};

use super::scope;
use crate::AppState;
use crate::auth_limits::too_many_failures;
use crate::cache::REREAD_AFTER_MISS;
use crate::conn::ClientKey;
use crate::problem::{Problem, ProblemCode};
use crate::respond::store_problem;

/// The shop whose credentials the request carried, checked against the stored
/// hash in constant time, **in the mode of the key**: a `test` key's requests
/// see and make only the shop's test-mode objects (`ShopId::in_mode`), its
/// `live` keys only live ones. The shop itself (which owns the keys) is
/// [`ShopId::shop`].
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
    // The user is the shop's own id; the mode comes from the key.
    let shop = ShopId::new(user)
        .ok()
        .filter(ShopId::is_live)
        .ok_or_else(|| unauthorized("unknown shop or wrong secret key"))?;
    Ok((shop, ShopSecret::from_string(secret)))
}

/// An authenticated shop's request in the mode of its key, within the
/// shop's rate limit (checked only after the credentials: nobody can spend
/// another shop's allowance; one allowance for both modes, so test traffic
/// cannot double a shop's share of the service).
fn admit(state: &AppState, shop: ShopId, mode: Mode) -> Result<AuthenticatedShop, Problem> {
    let checked = state.rate_limiter.check(&shop);
    // Live mode is the shop's own id: no new string on the common path.
    let in_mode = match mode {
        Mode::Live => shop,
        Mode::Test => shop.in_mode(Mode::Test),
    };
    // The request's span (its log lines, its trace) names the shop from here.
    tracing::Span::current().record("shop_id", in_mode.as_str());
    match checked {
        Ok(()) => Ok(AuthenticatedShop(in_mode)),
        Err(wait) => {
            state.metrics.refused("rate_limited");
            Err(crate::limits::rate_limited(wait))
        }
    }
}

/// The client a request came from ([`crate::client_addr`]), as the limits
/// count it.
pub fn client_key(parts: &Parts, state: &AppState) -> ClientKey {
    ClientKey::of(crate::client_addr::client_ip(parts, &state.trusted_proxies))
}

/// The hash an unknown shop's secret is compared with: unknown shops cost
/// the same comparison as known ones, so timing does not tell which exist.
fn no_shop_hash(secret: &ShopSecret) -> SecretHash {
    SecretHash::from_bytes(&[0; 32]).unwrap_or_else(|| secret.hash())
}

/// A failed authentication: 401, or 429 once the client is past its budget.
fn refused(state: &AppState, client: ClientKey) -> Problem {
    refused_as(
        state,
        client,
        unauthorized("unknown shop or wrong secret key"),
    )
}

/// A failed authentication answered `problem` (a 401), or 429 once the
/// client is past its budget: a revoked or expired key counts as a failure.
fn refused_as(state: &AppState, client: ClientKey, problem: Problem) -> Problem {
    match state.auth_limits.failed(client) {
        Some(wait) => over_budget(state, wait),
        None => problem,
    }
}

/// The 429 of a client past its failure budget, counted.
fn over_budget(state: &AppState, wait: std::time::Duration) -> Problem {
    state.metrics.refused("auth_failures");
    too_many_failures(wait)
}

impl FromRequestParts<AppState> for AuthenticatedShop {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, Problem> {
        let client = client_key(parts, state);
        let (shop, secret) = match credentials(parts) {
            Ok(credentials) => credentials,
            Err(problem) => {
                return Err(match state.auth_limits.blocked(client) {
                    Some(wait) => over_budget(state, wait),
                    None => problem,
                });
            }
        };
        // Keys read in the last few seconds are trusted (see `crate::cache`);
        // the presented secret is still hashed and compared every time, which
        // costs no I/O: even a client past its failure budget gets this far.
        let presented = secret.hash();
        let (mut keys, read_at) = match state.auth_cache.get(&shop) {
            Some(cached) => cached,
            None => (
                read_keys(state, &shop, &secret, client).await?,
                Instant::now(),
            ),
        };
        let mut at = position(&keys, &presented);
        if at.is_none() && read_at.elapsed() >= REREAD_AFTER_MISS {
            // Perhaps a key made or rolled since the keys were read: once
            // more from the store (at most ten times a second per shop). A
            // store that cannot answer leaves the cached keys' answer: a
            // wrong secret for a cached shop is refused while the store is
            // down, as when the cache answers alone.
            match read_keys(state, &shop, &secret, client).await {
                Ok(fresh) => {
                    keys = fresh;
                    at = position(&keys, &presented);
                }
                Err(problem) if problem.status().is_server_error() => {}
                Err(problem) => return Err(problem),
            }
        }
        let Some(key) = at.map(|at| &keys[at].key) else {
            return Err(refused(state, client));
        };
        if let Some(problem) = inactive(key) {
            return Err(refused_as(state, client, problem));
        }
        let asked = scope::access(&parts.method, matched_path(parts));
        if !key.scope.allows(asked) {
            state.metrics.refused("insufficient_scope");
            return Err(Problem::new(
                ProblemCode::InsufficientScope,
                format!(
                    "this API key's scope ({}) does not allow this request",
                    key.scope.as_str()
                ),
            ));
        }
        record_use(state, key);
        admit(state, shop, key.mode)
    }
}

/// A shop's keys from the store (remembered in the auth cache), after the
/// limits on work an unauthenticated client may cause; an unknown shop is
/// refused with the same hash comparison a known one costs.
async fn read_keys(
    state: &AppState,
    shop: &ShopId,
    secret: &ShopSecret,
    client: ClientKey,
) -> Result<Arc<[KeyCredential]>, Problem> {
    if let Some(wait) = state.auth_limits.blocked(client) {
        return Err(over_budget(state, wait));
    }
    if state.auth_limits.is_known_unknown(shop) {
        // The same comparison a cached shop costs, so timing does not
        // tell which shop ids exist.
        let _ = no_shop_hash(secret).verify(secret);
        return Err(refused(state, client));
    }
    if !state.auth_limits.is_known(shop) {
        state.auth_limits.unseen_lookup().map_err(|wait| {
            state.metrics.refused("unseen_lookups");
            too_many_failures(wait)
        })?;
    }
    let read_at = Instant::now();
    match state.store.shop_keys(shop).await.map_err(store_problem)? {
        Some(keys) => {
            let keys: Arc<[KeyCredential]> = Arc::from(keys);
            state.auth_limits.know([shop.clone()]);
            state.auth_cache.insert(shop.clone(), keys.clone(), read_at);
            Ok(keys)
        }
        None => {
            // Unknown shops cost the same comparison as known ones.
            let _ = no_shop_hash(secret).verify(secret);
            state.auth_limits.remember_unknown(shop.clone());
            Err(refused(state, client))
        }
    }
}

/// The 401 of a key that matched but no longer authenticates.
fn inactive(key: &ApiKey) -> Option<Problem> {
    let now = time::OffsetDateTime::now_utc();
    if key.revoked_at.is_some() {
        Some(Problem::new(
            ProblemCode::ApiKeyRevoked,
            format!("API key {} was revoked", key.id),
        ))
    } else if !key.active_at(now) {
        Some(Problem::new(
            ProblemCode::ApiKeyExpired,
            format!("API key {} expired; use the key that replaced it", key.id),
        ))
    } else {
        None
    }
}

/// The route template a request matched (`/v1/payments/{id}`), if any.
fn matched_path(parts: &Parts) -> Option<&str> {
    parts
        .extensions
        .get::<axum::extract::MatchedPath>()
        .map(axum::extract::MatchedPath::as_str)
}

/// Notes that `key` was used, in memory: [`crate::key_use`] writes the
/// notes down once a minute, so a request writes nothing.
fn record_use(state: &AppState, key: &ApiKey) {
    state.auth_cache.note_use(&key.shop_id, &key.id);
}
