//! RFC 9457 problem details (`application/problem+json`) with a stable `code`.

use std::time::Duration;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

pub use chargeonce_wire::{PROBLEM_JSON, ProblemCode};

/// The axum status of a [`ProblemCode`] (the wire crate knows it as a `u16`).
pub trait HttpStatus {
    /// The status it is answered with ([`ProblemCode::status`]).
    fn http_status(self) -> StatusCode;
}

impl HttpStatus for ProblemCode {
    fn http_status(self) -> StatusCode {
        StatusCode::from_u16(self.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
    }
}

/// One problem answer: the wire document ([`chargeonce_wire::Problem`]) and
/// the headers that go with it.
#[derive(Debug, Clone)]
pub struct Problem {
    code: ProblemCode,
    status: StatusCode,
    // Boxed: a `Problem` is the error type of most handlers and extractors.
    document: Box<chargeonce_wire::Problem>,
    retry_after: Option<Duration>,
}

impl Problem {
    /// A problem with a detail sentence for this occurrence.
    pub fn new(code: ProblemCode, detail: impl Into<String>) -> Self {
        Self {
            code,
            status: code.http_status(),
            document: Box::new(chargeonce_wire::Problem::new(code, detail)),
            retry_after: None,
        }
    }

    /// Adds an extension member.
    pub fn with(mut self, name: &str, value: Value) -> Self {
        self.document.extensions.insert(name.to_owned(), value);
        self
    }

    /// Sets the `request_id` member: the id of the request this problem
    /// answers (never set on a stored answer, which is replayed as bytes).
    pub fn with_request_id(mut self, id: impl Into<String>) -> Self {
        self.document.request_id = Some(id.into());
        self
    }

    /// Adds a `Retry-After` header (whole seconds, at least 1).
    pub fn retry_after(mut self, after: Duration) -> Self {
        self.retry_after = Some(after);
        self
    }

    /// The problem that stands for an error status the HTTP stack (axum,
    /// hyper, tower-http) answered with on its own: the code of that status
    /// where the API has one (`404 not_found`, `405 method_not_allowed`,
    /// `413 payload_too_large`, `415 unsupported_media_type`, `422
    /// invalid_request`, `400 bad_request`, `401 unauthorized`, `500
    /// internal_error`), else [`ProblemCode::HttpError`] with the status kept.
    pub fn for_status(status: StatusCode, detail: impl Into<String>) -> Self {
        let code = match status {
            StatusCode::BAD_REQUEST => ProblemCode::BadRequest,
            StatusCode::UNAUTHORIZED => ProblemCode::Unauthorized,
            StatusCode::NOT_FOUND => ProblemCode::NotFound,
            StatusCode::METHOD_NOT_ALLOWED => ProblemCode::MethodNotAllowed,
            StatusCode::PAYLOAD_TOO_LARGE => ProblemCode::PayloadTooLarge,
            StatusCode::UNSUPPORTED_MEDIA_TYPE => ProblemCode::UnsupportedMediaType,
            StatusCode::UNPROCESSABLE_ENTITY => ProblemCode::InvalidRequest,
            StatusCode::INTERNAL_SERVER_ERROR => ProblemCode::InternalError,
            _ => ProblemCode::HttpError,
        };
        Self {
            code,
            status,
            document: Box::new(chargeonce_wire::Problem::with_status(
                code,
                status.as_u16(),
                detail,
            )),
            retry_after: None,
        }
    }

    /// The code.
    pub fn code(&self) -> ProblemCode {
        self.code
    }

    /// The HTTP status it is answered with.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// The detail sentence.
    pub fn detail(&self) -> &str {
        &self.document.detail
    }

    /// The document, as sent.
    pub fn document(&self) -> &chargeonce_wire::Problem {
        &self.document
    }

    /// The JSON body: the document with its members sorted by name (through
    /// a `serde_json::Value`, as ever: stored answers are replayed as bytes).
    pub fn to_body(&self) -> Vec<u8> {
        serde_json::to_value(&self.document)
            .and_then(|value| serde_json::to_vec(&value))
            .unwrap_or_default()
    }
}

/// `Retry-After` in whole seconds, never 0.
pub(crate) fn retry_after_value(after: Duration) -> HeaderValue {
    HeaderValue::from(after.as_secs().max(1))
}

impl Problem {
    /// The body of this problem about to be answered: its document with the
    /// current request's id as `request_id` ([`crate::request_id::current`]);
    /// without one outside a request.
    fn body_for_this_request(&self) -> Vec<u8> {
        match crate::request_id::current() {
            Some(id) => self.clone().with_request_id(id.as_str()).to_body(),
            None => self.to_body(),
        }
    }
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let mut response = (
            self.status,
            [(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON))],
            // With the id of the request it answers (see `crate::request_id`).
            self.body_for_this_request(),
        )
            .into_response();
        if let Some(after) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, retry_after_value(after));
        }
        // For the layers that count refusals (see `crate::limits`).
        response.extensions_mut().insert(self.code);
        if self.code == ProblemCode::BodyTimeout {
            // The rest of the body is never read: the connection cannot be reused.
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        // A shop's 401s name the scheme to authenticate with (RFC 9110
        // §15.5.2); the acquirer's webhooks are signed instead.
        if matches!(
            self.code,
            ProblemCode::Unauthorized | ProblemCode::ApiKeyRevoked | ProblemCode::ApiKeyExpired
        ) {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Basic realm=\"chargeonce\""),
            );
        }
        response
    }
}

/// The longest text of a bare error answer kept as the problem's detail.
const MAX_BARE_DETAIL: usize = 512;

/// A response layer (`axum::middleware::map_response`) that turns every
/// error answer the HTTP stack made on its own (an axum rejection in
/// `text/plain`, an empty 405 or 413 of a layer, ...) into
/// `application/problem+json` with a stable code ([`Problem::for_status`]),
/// so that no error leaves the API in another shape. The status and the
/// other headers (`Allow`, `Retry-After`) are kept; a short `text/plain`
/// reason of a 4xx becomes the detail (a 5xx shows none). Answers that are
/// problems already, and successes, pass untouched.
pub async fn problems_only(response: Response) -> Response {
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let content_type = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    // Problems already, and the console's HTML error pages (its login
    // refusal, its 403 for a stale form): meant for a person, kept as they are.
    if content_type.eq_ignore_ascii_case(PROBLEM_JSON) || content_type.starts_with("text/html") {
        return response;
    }
    let plain = content_type.starts_with("text/plain");
    let (parts, body) = response.into_parts();
    let text = if plain && status.is_client_error() {
        axum::body::to_bytes(body, MAX_BARE_DETAIL)
            .await
            .ok()
            .and_then(|bytes| String::from_utf8(bytes.to_vec()).ok())
            .filter(|text| !text.trim().is_empty())
    } else {
        None
    };
    let detail = match text {
        Some(text) => text,
        None if status.is_server_error() => "internal error".to_owned(),
        None => status
            .canonical_reason()
            .unwrap_or("the request was refused")
            .to_owned(),
    };
    let mut answer = Problem::for_status(status, detail).into_response();
    for name in parts.headers.keys() {
        let framing = name == header::CONTENT_TYPE
            || name == header::CONTENT_LENGTH
            || name == header::TRANSFER_ENCODING;
        if framing || answer.headers().contains_key(name) {
            continue;
        }
        for value in parts.headers.get_all(name) {
            answer.headers_mut().append(name.clone(), value.clone());
        }
    }
    answer
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    async fn converted(response: Response) -> (StatusCode, HeaderMapLite, Value) {
        let answer = problems_only(response).await;
        let status = answer.status();
        let headers = answer
            .headers()
            .iter()
            .map(|(n, v)| (n.as_str().to_owned(), v.to_str().unwrap().to_owned()))
            .collect();
        let body = axum::body::to_bytes(answer.into_body(), 1 << 16)
            .await
            .unwrap();
        (status, headers, serde_json::from_slice(&body).unwrap())
    }

    type HeaderMapLite = Vec<(String, String)>;

    #[tokio::test]
    async fn bare_errors_become_problems_with_their_status() {
        let cases = [
            (StatusCode::BAD_REQUEST, "bad_request"),
            (StatusCode::NOT_FOUND, "not_found"),
            (StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed"),
            (StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large"),
            (StatusCode::UNSUPPORTED_MEDIA_TYPE, "unsupported_media_type"),
            (StatusCode::UNPROCESSABLE_ENTITY, "invalid_request"),
            (StatusCode::INTERNAL_SERVER_ERROR, "internal_error"),
            (StatusCode::REQUEST_TIMEOUT, "http_error"),
            (StatusCode::BAD_GATEWAY, "http_error"),
        ];
        for (status, code) in cases {
            let bare = (
                status,
                [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
                [(header::ALLOW, "GET")],
                "Failed to deserialize: secret internals",
            )
                .into_response();
            let (answered, headers, problem) = converted(bare).await;
            assert_eq!(answered, status);
            assert_eq!(problem["code"], code);
            assert_eq!(problem["status"], status.as_u16());
            assert_eq!(problem["type"], format!("urn:chargeonce:problem:{code}"));
            assert!(headers.contains(&("content-type".into(), PROBLEM_JSON.into())));
            assert!(headers.contains(&("allow".into(), "GET".into())));
            let detail = problem["detail"].as_str().unwrap();
            if status.is_server_error() {
                assert_eq!(detail, "internal error", "5xx details are not shown");
            } else {
                assert!(detail.starts_with("Failed to deserialize"), "{detail}");
            }
        }
        // An empty one gets the reason phrase.
        let (_, _, problem) = converted(StatusCode::METHOD_NOT_ALLOWED.into_response()).await;
        assert_eq!(problem["detail"], "Method Not Allowed");
    }

    #[tokio::test]
    async fn problems_and_successes_pass_untouched() {
        let problem = Problem::new(ProblemCode::RequestInProgress, "wait")
            .retry_after(Duration::from_secs(2))
            .into_response();
        let (status, headers, body) = converted(problem).await;
        assert_eq!(status, StatusCode::CONFLICT);
        assert_eq!(body["detail"], "wait");
        assert!(headers.contains(&("retry-after".into(), "2".into())));
        let ok = (StatusCode::OK, "fine").into_response();
        let answer = problems_only(ok).await;
        assert_eq!(answer.status(), StatusCode::OK);
        let body = axum::body::to_bytes(answer.into_body(), 64).await.unwrap();
        assert_eq!(&body[..], b"fine");
    }
}
