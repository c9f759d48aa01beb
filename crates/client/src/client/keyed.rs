//! The keyed POSTs: pay, refund, pay an order, and the retry loop they share.

use std::time::Instant;

use chargeonce_core::{IdempotencyKey, PaymentStatus};
use reqwest::Url;
use reqwest::header::CONTENT_TYPE;

use super::answer::{failure, send};
use super::judge::{
    Judge, Step, judge_cancel, judge_capture, judge_payment, judge_refund, judge_void,
};
use super::{Client, IDEMPOTENCY_KEY, PREFER};
use crate::outcome::{
    Attempt, AttemptAnswer, CancelOutcome, CancelResult, CaptureOutcome, CaptureResult,
    FailureKind, Outcome, PayResult, RefundOutcome, RefundResult, VoidOutcome, VoidResult,
};
use crate::{CreateCapture, CreatePayment, CreateRefund, Error};

impl Client {
    /// `POST /v1/payments` under `key`, retried until a definite answer or the
    /// end of the budget.
    ///
    /// Every attempt sends the same key and the same body bytes: the request
    /// is serialised once. Retried: connection errors, timeouts, lost answers,
    /// `409` (in progress), `429`, `5xx`, and `202` (pending: the acquirer's
    /// answer is not known yet), each after the backoff or the server's
    /// `Retry-After`, whichever is longer. Not retried: `402` (declined: a
    /// definite [`Outcome::Declined`]), and `4xx` refusals, which are errors.
    ///
    /// When the budget runs out before a definite answer, the result is
    /// [`Outcome::Uncertain`], not an error: the payment may have been charged.
    ///
    /// ```
    /// use chargeonce_client::{Client, CreatePayment, IdempotencyKey, Money, Outcome};
    /// # use std::sync::Arc;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # // An embedded service (SQLite, in-memory acquirer simulator) for this example.
    /// # let db = chargeonce_testkit::TestDb::sqlite();
    /// # let store = Arc::new(chargeonce_store::SqliteStore::connect(db.url(), &Default::default()).await?);
    /// # let shop = chargeonce_core::ShopId::new("demo")?;
    /// # let hash = chargeonce_core::ShopSecret::new("sk_demo_0123456789abcdef")?.hash();
    /// # chargeonce_core::Shops::add_shop(store.as_ref(), &shop, &hash).await?;
    /// # let sim = Arc::new(chargeonce_acquirer::Simulator::in_memory(Default::default()).await?);
    /// # let render = Arc::new(chargeonce_server::HttpRender);
    /// # // Live mode's acquirer only (test mode's money is refused): the example pays live.
    /// # let acquirer: Arc<dyn chargeonce_core::Acquirer> = sim.clone();
    /// # let engine = Arc::new(chargeonce_core::Engine::new(store, acquirer, render, Default::default())?);
    /// # let state = chargeonce_server::AppState::new(engine);
    /// # let app = chargeonce_server::router(state.clone());
    /// # let sim_routes = axum::Router::new().nest_service("/sim", chargeonce_acquirer::router(sim));
    /// # let operator = chargeonce_server::operator_router(state, sim_routes);
    /// # let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    /// # let base_url = format!("http://{}", listener.local_addr()?);
    /// # let operator_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    /// # let operator_url = format!("http://{}", operator_listener.local_addr()?);
    /// # tokio::spawn(chargeonce_server::serve(listener, app, std::future::pending()));
    /// # tokio::spawn(chargeonce_server::serve(operator_listener, operator, std::future::pending()));
    /// let client = Client::new(&base_url, "demo", "sk_demo_0123456789abcdef")?;
    /// let key = IdempotencyKey::for_operation("order-123", "pay")?;
    /// let request = CreatePayment::new(Money::parse("1500.00", "RUB")?, "order-123", "tok_ok");
    ///
    /// let first = client.pay(&key, &request).await?;
    /// // A double click, or a retry after a restart: the same intent, the same key.
    /// let again = client.pay(&key, &request).await?;
    ///
    /// assert!(matches!(first.outcome, Outcome::Paid(_)));
    /// assert!(again.replayed(), "answered from the first request; nothing charged twice");
    /// assert_eq!(first.outcome, again.outcome);
    /// assert_eq!(client.acquirer_ledger(&operator_url).await?.charges.len(), 1);
    /// # Ok(())
    /// # }
    /// ```
    pub async fn pay(
        &self,
        key: &IdempotencyKey,
        request: &CreatePayment,
    ) -> Result<PayResult, Error> {
        let body = serde_json::to_vec(&request.to_json())
            .map_err(|e| Error::Config(format!("serialising the payment: {e}")))?;
        let (outcome, attempts) = self
            .post_idempotent(
                self.url("v1/payments"),
                key,
                body,
                true,
                judge_payment,
                |payment_id| Outcome::Uncertain { payment_id },
            )
            .await?;
        if let Some(payment) = outcome.payment().filter(|p| !request.is_answered_by(p)) {
            // An answer about another payment of the order (a server older
            // than `order_already_paid`, or something in between): never
            // "paid" for this request.
            return Err(Error::OrderAlreadyPaid {
                payment: Box::new(payment.clone()),
                problem: None,
                attempts: u32::try_from(attempts.len()).unwrap_or(u32::MAX),
            });
        }
        Ok(PayResult {
            outcome,
            key: key.clone(),
            attempts,
            found_before_paying: false,
        })
    }

    /// `POST /v1/payments/{payment_id}/refunds` under `key` (the refund's own
    /// key, never the payment's), retried like [`Client::pay`] until a
    /// definite answer or the end of the budget.
    ///
    /// Definite: [`RefundOutcome::Refunded`] (`201`, or its replay) and
    /// [`RefundOutcome::Failed`] (`422 refund_failed`: the acquirer refused,
    /// nothing was given back). `202` (pending), `409` (the payment or the
    /// key's first request is still running), `429`, `5xx` and lost answers
    /// are retried with the same key and body; when the budget runs out the
    /// outcome is [`RefundOutcome::Uncertain`]. Refusals (`422
    /// refund_exceeds_amount`, `payment_not_refundable` of a declined payment,
    /// `404`) are errors, unless an earlier attempt may have executed.
    ///
    /// The key should name the intent:
    /// `IdempotencyKey::for_operation("order-123", "refund-1")`.
    pub async fn refund(
        &self,
        payment_id: &str,
        key: &IdempotencyKey,
        request: &CreateRefund,
    ) -> Result<RefundResult, Error> {
        let body = serde_json::to_vec(&request.to_json())
            .map_err(|e| Error::Config(format!("serialising the refund: {e}")))?;
        let url = self.payment_url(payment_id, "refunds");
        let (outcome, attempts) = self
            .post_idempotent(url, key, body, false, judge_refund, |refund_id| {
                RefundOutcome::Uncertain { refund_id }
            })
            .await?;
        Ok(RefundResult {
            outcome,
            key: key.clone(),
            attempts,
        })
    }

    /// `POST /v1/payments/{payment_id}/cancel` under `key` (the cancel's own
    /// key), retried with the same key while the answer is `202` (the
    /// service looks the charge up only once the settle window has passed
    /// since it was last sent), until the cancel ends or the budget does.
    ///
    /// Definite: [`CancelOutcome::Canceled`] (nothing taken),
    /// [`CancelOutcome::Refunded`] (the charge was found and refunded in
    /// full), [`CancelOutcome::Charged`], [`CancelOutcome::Declined`]. A
    /// payment already final when the cancel came is a refusal
    /// ([`Error::Rejected`] with `payment_not_cancelable`): refund it instead.
    ///
    /// The key should name the intent:
    /// `IdempotencyKey::for_operation("order-123", "cancel")`.
    pub async fn cancel(
        &self,
        payment_id: &str,
        key: &IdempotencyKey,
    ) -> Result<CancelResult, Error> {
        let url = self.payment_url(payment_id, "cancel");
        let (outcome, attempts) = self
            .post_idempotent(
                url,
                key,
                b"{}".to_vec(),
                false,
                judge_cancel,
                |payment_id| CancelOutcome::Uncertain { payment_id },
            )
            .await?;
        Ok(CancelResult {
            outcome,
            key: key.clone(),
            attempts,
        })
    }

    /// `POST /v1/payments/{payment_id}/captures` under `key` (the capture's
    /// own key), retried like [`Client::refund`] until a definite answer or
    /// the end of the budget.
    ///
    /// Definite: [`CaptureOutcome::Captured`] (`201`, or its replay) and
    /// [`CaptureOutcome::Failed`] (`422 capture_failed`: the acquirer
    /// refused, nothing was taken). `202` (pending), `409`
    /// (`request_in_progress`, `authorization_busy`, an authorization still
    /// pending), `429`, `5xx` and lost answers are retried with the same key
    /// and body; when the budget runs out the outcome is
    /// [`CaptureOutcome::Uncertain`]. Refusals (`422
    /// capture_exceeds_capturable`, `409 payment_not_capturable`, `404`) are
    /// errors.
    ///
    /// The key should name the intent:
    /// `IdempotencyKey::for_operation("order-123", "capture-1")`.
    pub async fn capture(
        &self,
        payment_id: &str,
        key: &IdempotencyKey,
        request: &CreateCapture,
    ) -> Result<CaptureResult, Error> {
        let body = serde_json::to_vec(&request.to_json())
            .map_err(|e| Error::Config(format!("serialising the capture: {e}")))?;
        let url = self.payment_url(payment_id, "captures");
        let (outcome, attempts) = self
            .post_idempotent(url, key, body, false, judge_capture, |capture_id| {
                CaptureOutcome::Uncertain { capture_id }
            })
            .await?;
        Ok(CaptureResult {
            outcome,
            key: key.clone(),
            attempts,
        })
    }

    /// `POST /v1/payments/{payment_id}/void` under `key` (the void's own
    /// key), retried while the answer is not definite.
    ///
    /// Definite: [`VoidOutcome::Voided`] (`200`: the payment `voided`, or
    /// `succeeded` with the rest released) and [`VoidOutcome::Failed`]
    /// (`422 void_failed`). `409 payment_not_voidable` is a refusal
    /// ([`Error::Rejected`]); `409 authorization_busy` (captures in flight)
    /// is retried.
    ///
    /// The key should name the intent:
    /// `IdempotencyKey::for_operation("order-123", "void")`.
    pub async fn void(&self, payment_id: &str, key: &IdempotencyKey) -> Result<VoidResult, Error> {
        let url = self.payment_url(payment_id, "void");
        let (outcome, attempts) = self
            .post_idempotent(url, key, b"{}".to_vec(), false, judge_void, |payment_id| {
                VoidOutcome::Uncertain { payment_id }
            })
            .await?;
        Ok(VoidResult {
            outcome,
            key: key.clone(),
            attempts,
        })
    }

    /// `/v1/payments/{payment_id}/{what}`, the id escaped as one segment.
    fn payment_url(&self, payment_id: &str, what: &str) -> Url {
        let mut url = self.url("v1/payments/");
        if let Ok(mut segments) = url.path_segments_mut() {
            segments.pop_if_empty().push(payment_id).push(what);
        }
        url
    }

    /// The retry loop of every keyed POST: the same key and body bytes on
    /// every attempt, until `judge` calls an answer definite, a refusal, or
    /// the budget ends (`uncertain` of the id an answer named, if any).
    pub(super) async fn post_idempotent<O>(
        &self,
        url: Url,
        key: &IdempotencyKey,
        body: Vec<u8>,
        prefer: bool,
        judge: Judge<O>,
        uncertain: fn(Option<String>) -> O,
    ) -> Result<(O, Vec<Attempt>), Error> {
        let started = Instant::now();
        let deadline = started + self.policy.budget;
        let mut attempts: Vec<Attempt> = Vec::new();
        let mut named_id: Option<String> = None;
        // Whether an earlier attempt may have executed (it was sent and got no
        // definite answer). From then on, a refusal is no proof that nothing
        // happened: the result is Uncertain, never an error inviting a new key.
        let mut maybe_executed = false;
        loop {
            let number = u32::try_from(attempts.len()).unwrap_or(u32::MAX) + 1;
            let timeout = self
                .policy
                .attempt_timeout
                .min(deadline.saturating_duration_since(Instant::now()));
            let mut builder = self
                .http
                .post(url.clone())
                .basic_auth(&self.shop, Some(&self.secret))
                .header(IDEMPOTENCY_KEY, key.as_str())
                .header(CONTENT_TYPE, "application/json")
                .timeout(timeout)
                .body(body.clone());
            if prefer && let Some(seconds) = self.policy.prefer_seconds(timeout) {
                builder = builder.header(PREFER, format!("wait={seconds}"));
            }
            let sent_at = Instant::now();
            let (seen, step, raw) = match send(builder).await {
                Ok(answer) => {
                    let (seen, step) = judge(&answer, number, &mut named_id);
                    (seen, step, Some(answer.body))
                }
                Err(error) => (failure(&error), Step::Retry(None), None),
            };
            let mut attempt = Attempt {
                number,
                sent_at,
                took: sent_at.elapsed(),
                answer: seen,
                body: raw,
                retry_in: None,
            };
            let retry_after = match step {
                Step::Done(outcome) => {
                    attempts.push(attempt);
                    return Ok((outcome, attempts));
                }
                Step::Fail(error) if maybe_executed => {
                    tracing::warn!(
                        key = %key,
                        %error,
                        "refused after an attempt that may have executed; the outcome is uncertain"
                    );
                    attempts.push(attempt);
                    return Ok((uncertain(named_id), attempts));
                }
                Step::Fail(error) => return Err(error),
                Step::Retry(retry_after) => {
                    let never_sent = matches!(
                        attempt.answer,
                        AttemptAnswer::Failed {
                            kind: FailureKind::Connect,
                            ..
                        }
                    );
                    maybe_executed |= !never_sent;
                    retry_after
                }
            };
            let delay = self.policy.delay(number, retry_after);
            if number >= self.policy.max_attempts || Instant::now() + delay >= deadline {
                attempts.push(attempt);
                return Ok((uncertain(named_id), attempts));
            }
            attempt.retry_in = Some(delay);
            attempts.push(attempt);
            tokio::time::sleep(delay).await;
        }
    }

    /// The seed's "check the state before paying", then [`Client::pay`].
    ///
    /// Looks up the order (`GET /v1/payments?reference=`) first: when it
    /// already has a succeeded payment, that payment is the answer and nothing
    /// is sent ([`PayResult::found_before_paying`]). This protects the order
    /// even after the key expired on the server. Otherwise pays under `key`
    /// (a pending payment for the order is resolved by the server, which never
    /// charges an order twice).
    ///
    /// The key should name the intent, so that every retry, in this process or
    /// after a restart, computes the same one:
    /// `IdempotencyKey::for_operation(&reference, "pay")`.
    ///
    /// When the look-up itself fails, nothing is sent and the error is
    /// returned; trying again later with the same key is safe.
    pub async fn pay_order(
        &self,
        key: &IdempotencyKey,
        request: &CreatePayment,
    ) -> Result<PayResult, Error> {
        let existing = self.payments_for(&request.reference).await?;
        if let Some(paid) = existing
            .into_iter()
            .find(|p| p.status == PaymentStatus::Succeeded)
        {
            if !request.is_answered_by(&paid) {
                return Err(Error::OrderAlreadyPaid {
                    payment: Box::new(paid),
                    problem: None,
                    attempts: 0,
                });
            }
            return Ok(PayResult {
                outcome: Outcome::Paid(paid),
                key: key.clone(),
                attempts: Vec::new(),
                found_before_paying: true,
            });
        }
        self.pay(key, request).await
    }
}
