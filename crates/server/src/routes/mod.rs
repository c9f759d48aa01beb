//! The API's routes.

pub mod health;
pub mod payments;
