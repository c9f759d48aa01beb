//! The outbox relay: delivers merchant events to the shops' webhook endpoints.
//!
//! Events are written by the stores in the same transaction as the state
//! change they report, with one delivery per enabled endpoint of the shop
//! whose filter wants the event; the relay only reads them back. Each pass
//! claims a batch of due deliveries (a short lease in the row keeps other
//! relays off them; PostgreSQL claims with `FOR UPDATE SKIP LOCKED`), POSTs
//! each one's stored bytes to its endpoint's URL, signed afresh with the
//! endpoint's secret
//! (`Chargeonce-Signature: t=<unix>,v1=<hex HMAC-SHA256 of "t.body">`, the
//! scheme of [`chargeonce_core::webhook`]; during a secret roll's overlap a
//! second `v1=` made with the old secret) and with its stable id in
//! `Chargeonce-Event-Id`, and records the attempt:
//!
//! * a 2xx answer marks it delivered;
//! * anything else (another status, a timeout, a refused connection) makes it
//!   due again after an exponential backoff with jitter, until
//!   [`RelayConfig::give_up_after`] has passed since it became due; then it
//!   is marked given up (a shop can resend it by hand).
//!
//! The relay connects only where [`crate::egress`] allows: every address a
//! URL's host resolves to is checked at each connection, and an event whose
//! URL leads to a refused address fails its attempt without a request
//! (`last_error` says "the destination is not a public address"). What the
//! shop sees of a failure is a short fixed phrase (see [`failure_text`]),
//! never the connection's own error (which may name internal addresses).
//!
//! Delivery is at least once: a relay that dies after the shop answered but
//! before recording it sends the event again once its lease is over. The
//! receiver deduplicates on the event id. Events of one payment go out in
//! the order they were written: the store does not hand out an event while
//! an earlier one of its payment is neither delivered nor given up.

use std::sync::Arc;
use std::time::Duration;

use chargeonce_core::events::{AttemptOutcome, DueEvent};
use chargeonce_core::webhook::{SIGNATURE_HEADER, sign_all};
use chargeonce_core::{Chain, NoObserver, Observer, Outbox, StoreError};
use reqwest::Url;

use crate::egress::{Egress, refused_in};
use futures::StreamExt;
use rand::Rng;
use time::OffsetDateTime;
use tokio::task::JoinHandle;

/// The header that carries the event id (the same on every attempt).
pub const EVENT_ID_HEADER: &str = "chargeonce-event-id";

/// The header that carries the event type.
pub const EVENT_TYPE_HEADER: &str = "chargeonce-event-type";

/// Relay settings.
#[derive(Debug, Clone, Copy)]
pub struct RelayConfig {
    /// Pause between passes when nothing is due.
    pub interval: Duration,
    /// Events claimed per pass.
    pub batch: u32,
    /// Deliveries in flight at once.
    pub concurrency: usize,
    /// The longest a shop may take to answer one delivery.
    pub request_timeout: Duration,
    /// The first retry delay; doubled for each failed attempt.
    pub backoff_base: Duration,
    /// The longest retry delay.
    pub backoff_max: Duration,
    /// Give up once this long has passed since the event became due.
    pub give_up_after: Duration,
    /// How much longer than `request_timeout` a claim keeps other relays
    /// off an event (time to record the attempt). A relay that dies
    /// mid-delivery delays the event by at most the lease.
    pub lease_margin: Duration,
}

impl Default for RelayConfig {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(1),
            batch: 100,
            concurrency: 16,
            request_timeout: Duration::from_secs(10),
            backoff_base: Duration::from_secs(5),
            backoff_max: Duration::from_secs(3600),
            give_up_after: Duration::from_secs(3 * 24 * 3600),
            lease_margin: Duration::from_secs(5),
        }
    }
}

impl RelayConfig {
    /// How long a claim keeps other relays off an event: the request timeout
    /// and a margin to record the attempt.
    pub fn lease(&self) -> Duration {
        self.request_timeout + self.lease_margin
    }

    /// The delay before the next attempt after `failed` failed attempts (at
    /// least 1): `base * 2^(failed-1)`, capped at `backoff_max`, then a random
    /// point in its upper half (jitter, so a shop coming back is not hit by
    /// every event at once).
    pub fn backoff(&self, failed: u32) -> Duration {
        let exponent = failed.saturating_sub(1).min(30);
        let full = self
            .backoff_base
            .saturating_mul(1_u32 << exponent)
            .min(self.backoff_max);
        let half = full / 2;
        let jitter_ms = u64::try_from(half.as_millis()).unwrap_or(u64::MAX);
        half + Duration::from_millis(rand::rng().random_range(0..=jitter_ms))
    }
}

/// Why the relay could not start.
#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    /// The HTTP client could not be built.
    #[error("building the relay's HTTP client: {0}")]
    Client(String),
}

/// What one pass did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RelayPass {
    /// Events claimed.
    pub claimed: usize,
    /// Events the shop acknowledged.
    pub delivered: usize,
    /// Attempts that failed (retried later, or given up).
    pub failed: usize,
}

/// Delivers due events; [`Relay::run_once`] is one pass.
#[derive(Clone)]
pub struct Relay {
    store: Arc<dyn Outbox>,
    http: reqwest::Client,
    egress: Egress,
    config: RelayConfig,
    observer: Arc<dyn Observer>,
}

impl Relay {
    /// A relay over a store, delivering only where `egress` allows.
    pub fn new(
        store: Arc<dyn Outbox>,
        config: RelayConfig,
        egress: Egress,
    ) -> Result<Self, RelayError> {
        // Names resolve through the guard (checked addresses only); no
        // redirect is followed (a 3xx is a failed attempt: it could point
        // anywhere); no proxy from the environment (it would resolve names
        // itself).
        let http = reqwest::Client::builder()
            .timeout(config.request_timeout)
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .dns_resolver(egress.resolver())
            .user_agent(concat!("chargeonce-relay/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| RelayError::Client(e.to_string()))?;
        Ok(Self {
            store,
            http,
            egress,
            config,
            observer: Arc::new(NoObserver),
        })
    }

    /// Reports delivery attempts and store failures to an observer (metrics).
    pub fn with_observer(mut self, observer: Arc<dyn Observer>) -> Self {
        self.observer = observer;
        self
    }

    /// Claims one batch of due events and attempts each once.
    pub async fn run_once(&self) -> Result<RelayPass, StoreError> {
        let due = self
            .store
            .claim_due_events(self.config.batch, self.config.lease())
            .await?;
        let mut pass = RelayPass {
            claimed: due.len(),
            ..RelayPass::default()
        };
        let mut attempts = futures::stream::iter(due)
            .map(|due| self.attempt(due))
            .buffer_unordered(self.config.concurrency.max(1));
        while let Some(result) = attempts.next().await {
            match result {
                Ok(true) => pass.delivered += 1,
                Ok(false) => pass.failed += 1,
                Err(error) => {
                    // The lease runs out and the event is claimed again.
                    pass.failed += 1;
                    self.observer.store_error("relay");
                    tracing::warn!(error = %Chain(&error), "recording a delivery attempt failed");
                }
            }
        }
        Ok(pass)
    }

    /// One delivery attempt, recorded. `true` when the shop acknowledged it.
    async fn attempt(&self, due: DueEvent) -> Result<bool, StoreError> {
        let event = &due.event;
        let failure = |status: Option<u16>, error: String| AttemptOutcome::Failed {
            status,
            error,
            retry_in: self.config.backoff(due.attempts + 1),
            give_up_after: self.config.give_up_after,
        };
        let outcome = match self.send(&due).await {
            Ok(status) if (200..300).contains(&status) => AttemptOutcome::Delivered { status },
            Ok(status) => failure(Some(status), status_text(status)),
            Err(error) => failure(None, error),
        };
        let delivered = matches!(outcome, AttemptOutcome::Delivered { .. });
        tracing::debug!(
            event_id = %event.id,
            shop_id = %event.shop_id,
            endpoint_id = %due.destination.endpoint_id,
            attempt = due.attempts + 1,
            delivered,
            "merchant event delivery attempt"
        );
        // Each attempt counts once: delivered, failed (due again later), or
        // gave_up (failed, and the store gave the event up). An attempt whose
        // record failed counts as what it was.
        let recorded = self
            .store
            .record_attempt(
                &event.shop_id,
                &event.id,
                &due.destination.endpoint_id,
                &outcome,
            )
            .await;
        let result = match (&recorded, delivered) {
            (_, true) => "delivered",
            (Ok(true), false) => "gave_up",
            _ => "failed",
        };
        self.observer.event_delivery(event.shop_id.mode(), result);
        if matches!(recorded, Ok(true)) {
            tracing::warn!(
                event_id = %event.id,
                shop_id = %event.shop_id,
                attempts = due.attempts + 1,
                "merchant event given up"
            );
        }
        recorded?;
        Ok(delivered)
    }
}

impl Relay {
    /// POSTs one event to its endpoint: the status the endpoint answered,
    /// or what the shop may read of why there was none.
    async fn send(&self, due: &DueEvent) -> Result<u16, String> {
        let event = &due.event;
        let Ok(url) = Url::parse(&due.destination.url) else {
            return Err("the webhook URL is not valid".to_owned());
        };
        if let Err(refused) = self.egress.check_scheme(&url) {
            tracing::warn!(
                event_id = %event.id,
                shop_id = %event.shop_id,
                "webhook URL refused: http is not allowed (--webhook-allow-http)"
            );
            return Err(refused.to_string());
        }
        if let Err(refused) = self.egress.check_literal(&url) {
            self.note_refused(due, refused.range);
            return Err(refused.to_string());
        }
        let now = OffsetDateTime::now_utc().unix_timestamp();
        // During a secret roll's overlap, a second signature with the old
        // secret: a receiver verifying with either accepts the event.
        let mut secrets = vec![&due.destination.secret];
        secrets.extend(due.destination.previous_secret.as_ref());
        let signature = sign_all(&secrets, now, &event.payload);
        let sent = self
            .http
            .post(url)
            .header("content-type", "application/json")
            .header(EVENT_ID_HEADER, event.id.as_str())
            .header(EVENT_TYPE_HEADER, event.event_type.as_str())
            .header(SIGNATURE_HEADER, signature)
            .body(event.payload.clone())
            .send()
            .await;
        match sent {
            Ok(response) => Ok(response.status().as_u16()),
            Err(error) => {
                if let Some(refused) = refused_in(&error) {
                    self.note_refused(due, refused.range);
                    return Err(refused.to_string());
                }
                // The operator's log has the whole chain (without the URL:
                // it is the shop's and may carry credentials); the shop
                // reads a fixed phrase.
                let error = error.without_url();
                tracing::debug!(event_id = %event.id, error = %Chain(&error), "delivery failed");
                Err(failure_text(&error).to_owned())
            }
        }
    }

    /// Tells the operator a shop's URL led to a refused address (the shop
    /// reads only that it is not public).
    fn note_refused(&self, due: &DueEvent, range: &str) {
        tracing::warn!(
            event_id = %due.event.id,
            shop_id = %due.event.shop_id,
            range,
            "webhook destination refused: not a public address"
        );
    }
}

/// What a shop reads of a delivery that got no answer: a fixed phrase by
/// kind, never the error's text (it can name addresses, resolvers, TLS
/// internals).
pub fn failure_text(error: &reqwest::Error) -> &'static str {
    if error.is_timeout() {
        "timed out waiting for the endpoint"
    } else if error.is_connect() {
        "could not connect to the endpoint"
    } else {
        "the request to the endpoint failed"
    }
}

/// What a shop reads of an answer that was not a 2xx.
fn status_text(status: u16) -> String {
    match reqwest::StatusCode::from_u16(status)
        .ok()
        .and_then(|code| code.canonical_reason())
    {
        Some(reason) => format!("HTTP {status} {reason}"),
        None => format!("HTTP {status}"),
    }
}

impl Relay {
    /// Starts the relay on the current runtime; abort the handle to stop it.
    /// An event it was delivering when stopped stays in the outbox and is
    /// sent again once its lease is over. Its settings are the ones it was
    /// built with ([`Relay::new`] builds its HTTP client from them).
    pub fn spawn(self) -> JoinHandle<()> {
        tokio::spawn(async move {
            loop {
                match self.run_once().await {
                    // A full batch: more may be due at once.
                    Ok(pass) if pass.claimed >= self.config.batch as usize => continue,
                    Ok(_) => {}
                    Err(error) => {
                        self.observer.store_error("relay");
                        tracing::warn!(error = %Chain(&error), "relay pass failed; will retry");
                    }
                }
                tokio::time::sleep(self.config.interval).await;
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_within_jitter_and_is_capped() {
        let config = RelayConfig {
            backoff_base: Duration::from_secs(2),
            backoff_max: Duration::from_secs(60),
            ..RelayConfig::default()
        };
        for (failed, full) in [(1, 2), (2, 4), (3, 8), (6, 60), (40, 60)] {
            let full = Duration::from_secs(full);
            for _ in 0..20 {
                let delay = config.backoff(failed);
                assert!(delay >= full / 2 && delay <= full, "{failed}: {delay:?}");
            }
        }
    }
}
