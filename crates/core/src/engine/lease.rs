//! Holding a key's lease around an acquirer call, and giving it up after.
//!
//! The lease is what keeps a second request (on any instance) from taking
//! over a live operation. During a call it is renewed by a heartbeat of its
//! own, so a slow acquirer does not let it run out and a slow store does not
//! stall the call; the call itself is bounded by the acquirer timeout. After
//! an answer that is not final the lease is released (the next retry resumes
//! at once) or, for an acquirer that ignores keys, the key is parked for the
//! settle window (nobody may look the attempt up before it could appear).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio_util::task::AbortOnDropHandle;
use tracing::Instrument as _;

use super::Engine;
use crate::api_key::Mode;
use crate::history::AcquirerAttempt;
use crate::observe::{AcquirerCall, AcquirerOutcomeKind};
use crate::{AcquirerError, Chain, Lease, ShopId, Store, StoreError};

/// The acquirer calls made under one lease, in order, for the store write
/// that ends it to record in the payment's history.
#[derive(Debug, Default)]
pub(super) struct Trail(Mutex<Vec<AcquirerAttempt>>);

impl Trail {
    fn push(&self, attempt: AcquirerAttempt) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(attempt);
    }

    /// The calls recorded so far.
    pub(super) fn take(&self) -> Vec<AcquirerAttempt> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

impl Engine {
    /// Runs one acquirer call, bounded by the acquirer timeout (a call that
    /// takes longer is an unknown outcome), while a separate task renews the
    /// lease, so a slow acquirer does not let another instance take over a live
    /// operation and a slow store does not stall the call. Reports the call's
    /// outcome and latency to the observer, and adds it to `trail` (`call`:
    /// which call, with which acquirer key).
    pub(super) async fn holding_lease<T>(
        &self,
        lease: &Lease,
        (call, acquirer_key): (AcquirerCall, &str),
        request: impl Future<Output = Result<T, AcquirerError>>,
        outcome_kind: impl FnOnce(&T) -> AcquirerOutcomeKind,
        trail: &Trail,
    ) -> Result<T, AcquirerError> {
        let hold = match call {
            AcquirerCall::Lookup => self.config.timing.lease,
            AcquirerCall::Charge
            | AcquirerCall::Refund
            | AcquirerCall::Capture
            | AcquirerCall::Void => self.send_hold(&lease.shop_id),
        };
        if hold > self.config.timing.lease {
            self.extend_before_send(lease, hold).await?;
        }
        // Aborted when dropped: a caller cut halfway (a completer aborted at
        // shutdown) stops renewing, and its lease runs out as it should.
        let heartbeat = AbortOnDropHandle::new(tokio::spawn(renew_lease(
            self.store.clone(),
            lease.clone(),
            hold,
        )));
        let (result, attempt) = self
            .timed_call(
                lease.shop_id.mode(),
                (call, acquirer_key),
                request,
                outcome_kind,
            )
            .await;
        drop(heartbeat);
        trail.push(attempt);
        result
    }

    /// One acquirer call bounded by the acquirer timeout (a call that takes
    /// longer is an unknown outcome), reported to the observer; with the
    /// attempt the payment's history records. [`Engine::holding_lease`]
    /// runs it under a key's lease; the expirer, which holds no key, alone.
    pub(super) async fn timed_call<T>(
        &self,
        mode: Mode,
        (call, acquirer_key): (AcquirerCall, &str),
        request: impl Future<Output = Result<T, AcquirerError>>,
        outcome_kind: impl FnOnce(&T) -> AcquirerOutcomeKind,
    ) -> (Result<T, AcquirerError>, AcquirerAttempt) {
        let timeout = self.config.acquirer_timeout;
        // The call's span (a trace's client span when traces are on): the
        // adapter sends its context on, so the acquirer can join the trace.
        let span = tracing::info_span!(
            "acquirer.call",
            call = call.as_str(),
            outcome = tracing::field::Empty,
            latency_us = tracing::field::Empty,
            "otel.name" = call.span_name(),
            "otel.kind" = "client",
            "otel.status_code" = tracing::field::Empty,
        );
        let started = Instant::now();
        let result = tokio::time::timeout(timeout, request.instrument(span.clone()))
            .await
            .unwrap_or_else(|_| {
                Err(AcquirerError::Unknown(format!(
                    "no answer within {timeout:?}"
                )))
            });
        let (kind, reason) = match &result {
            Ok(answer) => (outcome_kind(answer), None),
            Err(AcquirerError::Unknown(reason)) => (AcquirerOutcomeKind::Unknown, Some(reason)),
            Err(AcquirerError::NotSent(reason)) => (AcquirerOutcomeKind::NotSent, Some(reason)),
            Err(AcquirerError::Rejected(reason)) => (AcquirerOutcomeKind::Refused, Some(reason)),
        };
        let latency = started.elapsed();
        span.record("outcome", kind.as_str());
        span.record("latency_us", latency.as_micros() as u64);
        if kind == AcquirerOutcomeKind::Unknown {
            span.record("otel.status_code", "ERROR");
        }
        self.observer.acquirer_call(mode, call, kind, latency);
        let attempt = AcquirerAttempt {
            call,
            outcome: kind,
            latency,
            acquirer_key: acquirer_key.to_owned(),
            reason: reason.cloned(),
        };
        (result, attempt)
    }

    /// Before anything reaches an acquirer that ignores keys, the lease
    /// covers the settle window: if this process dies during the call,
    /// nobody looks the attempt up before it could appear. A lease that
    /// cannot be extended means nothing is sent.
    async fn extend_before_send(&self, lease: &Lease, hold: Duration) -> Result<(), AcquirerError> {
        match self.store.renew_lease(lease, hold).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(AcquirerError::NotSent(
                "the lease was taken over before sending".to_owned(),
            )),
            Err(error) => Err(AcquirerError::NotSent(format!(
                "the lease could not be extended before sending: {error}"
            ))),
        }
    }

    /// How long a lease must last around a send: an acquirer that ignores
    /// keys must not see the operation again within the settle window, even
    /// when this process dies during the call.
    fn send_hold(&self, shop: &ShopId) -> Duration {
        if self.acquirer(shop).is_idempotent() {
            self.config.timing.lease
        } else {
            self.config.settle_window.max(self.config.timing.lease)
        }
    }

    /// Ends our lease early so the next retry resumes at once, recording the
    /// acquirer calls made under it. A failure only delays that retry until
    /// the lease runs out (and loses the calls' history entries, which a
    /// state that did not change does not need), so it is logged, not raised.
    pub(super) async fn release(&self, lease: &Lease, attempts: &[AcquirerAttempt]) {
        let released = self.store.release_lease(lease, attempts).await;
        self.lease_ended(
            released,
            lease,
            attempts,
            "lease release failed; it will run out",
        )
        .await;
    }

    /// After a fenced write that ends a lease (`ended`: whether it held):
    /// a lost lease's calls are still recorded; a failure is logged as
    /// `failed`, since it only delays the next retry until the lease runs out.
    async fn lease_ended(
        &self,
        ended: Result<bool, StoreError>,
        lease: &Lease,
        attempts: &[AcquirerAttempt],
        failed: &str,
    ) {
        match ended {
            Ok(true) => {}
            Ok(false) => self.record_lost_lease_calls(lease, attempts).await,
            Err(error) => tracing::warn!(key = %lease.key, error = %Chain(&error), "{failed}"),
        }
    }

    /// A fenced write found the lease taken over and wrote nothing: the
    /// acquirer calls made under it still go into the history (one may have
    /// charged). A failure loses only those entries, so it is logged.
    pub(super) async fn record_lost_lease_calls(
        &self,
        lease: &Lease,
        attempts: &[AcquirerAttempt],
    ) {
        if let Err(error) = self.store.record_lost_lease_calls(lease, attempts).await {
            tracing::warn!(key = %lease.key, error = %Chain(&error), "the calls made under a lost lease could not be recorded");
        }
    }

    /// After an unknown outcome: an acquirer idempotent on our key answers a
    /// resent request with the first one's result, so the lease is released
    /// for the next retry to resume at once. One that ignores keys may still
    /// record the attempt late: the key is parked for the settle window, and
    /// only then looked up (and sent again if nothing appeared). Returns when
    /// to try again. A failure to park leaves the lease as it was extended
    /// before the send, which covers the window too.
    pub(super) async fn after_unknown(
        &self,
        lease: &Lease,
        attempts: &[AcquirerAttempt],
    ) -> Duration {
        if self.acquirer(&lease.shop_id).is_idempotent() {
            self.release(lease, attempts).await;
            return self.config.retry_after;
        }
        self.park(lease, attempts).await
    }

    /// Parks the key for `hold` (no calls to record): nobody may take it
    /// over before then.
    pub(super) async fn park_for(&self, lease: &Lease, hold: Duration) {
        let parked = self.store.park_lease(lease, hold, &[]).await;
        let failed = "parking the key failed; its lease runs out";
        self.lease_ended(parked, lease, &[], failed).await;
    }

    /// Parks the key for the settle window, recording the calls made under
    /// its lease: nobody may look at the acquirer again before an attempt
    /// still in flight could appear. Returns when to try again.
    pub(super) async fn park(&self, lease: &Lease, attempts: &[AcquirerAttempt]) -> Duration {
        let window = self.config.settle_window;
        let parked = self.store.park_lease(lease, window, attempts).await;
        let failed = "parking the key failed; its lease covers the settle window";
        self.lease_ended(parked, lease, attempts, failed).await;
        window
    }
}

/// Renews a lease every third of its length until aborted.
async fn renew_lease(store: Arc<dyn Store>, lease: Lease, duration: Duration) {
    let mut tick = tokio::time::interval(duration / 3);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        match store.renew_lease(&lease, duration).await {
            Ok(true) => {}
            Ok(false) => {
                tracing::warn!(key = %lease.key, "lease taken over during the acquirer call; our finish will be fenced off");
                return;
            }
            Err(error) => {
                tracing::warn!(key = %lease.key, error = %Chain(&error), "lease renewal failed")
            }
        }
    }
}
