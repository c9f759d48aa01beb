//! Delivers the simulator's webhook events: at least once, signed, retried
//! with backoff until a 2xx, from the outbox in the ledger (so a restarted
//! simulator still delivers what it recorded). Asked to, it delivers some
//! events twice, holds some back so that later ones overtake them, and hangs
//! up on some attempts a few milliseconds in
//! ([`Faults::webhook_duplicate_rate`](crate::Faults::webhook_duplicate_rate),
//! [`Faults::webhook_reorder_rate`](crate::Faults::webhook_reorder_rate),
//! [`Faults::webhook_hangup_rate`](crate::Faults::webhook_hangup_rate)).

use std::sync::Arc;
use std::time::Duration;

use chargeonce_core::webhook::{SIGNATURE_HEADER, WebhookSecret, sign};
use rand::Rng;
use tokio::task::JoinHandle;

use crate::Simulator;
use crate::entry::now_millis;
use crate::faults::WEBHOOK_HANGUP_MAX;
use crate::ledger::{OutboxEvent, unix_millis};

/// Where and how to deliver events.
#[derive(Debug, Clone)]
pub struct WebhookTarget {
    /// The receiver, e.g. `http://127.0.0.1:8080/v1/webhooks/acquirer`.
    pub url: String,
    /// The shared signing secret.
    pub secret: WebhookSecret,
    /// Pause between looks at the outbox when nothing is due.
    pub poll: Duration,
    /// How long one delivery attempt may take.
    pub timeout: Duration,
}

impl WebhookTarget {
    /// A target with a 50 ms poll and a 5 s attempt timeout.
    pub fn new(url: impl Into<String>, secret: WebhookSecret) -> Self {
        Self {
            url: url.into(),
            secret,
            poll: Duration::from_millis(50),
            timeout: Duration::from_secs(5),
        }
    }
}

/// Backoff after `attempts` failed attempts: 200 ms doubling, at most 30 s.
fn backoff(attempts: i64) -> i64 {
    let exponent = u32::try_from(attempts.clamp(0, 8)).unwrap_or(8);
    (200_i64 << exponent).min(30_000)
}

async fn post(http: &reqwest::Client, target: &WebhookTarget, event: &OutboxEvent) -> bool {
    let timestamp = unix_millis(now_millis()) / 1000;
    let signature = sign(&target.secret, timestamp, event.payload.as_bytes());
    let sent = http
        .post(&target.url)
        .header(reqwest::header::CONTENT_TYPE, "application/json")
        .header(SIGNATURE_HEADER, signature)
        .body(event.payload.clone())
        .send()
        .await;
    match sent {
        Ok(response) if response.status().is_success() => true,
        Ok(response) => {
            tracing::warn!(event = %event.id, status = %response.status(), "webhook refused; will retry");
            false
        }
        Err(error) => {
            tracing::debug!(event = %event.id, %error, "webhook delivery failed; will retry");
            false
        }
    }
}

/// One attempt, or one the sender hangs up on after `hangup` (a failed
/// attempt: the event is due again later).
async fn attempt(
    http: &reqwest::Client,
    target: &WebhookTarget,
    event: &OutboxEvent,
    hangup: Option<Duration>,
) -> bool {
    let Some(after) = hangup else {
        return post(http, target, event).await;
    };
    // Dropping the request closes its connection: the receiver's handler is
    // cut wherever it is, even if the answer was about to come.
    let _ = tokio::time::timeout(after, post(http, target, event)).await;
    tracing::debug!(event = %event.id, ?after, "hung up on a webhook delivery on purpose");
    false
}

/// Delivers one event; `true` when a 2xx came back.
async fn deliver(
    sim: &Simulator,
    http: &reqwest::Client,
    target: &WebhookTarget,
    event: &OutboxEvent,
) -> bool {
    let hangup = sim.roll(|f, rng| {
        (f.webhook_hangup_rate > 0.0 && rng.random_bool(f.webhook_hangup_rate))
            .then(|| rng.random_range(Duration::ZERO..=WEBHOOK_HANGUP_MAX))
    });
    if attempt(http, target, event, hangup).await {
        let twice = sim.roll(|f, rng| {
            f.webhook_duplicate_rate > 0.0 && rng.random_bool(f.webhook_duplicate_rate)
        });
        if twice {
            // At least once means sometimes twice.
            post(http, target, event).await;
        }
        return true;
    }
    let due = unix_millis(now_millis()) + backoff(event.attempts);
    if let Err(error) = sim.ledger_handle().retry_later(&event.id, due).await {
        tracing::warn!(event = %event.id, %error, "cannot reschedule a webhook");
    }
    false
}

/// Starts delivering the outbox of `sim` to `target`; abort the handle to stop.
pub fn spawn(sim: Arc<Simulator>, target: WebhookTarget) -> JoinHandle<()> {
    tokio::spawn(async move {
        let http = match reqwest::Client::builder().timeout(target.timeout).build() {
            Ok(http) => http,
            Err(error) => {
                tracing::error!(%error, "cannot build the webhook client; no webhooks will be sent");
                return;
            }
        };
        loop {
            let due = sim
                .ledger_handle()
                .due_events(unix_millis(now_millis()), 64)
                .await;
            match due {
                Ok(events) if !events.is_empty() => {
                    let batch = events
                        .iter()
                        .map(|event| deliver(&sim, &http, &target, event));
                    let results = futures::future::join_all(batch).await;
                    let delivered: Vec<String> = events
                        .iter()
                        .zip(results)
                        .filter(|(_, ok)| *ok)
                        .map(|(event, _)| event.id.clone())
                        .collect();
                    let at = unix_millis(now_millis());
                    if let Err(error) = sim.ledger_handle().delivered(&delivered, at).await {
                        tracing::warn!(%error, "cannot mark webhooks delivered; they will be sent again");
                    }
                }
                Ok(_) => tokio::time::sleep(target.poll).await,
                Err(error) => {
                    tracing::warn!(%error, "cannot read the webhook outbox");
                    tokio::time::sleep(target.poll).await;
                }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_caps() {
        assert_eq!(backoff(0), 200);
        assert_eq!(backoff(1), 400);
        assert_eq!(backoff(7), 25_600);
        assert_eq!(backoff(8), 30_000);
        assert_eq!(backoff(100), 30_000);
    }
}
