//! Answers of the setup writes that make a secret (an API key, a webhook
//! endpoint or its new signing secret): the request a repeat is judged by,
//! and the headers of an answer that may carry a secret.

use axum::http::header::{CACHE_CONTROL, PRAGMA};
use axum::http::{HeaderName, HeaderValue};
use axum::response::Response;
use chargeonce_core::api_key::MakingRequest;
use chargeonce_core::{Fingerprint, IdempotencyKey};
use serde_json::Value;

use super::IDEMPOTENT_REPLAYED;
use crate::problem::{Problem, ProblemCode};

/// The request that makes something: its idempotency key and the
/// fingerprint of its operation (`path` as the route names it, with the
/// parsed id: a percent-encoded path of the same request is the same
/// request) and body.
pub fn making(key: &IdempotencyKey, path: &str, body: &Value) -> Result<MakingRequest, Problem> {
    let fingerprint = Fingerprint::compute("POST", path, body)
        .map_err(|e| Problem::new(ProblemCode::MalformedJson, e.to_string()))?;
    Ok(MakingRequest {
        idempotency_key: key.as_str().to_owned(),
        fingerprint: *fingerprint.as_bytes(),
    })
}

/// Marks an answer that may carry a secret: no cache on the way may keep
/// it; and a repeat's answer (which carries none) as replayed.
pub fn secret_headers(mut response: Response, replayed: bool) -> Response {
    let headers = response.headers_mut();
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(PRAGMA, HeaderValue::from_static("no-cache"));
    if replayed {
        headers.insert(
            HeaderName::from_static(IDEMPOTENT_REPLAYED),
            HeaderValue::from_static("true"),
        );
    }
    response
}
