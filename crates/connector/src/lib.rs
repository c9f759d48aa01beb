//! # chargeonce-connector
//!
//! The service's adapter to an acquirer over HTTP: [`HttpAcquirer`]
//! implements [`chargeonce_core::Acquirer`] over the acquirer's API
//! ([`protocol`]) and classifies every answer as done, refused, unknown or
//! never sent, in one place (see [`client`]). It knows no test double: the
//! simulator (`chargeonce-acquirer`) is one acquirer it can talk to, as a
//! real provider is another, the way Hyperswitch keeps its connectors apart.
//!
//! ```
//! use std::time::Duration;
//! use chargeonce_connector::{HttpAcquirer, HttpAcquirerConfig, redact_url};
//!
//! # fn main() -> Result<(), chargeonce_connector::ClientError> {
//! let acquirer = HttpAcquirer::new(
//!     "http://127.0.0.1:9000",
//!     HttpAcquirerConfig::default(),
//! )?;
//! # let _ = acquirer;
//! assert_eq!(redact_url("http://user:pw@127.0.0.1:9000"), "http://127.0.0.1:9000/");
//! # Ok(())
//! # }
//! ```

mod answers;
pub mod client;
mod credentials;
pub mod moves;
pub mod protocol;
mod redact;

pub use client::{ClientError, HttpAcquirer, HttpAcquirerConfig};
pub use credentials::AcquirerCredentials;
pub use redact::redact_url;
