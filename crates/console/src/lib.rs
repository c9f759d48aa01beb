//! # chargeonce-console
//!
//! The operator console: server-rendered pages under `/console` for the
//! people who run chargeonce (not the shops): every shop's payments, a
//! payment's history as a timeline, keys, findings, merchant events,
//! shops, and an overview of this instance's counters.
//!
//! - [`auth`]: the login with the operator secret (its own credential,
//!   never a shop's), sessions and CSRF tokens;
//! - [`overview`]: the overview page, its JSON, and the sampler of this
//!   instance's counters behind its charts;
//! - [`payments`], [`payment`]: the list and one payment (its refunds,
//!   timeline, keys' repeats, merchant events, and the refund form);
//! - [`cancel`]: the cancel of a pending payment, with its confirmation;
//! - [`authorization`]: the capture and the void of an authorization, each
//!   with its confirmation;
//! - [`keys`], [`findings`], [`events`], [`shops`]: the other pages.
//!
//! Everything it serves is inside the binary: askama templates
//! (`templates/console/`) compiled in, the CSS and JS
//! (`assets/console/`) by `include_str!`. Every answer carries
//! `Cache-Control: no-store`, a strict Content-Security-Policy (no inline
//! script or style) and `X-Frame-Options: DENY`. No page shows a secret:
//! shop secrets and webhook signing secrets never reach it, lease tokens
//! and card tokens are not rendered, the operator secret is only compared.
//!
//! The console's routes are not part of the shop API's OpenAPI document:
//! [`router`] is merged next to [`chargeonce_server::api_routes`]'s router, inside the
//! same request-id and limits layers.

use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use askama::Template;
use axum::Router;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::{get, post};
use chargeonce_core::{Chain, Money, Payment, PaymentId, SecretHash, ShopId, StoreError};
use time::OffsetDateTime;
use time::macros::format_description;

use chargeonce_server::AppState;

pub mod action;
pub mod api_keys;
pub mod auth;
pub mod authorization;
pub mod cancel;
pub mod events;
pub mod findings;
pub mod keys;
pub mod overview;
pub mod payment;
pub mod payments;
pub mod refund;
pub mod shops;
pub mod timeline;
pub mod webhook_endpoints;

pub use auth::{
    DEFAULT_LOGIN_ATTEMPTS, DEFAULT_LOGIN_CEILING, LoginLimiter, LoginLimits, Operator, Sessions,
};
pub use overview::Samples;

/// Where the console is mounted.
pub const BASE: &str = "/console";

/// How long a console session lasts unless `serve --console-session-ttl`
/// says otherwise.
pub const DEFAULT_SESSION_TTL: Duration = Duration::from_secs(12 * 3600);

/// The Content-Security-Policy of every console answer: only the console's
/// own script, styles and requests; no frames, no inline code.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; \
     base-uri 'none'";

/// How the console runs (`serve --console-*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsoleSettings {
    /// How long a session lasts.
    pub session_ttl: Duration,
    /// How login attempts are limited.
    pub logins: LoginLimits,
    /// Whether the session cookie is marked `Secure` (`serve` marks it
    /// unless the operator listener is a loopback address).
    pub secure_cookie: bool,
    /// The operator secret's hash to check logins against while the store
    /// has none (the store's, set by `serve --operator-secret` or at the
    /// first start, comes first).
    pub operator_secret: Option<SecretHash>,
}

impl Default for ConsoleSettings {
    /// [`DEFAULT_SESSION_TTL`], [`LoginLimits::standard`], no `Secure`
    /// (a test's loopback listener).
    fn default() -> Self {
        Self {
            session_ttl: DEFAULT_SESSION_TTL,
            logins: LoginLimits::standard(),
            secure_cookie: false,
            operator_secret: None,
        }
    }
}

/// What the console keeps on this instance: the sessions (per instance: a
/// session made on one instance is unknown to the others, log in on each),
/// the samples of the counters, and the resends already done.
#[derive(Debug)]
pub struct ConsoleState {
    /// The logged-in sessions.
    pub sessions: Sessions,
    /// The login attempts' limits.
    pub logins: LoginLimiter,
    /// Whether the session cookie is marked `Secure`.
    pub secure_cookie: bool,
    /// The operator secret given to this instance (the store's comes first).
    pub operator_secret: Option<SecretHash>,
    /// The samples behind the overview's charts.
    pub samples: Mutex<Samples>,
    /// Resend keys (`resend-<event>-<attempts>`) already acted on, so a
    /// double click resends once (bounded: the oldest are forgotten).
    resends: Mutex<(HashSet<String>, VecDeque<String>)>,
}

/// How many resend keys are remembered.
const RESENDS_KEPT: usize = 4096;

impl ConsoleState {
    /// A console as `settings` say.
    pub fn new(settings: ConsoleSettings) -> Self {
        Self {
            sessions: Sessions::new(settings.session_ttl),
            logins: LoginLimiter::new(settings.logins),
            secure_cookie: settings.secure_cookie,
            operator_secret: settings.operator_secret,
            samples: Mutex::new(Samples::default()),
            resends: Mutex::new((HashSet::new(), VecDeque::new())),
        }
    }

    /// Records a resend key; `false` when it was already acted on.
    pub fn first_resend(&self, key: &str) -> bool {
        let mut guard = self
            .resends
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let (seen, order) = &mut *guard;
        if !seen.insert(key.to_owned()) {
            return false;
        }
        order.push_back(key.to_owned());
        while order.len() > RESENDS_KEPT {
            if let Some(old) = order.pop_front() {
                seen.remove(&old);
            }
        }
        true
    }
}

impl Default for ConsoleState {
    fn default() -> Self {
        Self::new(ConsoleSettings::default())
    }
}

/// What every console handler has: the server's state (its store, engine,
/// metrics) and the console's own ([`ConsoleState`]).
#[derive(Clone)]
pub struct Console {
    app: AppState,
    /// The console's sessions, limits and samples on this instance.
    pub console: Arc<ConsoleState>,
}

impl std::ops::Deref for Console {
    type Target = AppState;

    fn deref(&self) -> &AppState {
        &self.app
    }
}

impl Console {
    /// The console over `app`, as `settings` say.
    pub fn new(app: AppState, settings: ConsoleSettings) -> Self {
        Self {
            app,
            console: Arc::new(ConsoleState::new(settings)),
        }
    }
}

/// The payment a console path names, any shop's (the page and the actions
/// on it both start here); 404 for an id that is not one or not known.
pub(crate) async fn payment_of(state: &Console, id: &str) -> Result<Payment, ConsoleError> {
    let not_found = || ConsoleError::NotFound("no such payment".to_owned());
    let id = PaymentId::parse(id).map_err(|_| not_found())?;
    state.store().any_payment(&id).await?.ok_or_else(not_found)
}

/// The console's routes (HTML pages, their forms, the operator JSON and the
/// assets) over `console`, with the security headers on every answer, ready
/// to merge into the operator listener's router. Starts the sampler of the
/// overview's charts when called inside a Tokio runtime.
pub fn router(console: Console) -> Router<AppState> {
    overview::start_sampler(&console);
    Router::new()
        .route("/console", get(overview::page))
        .route("/console/", get(|| async { Redirect::to(BASE) }))
        .route("/console/login", get(auth::login_page).post(auth::login))
        .route("/console/logout", post(auth::logout))
        .route("/console/payments", get(payments::page))
        .route("/console/payments/{id}", get(payment::page))
        .route("/console/payments/{id}/refund", post(refund::refund))
        .route("/console/payments/{id}/cancel", post(cancel::cancel))
        .route(
            "/console/payments/{id}/capture",
            post(authorization::capture),
        )
        .route("/console/payments/{id}/void", post(authorization::void))
        .route("/console/events", get(events::page))
        .route("/console/events/{id}/resend", post(events::resend))
        .route("/console/keys", get(keys::page))
        .route("/console/findings", get(findings::page))
        .route("/console/findings/{id}/resolve", post(findings::resolve))
        .route("/console/shops", get(shops::page))
        .route("/console/shops/{id}/api-keys", get(api_keys::page))
        .route("/console/api-keys/revoke", post(api_keys::revoke))
        .route(
            "/console/shops/{id}/webhook-endpoints",
            get(webhook_endpoints::page),
        )
        .route("/console/api/overview", get(overview::json))
        .route("/console/api/findings", get(findings::json))
        .route(
            "/console/api/findings/{id}/resolve",
            post(findings::resolve_json),
        )
        .route("/console/assets/console.css", get(css))
        .route("/console/assets/console.js", get(js))
        .layer(axum::middleware::from_fn(security_headers))
        .with_state(console)
}

/// Adds the console's headers to every answer of its routes.
async fn security_headers(request: Request, next: Next) -> Response {
    let mut response = next.run(request).await;
    let headers = response.headers_mut();
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

async fn css() -> Response {
    (
        [(header::CONTENT_TYPE, "text/css; charset=utf-8")],
        include_str!("../assets/console/console.css"),
    )
        .into_response()
}

async fn js() -> Response {
    (
        [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
        include_str!("../assets/console/console.js"),
    )
        .into_response()
}

/// What every page's frame shows: its title, the session's CSRF token (for
/// the log-out form) and a flash message left by the last action.
#[derive(Debug, Clone, Default)]
pub struct Chrome {
    /// The page's title.
    pub title: String,
    /// The session's CSRF token (empty on the login page).
    pub csrf: String,
    /// A message from the last action (Post/Redirect/Get).
    pub flash: Option<String>,
    /// Which nav link is current.
    pub current: &'static str,
}

impl Chrome {
    /// The frame of a page of a logged-in operator (takes the session's flash).
    pub fn new(operator: &Operator, title: impl Into<String>, current: &'static str) -> Self {
        Self {
            title: title.into(),
            csrf: operator.csrf.clone(),
            flash: operator.flash.clone(),
            current,
        }
    }

    /// Whether `name` is the current nav link (for the template).
    pub fn is(&self, name: &str) -> bool {
        self.current == name
    }
}

/// Why a console page could not be shown.
#[derive(Debug, thiserror::Error)]
pub enum ConsoleError {
    /// The store failed.
    #[error("the store failed")]
    Store(#[from] StoreError),
    /// A template failed to render (a bug of ours).
    #[error("a page failed to render")]
    Render(#[from] askama::Error),
    /// Nothing with that id.
    #[error("{0}")]
    NotFound(String),
    /// The form's CSRF token is missing or not the session's.
    #[error("the form's CSRF token is missing or stale: reload the page and try again")]
    Csrf,
    /// A form value is not acceptable.
    #[error("{0}")]
    BadRequest(String),
}

/// The error page.
#[derive(Template)]
#[template(path = "console/error.html")]
struct ErrorPage {
    page: Chrome,
    status: u16,
    message: String,
}

impl IntoResponse for ConsoleError {
    fn into_response(self) -> Response {
        let status = match &self {
            Self::Store(_) => StatusCode::SERVICE_UNAVAILABLE,
            Self::Render(_) => StatusCode::INTERNAL_SERVER_ERROR,
            Self::NotFound(_) => StatusCode::NOT_FOUND,
            Self::Csrf => StatusCode::FORBIDDEN,
            Self::BadRequest(_) => StatusCode::BAD_REQUEST,
        };
        if status.is_server_error() {
            tracing::warn!(error = %Chain(&self), "console page failed");
        }
        let message = match &self {
            // Never a store's or a template's inner error text on a page.
            Self::Store(_) => "the store could not answer; try again".to_owned(),
            Self::Render(_) => "internal error".to_owned(),
            other => other.to_string(),
        };
        let page = ErrorPage {
            page: Chrome {
                title: status.canonical_reason().unwrap_or("error").to_owned(),
                ..Chrome::default()
            },
            status: status.as_u16(),
            message,
        };
        match page.render() {
            Ok(html) => (status, Html(html)).into_response(),
            Err(_) => (status, Html("<!doctype html><title>error</title>")).into_response(),
        }
    }
}

/// Renders a page as an HTML answer.
pub fn html(page: &impl Template) -> Result<Response, ConsoleError> {
    Ok(Html(page.render()?).into_response())
}

/// A time as the console shows it (UTC, to the millisecond).
pub fn when(at: OffsetDateTime) -> String {
    let format = format_description!(
        "[year]-[month]-[day] [hour]:[minute]:[second].[subsecond digits:3] UTC"
    );
    at.to_offset(time::UtcOffset::UTC)
        .format(&format)
        .unwrap_or_default()
}

/// Unix milliseconds as the console shows them.
pub fn when_ms(ms: i64) -> String {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .map(when)
        .unwrap_or_default()
}

/// A shop as a page names it: its own id, with `(test mode)` after it for
/// an object of its test mode (stored under `{shop}.test`).
pub fn shop_shown(shop: &ShopId) -> String {
    if shop.is_live() {
        shop.as_str().to_owned()
    } else {
        format!("{} (test mode)", shop.shop())
    }
}

/// Money as the console shows it: the decimal string and the currency.
pub fn money(amount: Money) -> String {
    format!(
        "{} {}",
        amount.to_decimal_string(),
        amount.currency().code()
    )
}

/// A query value as an option: a form sends empty fields as `""`.
pub fn given(value: &Option<String>) -> Option<&str> {
    value.as_deref().map(str::trim).filter(|v| !v.is_empty())
}

/// A path back into the console to redirect to after an action; anything
/// else (another site, `//host`) falls back to `fallback`.
pub fn back_to(back: Option<&str>, fallback: &str) -> String {
    match back {
        Some(path)
            if path.starts_with("/console")
                && !path.starts_with("//")
                && !path.contains('\\')
                && !path.bytes().any(|b| b.is_ascii_control()) =>
        {
            path.to_owned()
        }
        _ => fallback.to_owned(),
    }
}

/// Percent-encodes a query value.
pub fn encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirects_stay_inside_the_console() {
        assert_eq!(
            back_to(Some("/console/events"), "/console"),
            "/console/events"
        );
        for bad in [
            "//evil.example",
            "https://evil.example",
            "/v1/payments",
            "/console\\x",
        ] {
            assert_eq!(back_to(Some(bad), "/console"), "/console", "{bad}");
        }
        assert_eq!(back_to(None, "/console/x"), "/console/x");
    }

    #[test]
    fn a_resend_key_acts_once() {
        let console = ConsoleState::default();
        assert!(console.first_resend("resend-evt_1-0"));
        assert!(!console.first_resend("resend-evt_1-0"));
        assert!(console.first_resend("resend-evt_1-1"));
    }
}
