//! # chargeonce-client
//!
//! The Rust client of the chargeonce payment API. Half of idempotency lives in
//! the client, and this crate gets that half right:
//!
//! - **The key comes from the intent, not the attempt.** Use
//!   [`IdempotencyKey::for_operation`]`("order-123", "pay")` (`order-123-pay`),
//!   and `("order-123", "refund-1")` for a refund. Every retry, from this
//!   process or from the next one after a crash, computes the same key, so the
//!   server recognises the repeat. A random key exists only as
//!   [`IdempotencyKey::random_for_this_process_only`], whose name says what it
//!   protects.
//! - **Retries only with the same key and the same body.** The body is
//!   serialised once per call. Connection errors, timeouts, lost answers, `409`
//!   (in progress), `429`, `5xx` and `202` (pending) are retried with
//!   exponential backoff and full jitter, never sooner than the server's
//!   `Retry-After`, within a total time budget ([`RetryPolicy`]). Payments ask
//!   the server to wait for a running first request (`Prefer: wait=N`) rather
//!   than answer `409`.
//! - **An honest outcome.** A payment call ends [`Outcome::Paid`],
//!   [`Outcome::Declined`], or — when the budget ran out and nobody knows
//!   whether money moved — [`Outcome::Uncertain`], never an error that would
//!   tempt the caller to "try again" with a new key. Refusals are errors, and
//!   the one that means a client bug has its own: [`Error::KeyReused`].
//! - **Check before paying.** [`Client::pay_order`] looks the order up first
//!   (`GET /v1/payments?reference=`), which still protects the order after
//!   the key expired on the server.
//!
//! ```no_run
//! use chargeonce_client::{Client, CreatePayment, Outcome};
//! use chargeonce_core::{IdempotencyKey, Money};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let client = Client::new("http://127.0.0.1:8080", "demo", "sk_...")?;
//!
//! let order = "order-123";
//! // The key names the intent: every retry of "pay order-123" uses it.
//! let key = IdempotencyKey::for_operation(order, "pay")?;
//! let request = CreatePayment::new(Money::parse("1500.00", "RUB")?, order, "tok_ok");
//!
//! let result = client.pay_order(&key, &request).await?;
//! match &result.outcome {
//!     Outcome::Paid(payment) => println!("paid: {}", payment.id),
//!     Outcome::Declined(payment) => println!("declined: {:?}", payment.decline_code),
//!     // Canceled before any charge landed: the order is free to pay again.
//!     Outcome::Canceled(payment) => println!("canceled: {}", payment.id),
//!     Outcome::Uncertain { payment_id } => {
//!         // Maybe charged. Never pay again under a new key: retry later
//!         // with the same key, or look the order up.
//!         println!("uncertain: {payment_id:?}");
//!     }
//! }
//! println!("{} attempt(s)", result.attempt_count());
//! # Ok(())
//! # }
//! ```
//!
//! ## API keys
//!
//! With a `full` key, a shop makes, rolls and revokes its own keys
//! ([`Client::create_api_key`], [`Client::roll_api_key`],
//! [`Client::revoke_api_key`]; [`Client::list_api_keys`] and
//! [`Client::api_key`] read them). A make or a roll is once per
//! idempotency key, retried with the same key like a payment. The new
//! key's [`secret`](ApiKey::secret) is in that answer only: a repeat under
//! the same key answers the same key with `secret: None` and
//! [`replayed`](ApiKey::replayed) set.
//!
//! ```no_run
//! use std::time::Duration;
//!
//! use chargeonce_client::{ApiKeyScope, Client, IdempotencyKey};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let client = Client::new("http://127.0.0.1:8080", "demo", "sk_...")?;
//!
//! let make = IdempotencyKey::for_operation("support-tool", "make-key-1")?;
//! let made = client
//!     .create_api_key(ApiKeyScope::ReadOnly, Some("support tool"), None, &make)
//!     .await?;
//! // Shown once: store it now. A repeat with `make` answers `None`.
//! let secret = made.secret.clone();
//!
//! // The successor (its own secret, once); the old key stops at once.
//! let roll = IdempotencyKey::for_operation(&made.id, "roll-1")?;
//! let successor = client.roll_api_key(&made.id, Some(Duration::ZERO), &roll).await?;
//!
//! let revoke = IdempotencyKey::for_operation(&successor.id, "revoke")?;
//! client.revoke_api_key(&successor.id, &revoke).await?;
//! # drop(secret);
//! # Ok(())
//! # }
//! ```
//!
//! ## Webhook endpoints
//!
//! With a `full` key, a shop manages where its events go:
//! [`Client::create_webhook_endpoint`] (a URL and the event types it wants,
//! `["*"]` for all), [`Client::list_webhook_endpoints`],
//! [`Client::webhook_endpoint`], [`Client::update_webhook_endpoint`]
//! (event types, pause/resume, description), [`Client::delete_webhook_endpoint`]
//! and [`Client::roll_webhook_endpoint_secret`]. A make or a secret roll is
//! once per idempotency key, retried with the same key like a payment; the
//! signing [`secret`](WebhookEndpoint::secret) is in that answer only (a
//! repeat answers `secret: None` with [`replayed`](WebhookEndpoint::replayed)
//! set). During a roll's overlap each delivery carries one `v1=` signature
//! per secret, so the receiver may switch secrets in any order.
//!
//! ```no_run
//! use std::time::Duration;
//!
//! use chargeonce_client::{Client, IdempotencyKey, WebhookEndpointUpdate};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let client = Client::new("http://127.0.0.1:8080", "demo", "sk_...")?;
//!
//! let make = IdempotencyKey::for_operation("orders-service", "endpoint-1")?;
//! let endpoint = client
//!     .create_webhook_endpoint(
//!         "https://shop.example/hooks/orders",
//!         &["payment.succeeded", "refund.succeeded"],
//!         Some("orders service"),
//!         &make,
//!     )
//!     .await?;
//! // Shown once: give it to the receiver now.
//! let secret = endpoint.secret.clone();
//!
//! // Pause it; then roll its secret, the old one signing for one more hour.
//! let pause = WebhookEndpointUpdate {
//!     enabled: Some(false),
//!     ..WebhookEndpointUpdate::default()
//! };
//! let key = IdempotencyKey::for_operation(&endpoint.id, "pause-1")?;
//! client.update_webhook_endpoint(&endpoint.id, &pause, &key).await?;
//! let roll = IdempotencyKey::for_operation(&endpoint.id, "roll-1")?;
//! let rolled = client
//!     .roll_webhook_endpoint_secret(&endpoint.id, Some(Duration::from_secs(3600)), &roll)
//!     .await?;
//! client.delete_webhook_endpoint(&rolled.id).await?;
//! # drop(secret);
//! # Ok(())
//! # }
//! ```
//!
//! [`Client::pay`] has an example that runs (as a doc test) against an
//! embedded service: a repeat with the same key is answered from the first
//! request, and the acquirer's ledger holds one charge.

mod client;
mod error;
mod lists;
mod model;
mod outcome;
mod problem;
mod retry;

pub use chargeonce_core::authorization::AuthorizationStatus;
pub use chargeonce_core::{
    CaptureMethod, CaptureStatus, IdempotencyKey, KeyError, Money, PaymentStatus,
};
/// A payment's history as [`Client::payment_history`] reads it: the wire
/// types themselves (entries are a tagged union on `type`).
pub use chargeonce_wire::history::{
    HistoryAcquirerCall, HistoryCallOutcome, HistoryEntry, HistoryEvent, HistoryKey,
    HistorySettledBy, HistoryTally, PaymentHistory,
};
pub use client::{
    Client, ClientBuilder, IDEMPOTENCY_KEY, IDEMPOTENT_REPLAYED, PREFER, PREFERENCE_APPLIED,
};
pub use error::Error;
pub use lists::{
    IdempotencyKeyInfo, KeyLease, KeyRecoveryPoint, KeyRequest, KeyState, ListParams, Page,
    PaymentListParams,
};
pub use model::{
    ApiKey, ApiKeyScope, ApiKeyState, Capture, CreateCapture, CreatePayment, CreateRefund, Ledger,
    LedgerCharge, LedgerTotal, Payment, PaymentList, Refund, WebhookEndpoint,
    WebhookEndpointUpdate,
};
pub use outcome::{
    Attempt, AttemptAnswer, CancelOutcome, CancelResult, CaptureOutcome, CaptureResult,
    FailureKind, Outcome, PayResult, RefundOutcome, RefundResult, VoidOutcome, VoidResult,
};
pub use problem::{Code, Problem, ProblemCode};
pub use retry::{RetryPolicy, parse_retry_after};
