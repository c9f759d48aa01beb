//! A JSON body: checked media type, bounded size, parsed before anything runs.

use axum::body::Body;
use axum::extract::{FromRequest, Request};
use axum::http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use serde_json::Value;

use crate::AppState;
use crate::problem::{Problem, ProblemCode};

/// The largest request body accepted: 64 KiB.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// A request body that is `application/json`, at most [`MAX_BODY_BYTES`], and
/// valid JSON.
#[derive(Debug, Clone)]
pub struct JsonBody(pub Value);

fn too_large() -> Problem {
    Problem::new(
        ProblemCode::PayloadTooLarge,
        format!("the body may be at most {MAX_BODY_BYTES} bytes"),
    )
}

fn is_json(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or_default().trim();
    essence.eq_ignore_ascii_case("application/json")
        || essence.to_ascii_lowercase().ends_with("+json")
}

impl FromRequest<AppState> for JsonBody {
    type Rejection = Problem;

    async fn from_request(request: Request, _: &AppState) -> Result<Self, Problem> {
        let content_type = request
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        if !is_json(content_type) {
            return Err(Problem::new(
                ProblemCode::UnsupportedMediaType,
                "send the body as application/json",
            ));
        }
        let declared = request
            .headers()
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.parse::<u64>().ok());
        if declared.is_some_and(|len| len > MAX_BODY_BYTES as u64) {
            return Err(too_large());
        }
        let bytes = axum::body::to_bytes(Body::new(request.into_body()), MAX_BODY_BYTES)
            .await
            .map_err(|error| {
                let over_limit = std::error::Error::source(&error)
                    .is_some_and(|source| source.is::<http_body_util::LengthLimitError>());
                if over_limit {
                    too_large()
                } else {
                    Problem::new(ProblemCode::MalformedJson, "the body could not be read")
                }
            })?;
        serde_json::from_slice(&bytes)
            .map(Self)
            .map_err(|e| Problem::new(ProblemCode::MalformedJson, e.to_string()))
    }
}
