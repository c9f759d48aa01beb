//! The `{id}` of a path, answered as the API answers an unknown id.

use axum::extract::{FromRequestParts, Path};
use axum::http::request::Parts;

use crate::problem::{Problem, ProblemCode};

/// The one `{id}` parameter of a route, percent-decoded.
///
/// An id that does not decode to UTF-8 (`pay_%ff`, the overlong `%C0%AE`, an
/// encoded surrogate) cannot name anything, so it is answered like any other
/// id that names nothing: `404 not_found`, never axum's `400 text/plain`.
#[derive(Debug, Clone)]
pub struct PathId(pub String);

impl<S: Send + Sync> FromRequestParts<S> for PathId {
    type Rejection = Problem;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Problem> {
        match Path::<String>::from_request_parts(parts, state).await {
            Ok(Path(id)) => Ok(Self(id)),
            Err(rejection) => {
                let status = rejection.status();
                if status.is_server_error() {
                    // A route without its parameter: a bug of ours.
                    tracing::error!(error = %rejection.body_text(), "path parameter missing");
                    return Err(Problem::new(ProblemCode::InternalError, "internal error"));
                }
                Err(Problem::new(
                    ProblemCode::NotFound,
                    "no such resource: the id in the path is not valid percent-encoded UTF-8",
                ))
            }
        }
    }
}
