//! Request ids: every answer carries a `Request-Id` header, every problem
//! document made for the request carries it as `request_id`, and every log
//! line of the request carries it in the request's span.
//!
//! - **Which id.** A request that sends exactly one well-formed
//!   `Request-Id` ([`RequestId::parse`]: 1 to [`MAX_LEN`] characters of
//!   `A-Z a-z 0-9 . _ : -`) keeps it, so a client can follow its own id
//!   through our logs. Any other request (no header, a malformed one, more
//!   than one) gets a generated id ([`RequestId::generate`], a UUID v7): a
//!   bad id is replaced, never refused.
//! - **Where it goes.** [`middleware`] is the outermost layer of
//!   [`crate::router`], so every answer of the router has the header: the
//!   API's own answers, 404 and 405 fallbacks, 413s, 429s, timeouts,
//!   caught panics and the `problems_only` conversions. Only what hyper
//!   answers before a request exists (a head it cannot parse, a head too
//!   large) and connections closed at the header or idle timeout (no
//!   answer at all) carry none.
//! - **Problem bodies.** The middleware runs the request inside a task
//!   local ([`current`]), which `Problem::into_response` reads to add
//!   `request_id`. Stored answers (a payment's 201 or 200, a
//!   402 `payment_declined`, a 422 `refund_failed`) are not made by
//!   `into_response` but replayed from their stored bytes
//!   ([`crate::respond`]): their body is the key's, the same for every
//!   request with that key, and carries no `request_id`; only the header
//!   tells this request's id. Engine tasks (spawned) do not see the task
//!   local either, so what the engine renders to store never carries one.
//! - **Logs.** [`make_span`] is the `TraceLayer`'s span: `request_id`, the
//!   method and the path (never the query, the headers or the body). The
//!   engine task a request spawns is instrumented with the request's span
//!   ([`crate::pipeline::Command::run`]).

use std::borrow::Cow;
use std::fmt;
use std::time::Duration;

use axum::extract::Request;
use axum::http::{HeaderMap, HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;
use tracing::Span;

/// The header, in requests and answers.
pub const REQUEST_ID: HeaderName = HeaderName::from_static("request-id");

/// The longest request id a client may send.
pub const MAX_LEN: usize = 128;

/// The name of the problem document member that carries the id.
pub const PROBLEM_MEMBER: &str = "request_id";

/// A well-formed request id: 1 to [`MAX_LEN`] characters of
/// `A-Z a-z 0-9 . _ : -` (so always a valid header value and safe to log).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct RequestId(HeaderValue);

impl RequestId {
    /// A new id: a UUID v7 in its hyphenated form. Version 7 (a millisecond
    /// timestamp, then random bits) sorts by time, so ids in logs and
    /// indexes come in arrival order; its 74 random bits keep it unique
    /// across instances without coordination.
    pub fn generate() -> Self {
        let text = uuid::Uuid::now_v7().hyphenated().to_string();
        // A hyphenated UUID is always a valid header value.
        Self(HeaderValue::from_str(&text).unwrap_or(HeaderValue::from_static("-")))
    }

    /// A client's id, if well formed.
    pub fn parse(value: &HeaderValue) -> Option<Self> {
        let bytes = value.as_bytes();
        let allowed = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'-');
        (!bytes.is_empty() && bytes.len() <= MAX_LEN && bytes.iter().all(allowed))
            .then(|| Self(value.clone()))
    }

    /// The id of a request with these headers: the client's when it sent
    /// exactly one well-formed `Request-Id`, else a generated one.
    pub fn of_request(headers: &HeaderMap) -> Self {
        let mut sent = headers.get_all(REQUEST_ID).iter();
        match (sent.next(), sent.next()) {
            (Some(value), None) => Self::parse(value).unwrap_or_else(Self::generate),
            _ => Self::generate(),
        }
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        // Only well-formed (ASCII) ids are ever made.
        self.0.to_str().unwrap_or_default()
    }

    /// The id as a header value.
    pub fn header_value(&self) -> HeaderValue {
        self.0.clone()
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

tokio::task_local! {
    /// The id of the request whose future is being polled.
    static CURRENT: RequestId;
}

/// The id of the request being answered, inside [`middleware`] (not in
/// tasks the request spawned).
pub fn current() -> Option<RequestId> {
    CURRENT.try_with(Clone::clone).ok()
}

/// The layer (`axum::middleware::from_fn`): chooses the request's id
/// ([`RequestId::of_request`]), puts it in the request's header (replacing
/// what the client sent) and extensions, answers the request inside
/// [`current`]'s scope, and sets the answer's `Request-Id`.
pub async fn middleware(mut request: Request, next: Next) -> Response {
    let id = RequestId::of_request(request.headers());
    request.headers_mut().insert(REQUEST_ID, id.header_value());
    request.extensions_mut().insert(id.clone());
    let mut response = CURRENT.scope(id.clone(), next.run(request)).await;
    response.headers_mut().insert(REQUEST_ID, id.header_value());
    response
}

/// The span of a request to the API, for `TraceLayer::make_span_with`: at
/// INFO (so the id is on every line the default filter lets through), with
/// `request_id`, `method` and `path` (without the query: it may hold what
/// is nobody's business in a log). Headers and bodies are never recorded.
///
/// With traces on (`chargeonce_telemetry`), it is also the request's
/// OpenTelemetry span: named by the route template (`POST /v1/payments`),
/// continuing the caller's `traceparent`, with `trace_id` in every log
/// line; [`record_response`] adds the status and whether it was a replay,
/// the authentication adds `shop_id`.
pub fn make_span<B>(request: &axum::http::Request<B>) -> Span {
    if !chargeonce_telemetry::enabled() {
        // Traces off: the fields the logs show, nothing formatted for an
        // exporter that is not there.
        return tracing::info_span!(
            "request",
            request_id = id_of(request),
            method = %request.method(),
            path = %loggable_path(request.uri().path()),
            shop_id = tracing::field::Empty,
        );
    }
    let route = request
        .extensions()
        .get::<axum::extract::MatchedPath>()
        .map(axum::extract::MatchedPath::as_str);
    let span = tracing::info_span!(
        "request",
        request_id = id_of(request),
        method = %request.method(),
        path = %loggable_path(request.uri().path()),
        trace_id = tracing::field::Empty,
        shop_id = tracing::field::Empty,
        replayed = tracing::field::Empty,
        "otel.name" = %OtelName(request.method(), route),
        "otel.kind" = "server",
        "http.route" = route,
        "http.response.status_code" = tracing::field::Empty,
        "otel.status_code" = tracing::field::Empty,
    );
    if let Some(trace_id) = chargeonce_telemetry::context::continue_trace(&span, request.headers())
    {
        span.record("trace_id", trace_id);
    }
    span
}

/// The span of a request to the operator listener: the same fields for the
/// logs, under [`chargeonce_telemetry::OPERATOR_TARGET`], which traces leave
/// out (scrapes and health checks are not what anyone follows).
pub fn make_operator_span<B>(request: &axum::http::Request<B>) -> Span {
    tracing::info_span!(
        target: chargeonce_telemetry::OPERATOR_TARGET,
        "request",
        request_id = id_of(request),
        method = %request.method(),
        path = %loggable_path(request.uri().path()),
    )
}

/// Records the answer on the request's span, for `TraceLayer::on_response`:
/// its status, whether it replayed a stored answer, and a server error as
/// the span's error status.
pub fn record_response<B>(response: &axum::http::Response<B>, latency: Duration, span: &Span) {
    let status = response.status();
    span.record("http.response.status_code", status.as_u16());
    let replayed = response
        .headers()
        .contains_key(crate::respond::IDEMPOTENT_REPLAYED);
    span.record("replayed", replayed);
    if status.is_server_error() {
        span.record("otel.status_code", "ERROR");
    }
    // Under tower-http's own target, as its default line was: `RUST_LOG`
    // filters that showed it still do.
    tracing::debug!(
        target: "tower_http::trace::on_response",
        parent: span,
        status = status.as_u16(),
        latency_us = latency.as_micros() as u64,
        "finished processing request"
    );
}

fn id_of<B>(request: &axum::http::Request<B>) -> &str {
    request
        .extensions()
        .get::<RequestId>()
        .map(RequestId::as_str)
        .unwrap_or_default()
}

/// A span's name as OpenTelemetry's HTTP conventions make it: the method
/// and the route template, or the method alone for a request no route
/// matched (its path could be anything).
struct OtelName<'a>(&'a axum::http::Method, Option<&'a str>);

impl fmt::Display for OtelName<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.1 {
            Some(route) => write!(f, "{} {route}", self.0),
            None => write!(f, "{}", self.0),
        }
    }
}

/// The path of idempotency-key introspection names a key.
const KEY_PATH: &str = "/v1/idempotency-keys/";

/// The path as a log may show it: an idempotency key in it (the path of
/// `GET /v1/idempotency-keys/{key}`) is replaced by its short hash, the
/// name every other log line gives a key
/// ([`chargeonce_core::IdempotencyKey::log_id`]; the same for a key without
/// percent-escapes): a key may carry a customer's order reference.
pub fn loggable_path(path: &str) -> Cow<'_, str> {
    match path.strip_prefix(KEY_PATH) {
        Some("") | None => path.into(),
        Some(raw) => match chargeonce_core::IdempotencyKey::new(raw) {
            Ok(key) => format!("{KEY_PATH}#{}", key.log_id()).into(),
            Err(_) => format!("{KEY_PATH}{{key}}").into(),
        },
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn headers(values: &[&'static str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for value in values {
            headers.append(REQUEST_ID, HeaderValue::from_static(value));
        }
        headers
    }

    #[test]
    fn a_key_in_the_path_is_logged_as_its_hash() {
        let logged = loggable_path("/v1/idempotency-keys/order-123-pay");
        assert!(logged.starts_with("/v1/idempotency-keys/#"), "{logged}");
        assert!(!logged.contains("order-123"), "{logged}");
        assert_eq!(logged.len(), "/v1/idempotency-keys/#".len() + 12);
        assert_eq!(loggable_path("/v1/payments/pay_1"), "/v1/payments/pay_1");
        assert_eq!(
            loggable_path("/v1/idempotency-keys/"),
            "/v1/idempotency-keys/"
        );
    }

    #[test]
    fn a_well_formed_client_id_is_kept() {
        for id in ["a", "req-1", "trace:abc.def_12", &"x".repeat(MAX_LEN)] {
            let value = HeaderValue::from_str(id).unwrap();
            assert_eq!(RequestId::parse(&value).unwrap().as_str(), id);
        }
        let id = RequestId::of_request(&headers(&["client-42"]));
        assert_eq!(id.as_str(), "client-42");
    }

    #[test]
    fn malformed_or_duplicated_ids_are_replaced() {
        let long = "x".repeat(MAX_LEN + 1);
        for bad in ["", "has space", "a,b", "ümlaut", "semi;colon", &long] {
            if let Ok(value) = HeaderValue::from_bytes(bad.as_bytes()) {
                assert!(RequestId::parse(&value).is_none(), "{bad:?}");
            }
        }
        let replaced = RequestId::of_request(&headers(&["has space"]));
        assert_ne!(replaced.as_str(), "has space");
        let duplicated = RequestId::of_request(&headers(&["one", "two"]));
        assert!(!["one", "two"].contains(&duplicated.as_str()));
        assert!(uuid::Uuid::parse_str(duplicated.as_str()).is_ok());
    }

    #[test]
    fn generated_ids_are_uuid_v7_and_well_formed() {
        let a = RequestId::generate();
        let b = RequestId::generate();
        assert_ne!(a, b);
        let uuid = uuid::Uuid::parse_str(a.as_str()).unwrap();
        assert_eq!(uuid.get_version_num(), 7);
        assert!(RequestId::parse(&a.header_value()).is_some());
    }

    /// A caught panic's 500 is made inside the scope: header and body agree.
    #[tokio::test]
    async fn a_caught_panic_carries_the_id() {
        use axum::response::IntoResponse as _;
        use tower::ServiceExt as _;
        let app = axum::Router::new()
            .route(
                "/boom",
                axum::routing::get(|| async {
                    if true {
                        panic!("a bug");
                    }
                }),
            )
            .layer(tower_http::catch_panic::CatchPanicLayer::custom(|_| {
                crate::problem::Problem::new(
                    crate::problem::ProblemCode::InternalError,
                    "internal error",
                )
                .into_response()
            }))
            .layer(axum::middleware::from_fn(middleware));
        let request = axum::http::Request::get("/boom")
            .header(REQUEST_ID, "panic-1")
            .body(axum::body::Body::empty())
            .unwrap();
        let answer = app.oneshot(request).await.unwrap();
        assert_eq!(answer.status(), 500);
        assert_eq!(answer.headers()[REQUEST_ID], "panic-1");
        let body = axum::body::to_bytes(answer.into_body(), 1 << 16)
            .await
            .unwrap();
        let problem: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(problem["request_id"], "panic-1");
        assert_eq!(problem["code"], "internal_error");
    }

    #[tokio::test]
    async fn current_is_set_only_inside_the_scope() {
        assert!(current().is_none());
        let id = RequestId::generate();
        let seen = CURRENT.scope(id.clone(), async { current() }).await;
        assert_eq!(seen, Some(id));
        let stamped = CURRENT
            .scope(RequestId::generate(), async {
                tokio::spawn(async { current() }).await.unwrap()
            })
            .await;
        assert!(stamped.is_none(), "spawned tasks do not inherit it");
    }
}
