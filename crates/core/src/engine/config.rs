//! The engine's settings, and the checks that they can work together.

use std::time::Duration;

#[cfg(doc)]
use crate::Acquirer;
use crate::KeyTiming;

/// Settings that cannot work together.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A zero lease would let every request take over every other.
    #[error("the lease must be longer than zero")]
    ZeroLease,
    /// A zero acquirer timeout would give up on every call before sending it.
    #[error("the acquirer timeout must be longer than zero")]
    ZeroAcquirerTimeout,
    /// A settle window shorter than the acquirer timeout would look a charge
    /// up (and send it again) while the first attempt may still be running.
    #[error("the settle window must be at least the acquirer timeout")]
    SettleWindowTooShort,
}

/// Engine settings.
#[derive(Debug, Clone, Copy)]
pub struct EngineConfig {
    /// Lease length and key retention.
    pub timing: KeyTiming,
    /// The longest an acquirer call may take before its outcome counts as
    /// unknown. It may exceed the lease: the lease is renewed during the call.
    pub acquirer_timeout: Duration,
    /// What to tell a client that should come back later.
    pub retry_after: Duration,
    /// A key repeated this many times after its first request is logged as a
    /// warning (again at every doubling): repeats point at client timeouts or
    /// double submits.
    pub repeat_warning: u64,
    /// For an acquirer that ignores keys ([`Acquirer::is_idempotent`] is
    /// `false`): how long after an attempt was sent nobody looks it up or
    /// sends it again. An attempt whose answer was lost may still be in
    /// flight at the provider and be recorded late; a look-up before it
    /// appears would find nothing and charge twice. Keep it well above the
    /// acquirer timeout and the provider's own processing time.
    pub settle_window: Duration,
    /// How long an authorization (a payment with manual capture) is held
    /// for captures before the expiry worker releases it, counted from the
    /// payment's creation.
    pub authorization_ttl: Duration,
}

impl EngineConfig {
    /// Checks that the settings can work together.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let lease = self.timing.lease;
        if lease.is_zero() {
            return Err(ConfigError::ZeroLease);
        }
        if self.acquirer_timeout.is_zero() {
            return Err(ConfigError::ZeroAcquirerTimeout);
        }
        if self.settle_window < self.acquirer_timeout {
            return Err(ConfigError::SettleWindowTooShort);
        }
        Ok(())
    }
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            timing: KeyTiming {
                lease: Duration::from_secs(30),
                ttl: Duration::from_secs(24 * 60 * 60),
            },
            acquirer_timeout: Duration::from_secs(10),
            retry_after: Duration::from_secs(1),
            repeat_warning: 10,
            settle_window: DEFAULT_SETTLE_WINDOW,
            authorization_ttl: crate::DEFAULT_AUTHORIZATION_TTL,
        }
    }
}

/// The default [`EngineConfig::settle_window`]: two minutes, twelve times
/// the default acquirer timeout.
pub const DEFAULT_SETTLE_WINDOW: Duration = Duration::from_secs(120);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_that_cannot_work_are_refused() {
        assert_eq!(EngineConfig::default().validate(), Ok(()));
        let mut config = EngineConfig::default();
        config.timing.lease = Duration::ZERO;
        assert_eq!(config.validate(), Err(ConfigError::ZeroLease));
        let config = EngineConfig {
            acquirer_timeout: Duration::ZERO,
            ..EngineConfig::default()
        };
        assert_eq!(config.validate(), Err(ConfigError::ZeroAcquirerTimeout));
    }
}
