//! The `Idempotency-Key` header.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use chargeonce_core::IdempotencyKey;

use crate::problem::{Problem, ProblemCode};

/// The header's name.
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";

/// A valid `Idempotency-Key`, from exactly one header, in the structured-field
/// string form (`"abc"`) or as a bare token (`abc`).
#[derive(Debug, Clone)]
pub struct IdempotencyKeyHeader(pub IdempotencyKey);

impl<S: Send + Sync> FromRequestParts<S> for IdempotencyKeyHeader {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Problem> {
        let mut values = parts.headers.get_all(IDEMPOTENCY_KEY).iter();
        let Some(value) = values.next() else {
            return Err(Problem::new(
                ProblemCode::MissingIdempotencyKey,
                "every POST that changes state needs an Idempotency-Key header, \
                 named after the business operation (for example order-123-pay)",
            ));
        };
        if values.next().is_some() {
            return Err(Problem::new(
                ProblemCode::DuplicateIdempotencyKey,
                "send exactly one Idempotency-Key header",
            ));
        }
        IdempotencyKey::from_header(value.as_bytes())
            .map(Self)
            .map_err(|e| Problem::new(ProblemCode::InvalidIdempotencyKey, e.to_string()))
    }
}
