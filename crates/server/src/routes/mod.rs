//! The API's routes.

mod amount;
pub mod api_keys;
pub mod cancel;
pub mod captures;
pub mod events;
pub mod health;
pub mod history;
pub mod keys;
pub mod lists;
pub mod payments;
pub mod refunds;
pub mod void;
pub mod webhook_endpoints;
pub mod webhooks;
