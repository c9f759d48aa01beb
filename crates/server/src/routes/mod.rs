//! The API's routes.

pub mod events;
pub mod health;
pub mod metrics;
pub mod payments;
pub mod refunds;
pub mod webhooks;
