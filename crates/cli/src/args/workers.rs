//! The background workers' flags (`chargeonce serve`): the sweeper of expired
//! keys, the completer of abandoned keys, the reconciler, the outbox relay
//! and the flusher of cached repeats. [`crate::workers`] starts them from
//! these.

use std::time::Duration;

use chargeonce_workers::completer::CompleterConfig;
use chargeonce_workers::expirer::ExpirerConfig;
use chargeonce_workers::reconciler::ReconcilerConfig;
use chargeonce_workers::relay::RelayConfig;
use chargeonce_workers::sweeper::SweeperConfig;
use chargeonce_workers::tally::TallyFlusherConfig;
use clap::Args;

/// The background workers: which run on this instance, and how often.
#[derive(Debug, Clone, Args)]
pub struct WorkersArgs {
    /// Pause between sweeps of expired keys.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    pub sweep_interval: Duration,
    /// Keys deleted per sweep statement.
    #[arg(long, default_value_t = 1000)]
    pub sweep_batch: u32,
    /// Pause between completer passes.
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    pub completer_interval: Duration,
    /// How long an unfinished key's lease must have been over before the
    /// completer drives it (a client retry usually comes first).
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub completer_idle: Duration,
    /// A payment still pending this long after its creation is given up on
    /// by the completer: canceled, its charge looked up (after the settle
    /// window) and never sent again; a charge found is refunded in full.
    /// So no payment stays pending, and no order locked, for ever.
    #[arg(long, default_value = "1h", value_parser = humantime::parse_duration)]
    pub completer_give_up: Duration,
    /// Do not run the completer on this instance.
    #[arg(long)]
    pub no_completer: bool,
    /// Pause between passes of the expirer (which voids authorizations
    /// nobody captured before `--authorization-ttl` ran out).
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    pub expiry_interval: Duration,
    /// Do not run the expirer on this instance.
    #[arg(long)]
    pub no_expirer: bool,
    /// Pause between reconciler passes.
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    pub reconcile_interval: Duration,
    /// How old a pending payment must be before the reconciler asks the acquirer.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    pub reconcile_pending_after: Duration,
    /// How far back the reconciler compares our payments with the acquirer's ledger.
    #[arg(long, default_value = "1h", value_parser = humantime::parse_duration)]
    pub reconcile_window: Duration,
    /// How often the reconciler compares the whole window again; the passes
    /// between compare only what is new since the last one (and the first
    /// pass after a start is always a full one).
    #[arg(long, default_value = "6h", value_parser = humantime::parse_duration)]
    pub reconcile_full_every: Duration,
    /// Do not run the reconciler on this instance (run it on one instance, or
    /// as `chargeonce reconcile` from cron).
    #[arg(long)]
    pub no_reconciler: bool,
    /// Pause between outbox relay passes when no merchant event is due.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    pub relay_interval: Duration,
    /// The longest a shop's webhook may take to answer one delivery.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    pub relay_timeout: Duration,
    /// The first retry delay of a failed delivery (doubled per attempt, with jitter).
    #[arg(long, default_value = "5s", value_parser = humantime::parse_duration)]
    pub relay_backoff: Duration,
    /// The longest retry delay of a failed delivery.
    #[arg(long, default_value = "1h", value_parser = humantime::parse_duration)]
    pub relay_backoff_max: Duration,
    /// Stop retrying an event this long after it became due (it can be
    /// resent by hand with `POST /v1/events/{id}/resend`).
    #[arg(long, default_value = "72h", value_parser = humantime::parse_duration)]
    pub relay_give_up: Duration,
    /// Do not run the outbox relay on this instance (events wait in the
    /// outbox for an instance that does).
    #[arg(long)]
    pub no_relay: bool,
    /// How often the repeats this instance answered from its caches
    /// (replays, 409s, 422s the store never saw) are added to their keys'
    /// counts in the store, in one write; they are flushed once more at
    /// shutdown. `0` disables it: the keys' counts then miss those repeats.
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    pub repeat_flush_interval: Duration,
    /// Where the relay may deliver.
    #[command(flatten)]
    pub egress: super::egress::EgressArgs,
}

impl WorkersArgs {
    /// The sweeper's settings.
    pub fn sweeper(&self) -> SweeperConfig {
        SweeperConfig {
            interval: self.sweep_interval,
            batch: self.sweep_batch,
        }
    }

    /// The expirer's settings.
    pub fn expirer(&self) -> ExpirerConfig {
        ExpirerConfig {
            interval: self.expiry_interval,
            ..ExpirerConfig::default()
        }
    }

    /// The completer's settings.
    pub fn completer(&self) -> CompleterConfig {
        CompleterConfig {
            interval: self.completer_interval,
            idle: self.completer_idle,
            give_up_after: self.completer_give_up,
            ..CompleterConfig::default()
        }
    }

    /// The relay's settings.
    pub fn relay(&self) -> RelayConfig {
        RelayConfig {
            interval: self.relay_interval,
            request_timeout: self.relay_timeout,
            backoff_base: self.relay_backoff,
            backoff_max: self.relay_backoff_max,
            give_up_after: self.relay_give_up,
            // Time to record an attempt after its request ended.
            lease_margin: self.relay_timeout.min(Duration::from_secs(5)),
            ..RelayConfig::default()
        }
    }

    /// The flusher's settings; `None` when it is disabled.
    pub fn tally_flusher(&self) -> Option<TallyFlusherConfig> {
        (!self.repeat_flush_interval.is_zero()).then_some(TallyFlusherConfig {
            interval: self.repeat_flush_interval,
        })
    }

    /// The reconciler's settings.
    pub fn reconciler(&self) -> ReconcilerConfig {
        ReconcilerConfig {
            interval: self.reconcile_interval,
            pending_after: self.reconcile_pending_after,
            window: self.reconcile_window,
            full_every: self.reconcile_full_every,
            ..ReconcilerConfig::default()
        }
    }
}
