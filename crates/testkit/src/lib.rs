//! Test support for chargeonce: every test gets its own database, so tests
//! run in parallel against real PostgreSQL and real SQLite files, never a
//! mock.
//!
//! - [`db`]: [`TestDb`], a fresh PostgreSQL database or SQLite file per test;
//! - [`backend`]: [`Backend`], which store a test runs on, and
//!   [`on_both_stores!`], which defines a test once per store;
//! - [`service`]: [`TestService`], the service (store, simulator, engine,
//!   server) on a free port with two known shops, started through a
//!   [`ServiceBuilder`] for what the tests vary;
//! - [`merchant`]: [`TestMerchant`], a receiver of merchant events that
//!   answers from a script and logs every delivery.
//!
//! ```no_run
//! use chargeonce_testkit::{Backend, TestService, body};
//!
//! async fn a_payment_is_charged(backend: Backend) {
//!     let s = TestService::start(backend).await;
//!     let answer = s.pay("k1", &body("order-1", "1500.00", "tok_ok")).send().await.unwrap();
//!     assert_eq!(answer.status(), 201);
//!     assert_eq!(s.charges("order-1").await.len(), 1);
//! }
//!
//! chargeonce_testkit::on_both_stores!(a_payment_is_charged);
//! # fn main() {}
//! ```

pub mod answer;
pub mod backend;
pub mod db;
pub mod merchant;
pub mod service;

pub use answer::{Answer, client_from, send};
pub use backend::Backend;
pub use db::{TestDb, admin_url};
pub use merchant::{Received, Reply, TestMerchant};
pub use service::{
    OTHER_SECRET, OTHER_SHOP, SECRET, SHOP, ServiceBuilder, TestService, WEBHOOK_SECRET, body,
};
