//! The idempotency engine: claim, call the acquirer, finish — each an atomic phase.
//!
//! One job a module, the reasoning next to its code:
//!
//! - this module: the [`Engine`] itself, its wiring and what every part shares;
//! - [`config`]: the settings and the checks that they can work together;
//! - [`outcome`]: what a request gets ([`Outcome`]) and the final answers a
//!   [`Render`] turns into stored bytes;
//! - `cancel`: ending a pending payment without charging the customer (a
//!   cancel request, and the completer's give-up);
//! - `pay` and `refund`: the two operations, from the claim (phase 1) to
//!   the call the acquirer needs;
//! - `expiry`: releasing authorizations nobody captured in time (no key:
//!   the hold's state is the record);
//! - `capture` and `void`: the moves of an authorization, each under its
//!   own key, the same way (a capture reserves its amount on the hold at
//!   its claim; a void moves the hold to releasing);
//! - `existing`: what a request gets when its key exists already (replay,
//!   in progress, mismatch, parked, take-over), and the completer's take-over;
//! - `send`: phase 2, written once for charges and refunds: look the attempt
//!   up before sending it again where the acquirer ignores keys, confirm a
//!   refusal of a resent attempt, and turn the answer into an outcome;
//! - `resend`: the resend rule's judgement (a refusal of a resend proves
//!   nothing while an earlier attempt's outcome is unknown);
//! - `lease`: holding the key's lease around an acquirer call (heartbeat,
//!   timeout), releasing it or parking the key afterwards;
//! - `finish`: phase 3, the fenced finish, and the answer rendered from a
//!   payment or refund settled by someone else meanwhile;
//! - [`repeats`]: when a key repeated unusually often is worth a warning;
//! - [`tally`]: the repeats this instance answered itself, counted until a
//!   worker adds them to the store's counts.

use std::sync::Arc;

use crate::observe::{NoObserver, Observer};
use crate::{Acquirer, Acquirers, ShopId, Store};

mod cancel;
mod capture;
pub mod config;
mod existing;
mod expiry;
mod finish;
mod lease;
pub mod outcome;
mod pay;
mod refund;
pub mod repeats;
mod resend;
mod send;
pub mod tally;
mod void;

pub use cancel::cancel_refund_key;
pub use config::{ConfigError, DEFAULT_SETTLE_WINDOW, EngineConfig};
pub use expiry::Expiry;
pub use outcome::{EngineError, Outcome, Render, Rendered};
pub use repeats::{RepeatPolicy, RepeatSource};
pub use tally::RepeatTallies;

/// The idempotency engine. Cheap to share behind an `Arc`.
///
/// Run [`Engine::pay`] where a dropped future cannot cut it halfway (a spawned
/// task): every step is recoverable anyway, but a finished operation is better
/// than one left for a take-over.
pub struct Engine {
    store: Arc<dyn Store>,
    acquirers: Acquirers,
    render: Arc<dyn Render>,
    config: EngineConfig,
    observer: Arc<dyn Observer>,
    repeat_tallies: RepeatTallies,
}

/// How this caller came to hold a key's lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Holder {
    /// It claimed the key just now: nobody sent the operation before.
    Claimant,
    /// It took over an expired lease (a retry or the completer): the
    /// operation may have reached the acquirer already.
    Resumer,
}

impl Engine {
    /// Wires an engine, refusing settings that cannot work together.
    /// `acquirers`: the live acquirer and test mode's simulator (an
    /// `Arc<dyn Acquirer>` alone is live only: test mode's charges are
    /// refused, see [`Acquirers::live_only`]).
    pub fn new(
        store: Arc<dyn Store>,
        acquirers: impl Into<Acquirers>,
        render: Arc<dyn Render>,
        config: EngineConfig,
    ) -> Result<Self, ConfigError> {
        config.validate()?;
        Ok(Self {
            store,
            acquirers: acquirers.into(),
            render,
            config,
            observer: Arc::new(NoObserver),
            repeat_tallies: RepeatTallies::default(),
        })
    }

    /// Reports claims, replays, conflicts, take-overs, acquirer calls and
    /// store errors to `observer` (metrics).
    pub fn with_observer(mut self, observer: Arc<dyn Observer>) -> Self {
        self.observer = observer;
        self
    }

    /// The observer (the workers report through it too).
    pub fn observer(&self) -> &Arc<dyn Observer> {
        &self.observer
    }

    /// The acquirers of the two modes.
    pub fn acquirers(&self) -> &Acquirers {
        &self.acquirers
    }

    /// The acquirer of the mode `shop` names: a test mode's payments go to
    /// the test acquirer, never to the live one.
    fn acquirer(&self, shop: &ShopId) -> &dyn Acquirer {
        self.acquirers.of_shop(shop).as_ref()
    }

    /// The store, for reads.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// The repeats this instance answered itself, not yet added to the
    /// store's counts (see [`Engine::take_repeat_tallies`]).
    pub fn repeat_tallies(&self) -> &RepeatTallies {
        &self.repeat_tallies
    }

    /// The settings.
    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    /// The repeat warning of these settings.
    fn repeat_policy(&self) -> RepeatPolicy {
        RepeatPolicy::new(self.config.repeat_warning)
    }

    /// Reports a failed operation to the observer.
    fn observe_error<T>(&self, result: &Result<T, EngineError>, operation: &'static str) {
        if result.is_err() {
            self.observer.store_error(operation);
        }
    }

    /// Another request holds the key: come back later.
    fn in_progress(&self) -> Outcome {
        Outcome::InProgress {
            retry_after: self.config.retry_after,
        }
    }
}
