//! An error and its causes on one line, for logs.
//!
//! chargeonce's errors say only their own part in `Display` and give their
//! cause from [`source`](std::error::Error::source) (as the Rust API
//! guidelines ask), so a chain printed by `anyhow`'s `{:#}` names each cause
//! once. A log line wants the whole chain: [`Chain`] prints it.

use std::error::Error;
use std::fmt;

/// Displays an error followed by each of its sources, `: `-separated.
///
/// ```
/// use chargeonce_core::{Chain, StoreError};
///
/// let error = StoreError::unavailable("connection refused");
/// assert_eq!(error.to_string(), "store unavailable");
/// assert_eq!(Chain(&error).to_string(), "store unavailable: connection refused");
/// ```
pub struct Chain<'a>(pub &'a (dyn Error + 'static));

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)?;
        let mut cause = self.0.source();
        while let Some(source) = cause {
            write!(f, ": {source}")?;
            cause = source.source();
        }
        Ok(())
    }
}
