//! The engine's timings: the lease on a running key, how long finished keys
//! are replayed, and the repeat warning (`chargeonce serve`). The acquirer
//! call's timeout is the upstream's (`args/upstream.rs`).

use std::time::Duration;

use chargeonce_core::{EngineConfig, KeyTiming};
use clap::Args;

use super::upstream::UpstreamArgs;

/// How the engine times keys and acquirer calls.
#[derive(Debug, Clone, Args)]
pub struct EngineArgs {
    /// Lease on a key while its request runs; renewed during acquirer calls.
    /// A crashed instance's key can be taken over once it runs out.
    #[arg(long, env = "CHARGEONCE_LEASE", default_value = "30s", value_parser = humantime::parse_duration)]
    pub lease: Duration,
    /// How long finished keys are kept and replayed (the published retention).
    #[arg(long, env = "CHARGEONCE_KEY_TTL", default_value = "24h", value_parser = humantime::parse_duration)]
    pub key_ttl: Duration,
    /// Log a warning when a key is repeated this many times (and at every
    /// doubling): repeats point at client timeouts or double submits.
    #[arg(long, default_value_t = 10)]
    pub repeat_warning: u64,
    /// How long an authorization (a payment with `capture_method` `manual`)
    /// is held for captures, from its creation; then the expirer voids what
    /// is left. Keep it below the acquirer's own hold (7 days at most
    /// acquirers).
    #[arg(long, env = "CHARGEONCE_AUTHORIZATION_TTL", default_value = "7d", value_parser = humantime::parse_duration)]
    pub authorization_ttl: Duration,
}

impl EngineArgs {
    /// The engine's settings, with the acquirer's call timeout and settle
    /// window (`--acquirer-timeout`, `--acquirer-settle-window`: the
    /// upstream's flags).
    pub fn config(&self, upstream: &UpstreamArgs) -> EngineConfig {
        EngineConfig {
            timing: KeyTiming {
                lease: self.lease,
                ttl: self.key_ttl,
            },
            acquirer_timeout: upstream.acquirer_timeout,
            repeat_warning: self.repeat_warning,
            settle_window: upstream.acquirer_settle_window,
            authorization_ttl: self.authorization_ttl,
            ..EngineConfig::default()
        }
    }
}
