//! `GET /console/shops/{id}/api-keys`: a shop's API keys (never a secret:
//! each key's visible prefix), their scope, state and last use; and
//! `POST /console/api-keys/revoke`, the operator's revoke of one (a lost
//! laptop's key, say), which every instance honours within the auth
//! cache's TTL. New keys and rolls are made with `chargeonce shops keys`,
//! which prints the one secret to the operator's terminal, not to a page.

use askama::Template;
use axum::Form;
use axum::extract::State;
use axum::response::{IntoResponse, Redirect, Response};
use chargeonce_core::ShopId;
use chargeonce_core::api_key::{ApiKey, ApiKeyId};
use chargeonce_core::keyring;
use chargeonce_server::extract::PathId;
use serde::Deserialize;

use super::{Chrome, ConsoleError, Operator, html, when};
use crate::Console;

/// A key's row.
pub struct KeyRow {
    /// Its id.
    pub id: String,
    /// `live` or `test`.
    pub mode: &'static str,
    /// Its scope.
    pub scope: &'static str,
    /// The visible start of its secret, if known.
    pub prefix: Option<String>,
    /// `active`, `expired` or `revoked`.
    pub state: &'static str,
    /// When it was made.
    pub created: String,
    /// When it expires (or expired), if ever.
    pub expires: Option<String>,
    /// When it was last used, if known.
    pub last_used: Option<String>,
    /// What it is for.
    pub description: Option<String>,
}

impl KeyRow {
    fn of(key: &ApiKey, now: time::OffsetDateTime) -> Self {
        Self {
            id: key.id.to_string(),
            mode: key.mode.as_str(),
            scope: key.scope.as_str(),
            prefix: key.prefix.clone(),
            state: key.state_at(now).as_str(),
            created: when(key.created_at),
            expires: key.expires_at.map(when),
            last_used: key.last_used_at.map(when),
            description: key.description.clone(),
        }
    }
}

/// The page.
#[derive(Template)]
#[template(path = "console/api_keys.html")]
struct ApiKeysPage {
    page: Chrome,
    shop: String,
    keys: Vec<KeyRow>,
}

/// `GET /console/shops/{id}/api-keys`.
pub async fn page(
    State(state): State<Console>,
    operator: Operator,
    PathId(shop): PathId,
) -> Result<Response, ConsoleError> {
    let not_found = || ConsoleError::NotFound("no such shop".to_owned());
    let shop = ShopId::new(shop).map_err(|_| not_found())?;
    let keys = keyring::list(state.store().as_ref(), &shop)
        .await?
        .ok_or_else(not_found)?;
    let now = time::OffsetDateTime::now_utc();
    html(&ApiKeysPage {
        page: Chrome::new(&operator, format!("API keys of {shop}"), "shops"),
        shop: shop.to_string(),
        keys: keys.iter().map(|key| KeyRow::of(key, now)).collect(),
    })
}

/// The revoke form.
#[derive(Debug, Deserialize)]
pub struct RevokeForm {
    csrf: Option<String>,
    shop: String,
    key: String,
}

/// `POST /console/api-keys/revoke`: revokes the key, then back to the
/// shop's keys with a flash. Revoking a revoked key changes nothing.
pub async fn revoke(
    State(state): State<Console>,
    operator: Operator,
    Form(form): Form<RevokeForm>,
) -> Result<Response, ConsoleError> {
    operator.check_csrf(form.csrf.as_deref())?;
    let not_found = || ConsoleError::NotFound("no such API key".to_owned());
    let shop = ShopId::new(form.shop).map_err(|_| not_found())?;
    let id = ApiKeyId::parse(&form.key).map_err(|_| not_found())?;
    let revoked = state
        .store()
        .revoke_api_key(&shop, &id)
        .await?
        .map_err(|_| not_found())?;
    tracing::info!(shop = %shop, key = %id, "console revoked an API key");
    let at = revoked.revoked_at.map(when).unwrap_or_default();
    state.console.sessions.flash(
        &operator.session,
        format!(
            "API key {id} revoked at {at}; every instance refuses it within the auth cache's TTL"
        ),
    );
    Ok(Redirect::to(&format!("/console/shops/{shop}/api-keys")).into_response())
}
