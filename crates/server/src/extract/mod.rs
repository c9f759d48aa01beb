//! Extractors: everything checked before execution begins. A request they
//! reject is answered at once, always as a problem (their rejection is
//! [`Problem`](crate::problem::Problem)), and leaves nothing stored against
//! its key.

mod auth;
mod body;
mod idempotency_key;
mod path;
mod query;
mod scope;

pub use auth::{AuthenticatedShop, client_key};
pub use body::{
    JsonBody, MAX_BODY_BYTES, OptionalJsonBody, check_declared_length, parse_strict_json, read_body,
};
pub use idempotency_key::IdempotencyKeyHeader;
pub use path::PathId;
pub use query::{StrictQuery, check_query};
