//! The console's login, sessions and CSRF tokens.
//!
//! The operator logs in with the operator secret: its own credential, never
//! a shop's, of which the store keeps only the SHA-256 (compared in
//! constant time, [`SecretHash::verify`]). A login makes a session: a
//! random 256-bit id in a cookie (`HttpOnly`, `SameSite=Strict`,
//! `Path=/console`), kept in this instance's memory until it expires
//! (`serve --console-session-ttl`, 12 h by default) or the operator logs
//! out. Sessions are per instance: behind a load balancer, log in on each
//! (or pin the console to one). The cookie is marked `Secure` unless the
//! operator listener is a loopback address (a browser on the same host,
//! over plain HTTP): anywhere else the console must be reached over TLS
//! (a proxy in front), and the browser must never send the cookie in clear.
//!
//! Each session has its own CSRF token, in every form as the `csrf` field;
//! a POST without it (or with another session's) is 403.
//!
//! Login attempts are limited ([`LoginLimiter`]) twice, each answered 429
//! with `Retry-After` before the secret is looked at:
//! - **per client address** (`serve --console-login-attempts`, 20 a minute
//!   by default; an IPv4 address or an IPv6 /64), so a guesser spends only
//!   its own budget and an operator elsewhere still logs in;
//! - **a global ceiling** (`--console-login-ceiling`, 200 a minute), so
//!   guessing from many addresses stays bounded too. Attempts from the
//!   operator's own networks (`--console-trusted-networks`) and from a
//!   browser that holds a valid session are not counted against it: a
//!   flood from elsewhere cannot lock the operator out.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use askama::Template;
use axum::Form;
use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use chargeonce_core::{SecretHash, ShopSecret};
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultDirectRateLimiter, DefaultKeyedRateLimiter, Quota, RateLimiter};
use rand::RngCore;
use serde::Deserialize;
use subtle::ConstantTimeEq;

use super::{Chrome, ConsoleError, html};
use crate::Console;
use chargeonce_server::conn::ClientKey;
use chargeonce_server::problem::{Problem, ProblemCode};

/// The session cookie's name.
pub const COOKIE: &str = "chargeonce_console";

/// How long a refused login waits before it answers.
const REFUSAL_DELAY: std::time::Duration = std::time::Duration::from_millis(250);

/// Default of `serve --console-login-attempts`: login attempts per minute
/// from one client address.
pub const DEFAULT_LOGIN_ATTEMPTS: u32 = 20;

/// Default of `serve --console-login-ceiling`: login attempts per minute on
/// one instance from all untrusted addresses together.
pub const DEFAULT_LOGIN_CEILING: u32 = 200;

/// The most client addresses the limiter tracks before it drops stale ones.
const LOGIN_CLIENTS_KEPT: usize = 10_000;

/// How login attempts are limited ([`LoginLimiter`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoginLimits {
    /// Attempts a minute from one client address (a burst of that many
    /// after a quiet minute); zero: no limit.
    pub per_client: u32,
    /// Attempts a minute from untrusted addresses together; zero: no limit.
    pub ceiling: u32,
    /// Networks whose attempts the ceiling does not count.
    pub trusted: Vec<ipnet::IpNet>,
}

impl LoginLimits {
    /// The defaults: [`DEFAULT_LOGIN_ATTEMPTS`] per address,
    /// [`DEFAULT_LOGIN_CEILING`] in all, no trusted network.
    pub fn standard() -> Self {
        Self {
            per_client: DEFAULT_LOGIN_ATTEMPTS,
            ceiling: DEFAULT_LOGIN_CEILING,
            trusted: Vec::new(),
        }
    }
}

/// The console's login attempts on this instance, counted before the
/// secret is checked: per client address, and under a global ceiling that
/// trusted networks and valid sessions bypass.
pub struct LoginLimiter {
    per_client: Option<DefaultKeyedRateLimiter<ClientKey>>,
    ceiling: Option<DefaultDirectRateLimiter>,
    trusted: Vec<ipnet::IpNet>,
}

impl std::fmt::Debug for LoginLimiter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoginLimiter")
            .field("per_client", &self.per_client.is_some())
            .field("ceiling", &self.ceiling.is_some())
            .field("trusted", &self.trusted)
            .finish()
    }
}

fn per_minute(n: u32) -> Option<Quota> {
    std::num::NonZeroU32::new(n).map(|n| Quota::per_minute(n).allow_burst(n))
}

fn wait_from(not_until: governor::NotUntil<<DefaultClock as Clock>::Instant>) -> Duration {
    not_until.wait_time_from(DefaultClock::default().now())
}

impl LoginLimiter {
    /// A limiter for `limits`.
    pub fn new(limits: LoginLimits) -> Self {
        Self {
            per_client: per_minute(limits.per_client).map(RateLimiter::keyed),
            ceiling: per_minute(limits.ceiling).map(RateLimiter::direct),
            trusted: limits.trusted,
        }
    }

    /// Counts one attempt from `ip` (`has_session`: the browser holds a
    /// valid session); `Err` with how long until one is allowed when over a
    /// limit.
    fn admit(&self, ip: IpAddr, has_session: bool) -> Result<(), Duration> {
        if let Some(limiter) = &self.per_client {
            if limiter.len() > LOGIN_CLIENTS_KEPT {
                limiter.retain_recent();
            }
            limiter.check_key(&ClientKey::of(ip)).map_err(wait_from)?;
        }
        let trusted = has_session || self.trusted.iter().any(|net| net.contains(&ip));
        match &self.ceiling {
            Some(ceiling) if !trusted => ceiling.check().map_err(wait_from),
            _ => Ok(()),
        }
    }
}

/// How many sessions one instance keeps at most (the oldest go first).
const MAX_SESSIONS: usize = 1024;

/// One logged-in session.
#[derive(Debug, Clone)]
struct Session {
    csrf: String,
    expires: Instant,
    flash: Option<String>,
}

/// The sessions of this instance, by id.
#[derive(Debug)]
pub struct Sessions {
    ttl: Duration,
    map: Mutex<HashMap<String, Session>>,
}

/// 32 random bytes from the OS generator, hex.
fn random_token() -> String {
    let mut bytes = [0_u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    hex::encode(bytes)
}

/// A fresh operator secret: `op_` and 256 random bits in hex, so it is
/// never mistaken for a shop's `sk_` secret (nor scanned as one).
pub fn generate_operator_secret() -> ShopSecret {
    ShopSecret::from_string(format!("op_{}", random_token()))
}

impl Sessions {
    /// No sessions yet; each will last `ttl`.
    pub fn new(ttl: Duration) -> Self {
        Self {
            ttl,
            map: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Session>> {
        self.map
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A new session; its id.
    pub fn create(&self) -> String {
        let id = random_token();
        let now = Instant::now();
        let mut map = self.lock();
        map.retain(|_, s| s.expires > now);
        if map.len() >= MAX_SESSIONS
            && let Some(oldest) = map
                .iter()
                .min_by_key(|(_, s)| s.expires)
                .map(|(k, _)| k.clone())
        {
            map.remove(&oldest);
        }
        map.insert(
            id.clone(),
            Session {
                csrf: random_token(),
                expires: now + self.ttl,
                flash: None,
            },
        );
        id
    }

    /// The operator of a live session, taking its flash message.
    fn operator(&self, id: &str) -> Option<Operator> {
        let mut map = self.lock();
        let now = Instant::now();
        let session = map.get_mut(id)?;
        if session.expires <= now {
            map.remove(id);
            return None;
        }
        Some(Operator {
            session: id.to_owned(),
            csrf: session.csrf.clone(),
            flash: session.flash.take(),
        })
    }

    /// Leaves a message for the session's next page.
    pub fn flash(&self, id: &str, message: impl Into<String>) {
        if let Some(session) = self.lock().get_mut(id) {
            session.flash = Some(message.into());
        }
    }

    /// Ends a session.
    pub fn remove(&self, id: &str) {
        self.lock().remove(id);
    }

    /// How many sessions are live (for tests and the overview).
    pub fn len(&self) -> usize {
        let now = Instant::now();
        self.lock().values().filter(|s| s.expires > now).count()
    }

    /// Whether no session is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A logged-in operator: the session behind a console request.
#[derive(Debug, Clone)]
pub struct Operator {
    /// The session's id.
    pub session: String,
    /// The session's CSRF token.
    pub csrf: String,
    /// The message the last action left, taken by this request.
    pub flash: Option<String>,
}

impl Operator {
    /// Checks a form's CSRF token against the session's, in constant time.
    pub fn check_csrf(&self, presented: Option<&str>) -> Result<(), ConsoleError> {
        let presented = presented.unwrap_or_default();
        if !presented.is_empty() && bool::from(presented.as_bytes().ct_eq(self.csrf.as_bytes())) {
            Ok(())
        } else {
            Err(ConsoleError::Csrf)
        }
    }
}

/// The session id in a request's cookies.
fn session_cookie(headers: &HeaderMap) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.trim().to_owned())
}

/// What a request without a live session gets: the login page for pages,
/// 401 problem+json for the JSON API.
#[derive(Debug)]
pub enum NoSession {
    /// A page: go log in.
    Page,
    /// `/console/api/*`.
    Api,
}

impl IntoResponse for NoSession {
    fn into_response(self) -> Response {
        match self {
            Self::Page => Redirect::to("/console/login").into_response(),
            Self::Api => Problem::new(
                ProblemCode::Unauthorized,
                "log in to the console first (POST /console/login)",
            )
            .into_response(),
        }
    }
}

impl FromRequestParts<Console> for Operator {
    type Rejection = NoSession;

    async fn from_request_parts(parts: &mut Parts, state: &Console) -> Result<Self, NoSession> {
        let api = parts.uri.path().starts_with("/console/api/");
        session_cookie(&parts.headers)
            .and_then(|id| state.console.sessions.operator(&id))
            .ok_or(if api { NoSession::Api } else { NoSession::Page })
    }
}

impl axum::extract::OptionalFromRequestParts<Console> for Operator {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Console,
    ) -> Result<Option<Self>, Self::Rejection> {
        Ok(session_cookie(&parts.headers).and_then(|id| state.console.sessions.operator(&id)))
    }
}

/// Why the login form is shown again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LoginRefusal {
    /// Not the operator secret: 401.
    Wrong,
    /// Over the instance's login limit: 429, again after so many seconds.
    TooMany(u64),
}

/// The login page.
#[derive(Template)]
#[template(path = "console/login.html")]
struct LoginPage {
    page: Chrome,
    refusal: Option<LoginRefusal>,
}

fn login_form(refusal: Option<LoginRefusal>) -> Result<Response, ConsoleError> {
    let page = LoginPage {
        page: Chrome {
            title: "Log in".to_owned(),
            ..Chrome::default()
        },
        refusal,
    };
    let body = html(&page)?;
    Ok(match refusal {
        None => (StatusCode::OK, body).into_response(),
        Some(LoginRefusal::Wrong) => (StatusCode::UNAUTHORIZED, body).into_response(),
        Some(LoginRefusal::TooMany(seconds)) => (
            StatusCode::TOO_MANY_REQUESTS,
            [(header::RETRY_AFTER, seconds.to_string())],
            body,
        )
            .into_response(),
    })
}

/// `GET /console/login`: the form (or the console, when logged in already).
pub async fn login_page(operator: Option<Operator>) -> Result<Response, ConsoleError> {
    if operator.is_some() {
        return Ok(Redirect::to(super::BASE).into_response());
    }
    login_form(None)
}

/// The client a login attempt comes from ([`chargeonce_server::client_addr`]).
pub struct ClientIp(IpAddr);

impl FromRequestParts<Console> for ClientIp {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Console,
    ) -> Result<Self, Self::Rejection> {
        Ok(Self(chargeonce_server::client_addr::client_ip(
            parts,
            state.trusted_proxies(),
        )))
    }
}

/// The login form.
#[derive(Deserialize)]
pub struct LoginForm {
    secret: Option<String>,
}

/// The operator secret to check a login against: the store's (set by
/// `serve --operator-secret` or generated at the first start), else the
/// one this instance was given ([`ConsoleSettings::operator_secret`](crate::ConsoleSettings::operator_secret)).
async fn operator_hash(state: &Console) -> Result<Option<SecretHash>, ConsoleError> {
    let stored = state.store().operator_secret().await?;
    Ok(stored.or_else(|| state.console.operator_secret.clone()))
}

/// `POST /console/login`: a session cookie and 303 to the console, or 401
/// and the form again.
pub async fn login(
    State(state): State<Console>,
    client: ClientIp,
    operator: Option<Operator>,
    Form(form): Form<LoginForm>,
) -> Result<Response, ConsoleError> {
    let ip = client.0;
    if let Err(wait) = state.console.logins.admit(ip, operator.is_some()) {
        tracing::warn!("console login refused: over the login limit");
        state.metrics().refused("console_logins");
        let seconds = chargeonce_server::limits::retry_after_seconds(wait);
        return login_form(Some(LoginRefusal::TooMany(seconds)));
    }
    let presented = form.secret.unwrap_or_default();
    let ok = match operator_hash(&state).await? {
        Some(hash) if !presented.is_empty() => hash.verify(&ShopSecret::from_string(presented)),
        _ => false,
    };
    if !ok {
        tracing::warn!("console login refused");
        // A little slower to refuse: guessing costs time (the secret itself
        // is long and random unless chosen, and at least 16 characters).
        tokio::time::sleep(REFUSAL_DELAY).await;
        return login_form(Some(LoginRefusal::Wrong));
    }
    let id = state.console.sessions.create();
    let secure = if state.console.secure_cookie {
        "; Secure"
    } else {
        ""
    };
    let cookie = format!("{COOKIE}={id}; HttpOnly; SameSite=Strict; Path=/console{secure}");
    let mut response = Redirect::to(super::BASE).into_response();
    if let Ok(value) = HeaderValue::from_str(&cookie) {
        response.headers_mut().insert(header::SET_COOKIE, value);
    }
    tracing::info!("console login");
    Ok(response)
}

/// The log-out form.
#[derive(Deserialize)]
pub struct CsrfForm {
    csrf: Option<String>,
}

/// `POST /console/logout`: ends the session, clears the cookie.
pub async fn logout(
    State(state): State<Console>,
    operator: Operator,
    Form(form): Form<CsrfForm>,
) -> Result<Response, ConsoleError> {
    operator.check_csrf(form.csrf.as_deref())?;
    state.console.sessions.remove(&operator.session);
    let mut response = Redirect::to("/console/login").into_response();
    let cleared = if state.console.secure_cookie {
        "chargeonce_console=; HttpOnly; SameSite=Strict; Path=/console; Max-Age=0; Secure"
    } else {
        "chargeonce_console=; HttpOnly; SameSite=Strict; Path=/console; Max-Age=0"
    };
    response
        .headers_mut()
        .insert(header::SET_COOKIE, HeaderValue::from_static(cleared));
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_expire_and_end() {
        let sessions = Sessions::new(Duration::from_secs(60));
        let id = sessions.create();
        assert_eq!(id.len(), 64);
        let operator = sessions.operator(&id).unwrap();
        assert!(operator.check_csrf(Some(&operator.csrf)).is_ok());
        assert!(operator.check_csrf(Some("x")).is_err());
        assert!(operator.check_csrf(None).is_err());
        sessions.flash(&id, "done");
        assert_eq!(
            sessions.operator(&id).unwrap().flash.as_deref(),
            Some("done")
        );
        assert_eq!(sessions.operator(&id).unwrap().flash, None);
        sessions.remove(&id);
        assert!(sessions.operator(&id).is_none());
        let short = Sessions::new(Duration::ZERO);
        let id = short.create();
        assert!(short.operator(&id).is_none());
    }

    #[test]
    fn the_cookie_is_found_among_others() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            HeaderValue::from_static("a=1; chargeonce_console=abc; b=2"),
        );
        assert_eq!(session_cookie(&headers).as_deref(), Some("abc"));
    }
}
