//! Extractors: everything checked before execution begins. A request they
//! reject is answered at once and leaves nothing stored against its key.

mod auth;
mod body;
mod idempotency_key;

pub use auth::AuthenticatedShop;
pub use body::{JsonBody, MAX_BODY_BYTES};
pub use idempotency_key::IdempotencyKeyHeader;
