//! The client: typed calls, each with its retry loop.

use std::fmt;
use std::time::{Duration, Instant, SystemTime};

use chargeonce_core::{IdempotencyKey, PaymentStatus};
use reqwest::header::{CONTENT_TYPE, HeaderMap, RETRY_AFTER};
use reqwest::{Method, Url};
use serde::Deserialize;
use serde::de::DeserializeOwned;

use crate::outcome::{
    Attempt, AttemptAnswer, FailureKind, Outcome, PayResult, RefundOutcome, RefundResult,
};
use crate::retry::{RetryPolicy, parse_retry_after};
use crate::{
    CreatePayment, CreateRefund, Error, Ledger, Payment, PaymentList, Problem, ProblemCode, Refund,
};

/// The request header that carries the key.
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";
/// The answer header that marks a replay of the key's first answer.
pub const IDEMPOTENT_REPLAYED: &str = "idempotent-replayed";
/// The RFC 7240 request header the client asks the server to wait with.
pub const PREFER: &str = "prefer";
/// The RFC 7240 answer header that says the server honoured the preference.
pub const PREFERENCE_APPLIED: &str = "preference-applied";

/// How many bytes of an unexpected body an error keeps.
const BODY_EXCERPT: usize = 300;

/// A client of one chargeonce service, as one shop. Cheap to clone (the
/// connection pool is shared). `Debug` does not show the secret key.
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    base: Url,
    shop: String,
    secret: String,
    policy: RetryPolicy,
}

/// Builds a [`Client`].
#[derive(Clone)]
pub struct ClientBuilder {
    base: String,
    shop: String,
    secret: String,
    policy: RetryPolicy,
    connect_timeout: Duration,
    reuse_connections: bool,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("base", &self.base.as_str())
            .field("shop", &self.shop)
            .field("secret", &"***")
            .field("policy", &self.policy)
            .finish()
    }
}

impl fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("base", &self.base)
            .field("shop", &self.shop)
            .field("secret", &"***")
            .field("policy", &self.policy)
            .field("connect_timeout", &self.connect_timeout)
            .field("reuse_connections", &self.reuse_connections)
            .finish()
    }
}

impl ClientBuilder {
    /// Sets the retry policy (see [`RetryPolicy`]).
    pub fn retry_policy(mut self, policy: RetryPolicy) -> Self {
        self.policy = policy;
        self
    }

    /// The longest a TCP connect may take (5 s by default). A failed connect
    /// sent nothing, so it is always safe to retry.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Whether idle connections are kept for later requests (yes by default).
    /// `false` opens a new connection per request: slower, but every attempt
    /// meets the network afresh (load balancers that pin connections, fault
    /// proxies that decide per connection).
    pub fn reuse_connections(mut self, reuse: bool) -> Self {
        self.reuse_connections = reuse;
        self
    }

    /// Builds the client.
    pub fn build(self) -> Result<Client, Error> {
        let mut base = Url::parse(&self.base)
            .map_err(|e| Error::Config(format!("base URL `{}`: {e}", self.base)))?;
        if base.cannot_be_a_base() || !matches!(base.scheme(), "http" | "https") {
            return Err(Error::Config(format!(
                "base URL `{}` is not an http(s) URL",
                self.base
            )));
        }
        // Without a TLS stack every https attempt would fail to connect and be
        // retried for the whole budget: refuse it now, plainly.
        if base.scheme() == "https" && !cfg!(feature = "rustls") {
            return Err(Error::Config(format!(
                "base URL `{}` needs TLS: build chargeonce-client with the `rustls` feature",
                self.base
            )));
        }
        if !base.path().ends_with('/') {
            let path = format!("{}/", base.path());
            base.set_path(&path);
        }
        let mut http = reqwest::Client::builder();
        if !self.reuse_connections {
            http = http.pool_max_idle_per_host(0);
        }
        let http = http
            .connect_timeout(self.connect_timeout)
            // A redirected POST would turn into a GET, or go elsewhere: never follow.
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("chargeonce-client/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| Error::Config(e.to_string()))?;
        Ok(Client {
            http,
            base,
            shop: self.shop,
            secret: self.secret,
            policy: self.policy,
        })
    }
}

/// A raw HTTP answer.
struct Answer {
    status: u16,
    headers: HeaderMap,
    body: Vec<u8>,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    fn retry_after(&self) -> Option<Duration> {
        self.headers
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| parse_retry_after(v, SystemTime::now()))
    }

    fn problem(&self) -> Option<Problem> {
        let is_problem = self
            .header(CONTENT_TYPE.as_str())
            .is_some_and(|t| t.contains("json"));
        is_problem
            .then(|| Problem::from_body(self.status, &self.body))
            .flatten()
    }

    fn excerpt(&self) -> String {
        String::from_utf8_lossy(&self.body)
            .chars()
            .take(BODY_EXCERPT)
            .collect()
    }

    /// What an attempt saw, for the log.
    fn seen(&self, payment: Option<&Payment>, problem: Option<&Problem>) -> AttemptAnswer {
        AttemptAnswer::Http {
            status: self.status,
            replayed: self.header(IDEMPOTENT_REPLAYED) == Some("true"),
            waited: self
                .header(PREFERENCE_APPLIED)
                .is_some_and(|v| v.trim_start().starts_with("wait")),
            problem: problem.map(|p| p.code.clone()),
            payment_status: payment.map(|p| p.status.as_str()),
        }
    }
}

/// Reads one answer of a keyed POST: what the attempt saw and what to do
/// next; records the id the answer named.
type Judge<O> = fn(&Answer, u32, &mut Option<String>) -> (AttemptAnswer, Step<O>);

/// What to do after one attempt.
enum Step<O> {
    /// A definite outcome.
    Done(O),
    /// Unknown or transient: try again with the same key and body.
    Retry(Option<Duration>),
    /// A definite failure: stop.
    Fail(Error),
}

/// Whether a status is worth another attempt with the same request.
fn transient(status: u16) -> bool {
    matches!(status, 408 | 409 | 425 | 429) || (500..=599).contains(&status)
}

/// The innermost cause of a transport error: the readable part.
fn root_cause(error: &reqwest::Error) -> String {
    let mut cause: &dyn std::error::Error = error;
    while let Some(source) = cause.source() {
        cause = source;
    }
    cause.to_string()
}

fn failure(error: &reqwest::Error) -> AttemptAnswer {
    let kind = if error.is_connect() {
        FailureKind::Connect
    } else if error.is_timeout() {
        FailureKind::Timeout
    } else {
        FailureKind::Lost
    };
    AttemptAnswer::Failed {
        kind,
        message: root_cause(error),
    }
}

impl Client {
    /// A builder for a client of the service at `base_url`
    /// (`http://127.0.0.1:8080`), as `shop` with its secret key.
    pub fn builder(
        base_url: impl Into<String>,
        shop: impl Into<String>,
        secret: impl Into<String>,
    ) -> ClientBuilder {
        ClientBuilder {
            base: base_url.into(),
            shop: shop.into(),
            secret: secret.into(),
            policy: RetryPolicy::default(),
            connect_timeout: Duration::from_secs(5),
            reuse_connections: true,
        }
    }

    /// A client with the default [`RetryPolicy`].
    pub fn new(
        base_url: impl Into<String>,
        shop: impl Into<String>,
        secret: impl Into<String>,
    ) -> Result<Self, Error> {
        Self::builder(base_url, shop, secret).build()
    }

    /// The retry policy.
    pub fn policy(&self) -> &RetryPolicy {
        &self.policy
    }

    /// The same client (and connection pool) with another retry policy.
    pub fn with_policy(&self, policy: RetryPolicy) -> Self {
        Self {
            policy,
            ..self.clone()
        }
    }

    fn url(&self, path: &str) -> Url {
        // `path` is relative and ASCII; joining cannot fail on an http(s) base.
        self.base.join(path).unwrap_or_else(|_| self.base.clone())
    }

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
    /// # let engine = Arc::new(chargeonce_core::Engine::new(store, sim.clone(), render, Default::default())?);
    /// # let app = chargeonce_server::router(chargeonce_server::AppState::new(engine))
    /// #     .nest("/sim", chargeonce_acquirer::router(sim));
    /// # let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    /// # let base_url = format!("http://{}", listener.local_addr()?);
    /// # tokio::spawn(chargeonce_server::serve(listener, app, std::future::pending()));
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
    /// assert_eq!(client.acquirer_ledger().await?.charges.len(), 1);
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
        let mut url = self.url("v1/payments/");
        if let Ok(mut segments) = url.path_segments_mut() {
            segments.pop_if_empty().push(payment_id).push("refunds");
        }
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

    /// The retry loop of every keyed POST: the same key and body bytes on
    /// every attempt, until `judge` calls an answer definite, a refusal, or
    /// the budget ends (`uncertain` of the id an answer named, if any).
    async fn post_idempotent<O>(
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
            return Ok(PayResult {
                outcome: Outcome::Paid(paid),
                key: key.clone(),
                attempts: Vec::new(),
                found_before_paying: true,
            });
        }
        self.pay(key, request).await
    }

    /// `GET /v1/payments/{id}`: one payment of this shop (`Rejected` with
    /// [`ProblemCode::NotFound`] when there is none).
    pub async fn payment(&self, id: &str) -> Result<Payment, Error> {
        Ok(self.payment_with_attempts(id).await?.0)
    }

    /// [`Client::payment`], and how many attempts the read took.
    pub async fn payment_with_attempts(&self, id: &str) -> Result<(Payment, u32), Error> {
        let mut url = self.url("v1/payments/");
        if let Ok(mut segments) = url.path_segments_mut() {
            segments.pop_if_empty().push(id);
        }
        self.read(url, true).await
    }

    /// `GET /v1/payments?reference=`: an order's payments, oldest first.
    pub async fn payments_for(&self, reference: &str) -> Result<Vec<Payment>, Error> {
        let mut url = self.url("v1/payments");
        url.query_pairs_mut().append_pair("reference", reference);
        let (list, _): (PaymentList, _) = self.read(url, true).await?;
        Ok(list.data)
    }

    /// `GET /sim/ledger`: the embedded acquirer simulator's ledger (a test
    /// tool, not part of the v1 API): the ground truth of what was charged.
    pub async fn acquirer_ledger(&self) -> Result<Ledger, Error> {
        Ok(self.read(self.url("sim/ledger"), false).await?.0)
    }

    /// `GET /readyz`, once, without retries: `true` when the service and its
    /// database answer, `false` when it says it cannot reach its database (503).
    pub async fn ready(&self) -> Result<bool, Error> {
        let builder = self
            .http
            .get(self.url("readyz"))
            .timeout(self.policy.attempt_timeout);
        match send(builder).await {
            Ok(answer) if answer.status == 200 => Ok(true),
            Ok(answer) if answer.status == 503 => Ok(false),
            Ok(answer) => Err(Error::Unexpected {
                status: answer.status,
                body: answer.excerpt(),
                attempts: 1,
            }),
            Err(error) => Err(Error::Unavailable {
                last: failure(&error).to_string(),
                attempts: 1,
            }),
        }
    }

    /// A GET with the retry policy: transport errors, `429` and `5xx` are
    /// retried (a read is safe to repeat); other answers are final. Returns
    /// the value and the number of attempts.
    async fn read<T: DeserializeOwned>(&self, url: Url, auth: bool) -> Result<(T, u32), Error> {
        let deadline = Instant::now() + self.policy.budget;
        let mut number = 0_u32;
        loop {
            number += 1;
            let timeout = self
                .policy
                .attempt_timeout
                .min(deadline.saturating_duration_since(Instant::now()));
            let mut builder = self.http.request(Method::GET, url.clone()).timeout(timeout);
            if auth {
                builder = builder.basic_auth(&self.shop, Some(&self.secret));
            }
            let (last, retry_after) = match send(builder).await {
                Ok(answer) if answer.status == 200 => {
                    return serde_json::from_slice::<T>(&answer.body)
                        .map(|value| (value, number))
                        .map_err(|e| Error::Unexpected {
                            status: answer.status,
                            body: format!("{e}: {}", answer.excerpt()),
                            attempts: number,
                        });
                }
                Ok(answer) if transient(answer.status) => {
                    let what = answer.seen(None, answer.problem().as_ref()).to_string();
                    (what, answer.retry_after())
                }
                Ok(answer) => {
                    return Err(match answer.problem() {
                        Some(problem) => Error::Rejected {
                            problem: Box::new(problem),
                            attempts: number,
                        },
                        None => Error::Unexpected {
                            status: answer.status,
                            body: answer.excerpt(),
                            attempts: number,
                        },
                    });
                }
                Err(error) => (failure(&error).to_string(), None),
            };
            let delay = self.policy.delay(number, retry_after);
            if number >= self.policy.max_attempts || Instant::now() + delay >= deadline {
                return Err(Error::Unavailable {
                    last,
                    attempts: number,
                });
            }
            tokio::time::sleep(delay).await;
        }
    }
}

async fn send(builder: reqwest::RequestBuilder) -> Result<Answer, reqwest::Error> {
    let response = builder.send().await?;
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let body = response.bytes().await?.to_vec();
    Ok(Answer {
        status,
        headers,
        body,
    })
}

/// Decides what a payment answer means.
fn judge_payment(
    answer: &Answer,
    attempts: u32,
    payment_id: &mut Option<String>,
) -> (AttemptAnswer, Step<Outcome>) {
    let status = answer.status;
    if matches!(status, 200..=202) {
        let payment: Option<Payment> = serde_json::from_slice(&answer.body).ok();
        let seen = answer.seen(payment.as_ref(), None);
        let step = match payment {
            Some(payment) => {
                *payment_id = Some(payment.id.clone());
                match payment.status {
                    PaymentStatus::Succeeded if status != 202 => Step::Done(Outcome::Paid(payment)),
                    PaymentStatus::Declined if status != 202 => {
                        Step::Done(Outcome::Declined(payment))
                    }
                    // 202, or a success status with a pending payment: not known yet.
                    _ => Step::Retry(answer.retry_after()),
                }
            }
            // A success status without a readable payment: something in
            // between mangled it. The outcome is unknown; ask again.
            None => Step::Retry(answer.retry_after()),
        };
        return (seen, step);
    }
    let problem = answer.problem();
    let seen = answer.seen(
        problem.as_ref().and_then(|p| p.payment.as_ref()),
        problem.as_ref(),
    );
    if let Some(id) = problem
        .as_ref()
        .and_then(|p| p.payment.as_ref())
        .map(|p| p.id.clone())
    {
        *payment_id = Some(id);
    }
    let step = match (status, problem) {
        (402, Some(problem)) if problem.code == ProblemCode::PaymentDeclined => {
            match problem.payment {
                Some(payment) => Step::Done(Outcome::Declined(payment)),
                None => unexpected(answer, attempts),
            }
        }
        (_, problem) => not_definite(answer, problem, attempts),
    };
    (seen, step)
}

/// Decides what a refund answer means.
fn judge_refund(
    answer: &Answer,
    attempts: u32,
    refund_id: &mut Option<String>,
) -> (AttemptAnswer, Step<RefundOutcome>) {
    let status = answer.status;
    if matches!(status, 200..=202) {
        let refund: Option<Refund> = serde_json::from_slice(&answer.body).ok();
        let seen = answer.seen(None, None);
        let step = match refund {
            Some(refund) => {
                *refund_id = Some(refund.id.clone());
                match refund.status.as_str() {
                    "succeeded" if status != 202 => Step::Done(RefundOutcome::Refunded(refund)),
                    _ => Step::Retry(answer.retry_after()),
                }
            }
            None => Step::Retry(answer.retry_after()),
        };
        return (seen, step);
    }
    let problem = answer.problem();
    let seen = answer.seen(None, problem.as_ref());
    let refund = problem
        .as_ref()
        .and_then(|p| p.raw.get("refund"))
        .and_then(|r| Refund::deserialize(r).ok());
    if let Some(refund) = &refund {
        *refund_id = Some(refund.id.clone());
    }
    let step = match (status, problem) {
        (422, Some(problem)) if problem.code == ProblemCode::RefundFailed => match refund {
            Some(refund) => Step::Done(RefundOutcome::Failed(refund)),
            None => unexpected(answer, attempts),
        },
        (_, problem) => not_definite(answer, problem, attempts),
    };
    (seen, step)
}

/// An answer that is neither the resource nor its problem document.
fn unexpected<O>(answer: &Answer, attempts: u32) -> Step<O> {
    Step::Fail(Error::Unexpected {
        status: answer.status,
        body: answer.excerpt(),
        attempts,
    })
}

/// What an error answer that is not a definite outcome means, for every
/// keyed POST: transient statuses are retried, `idempotency_key_reused` is
/// its own error, other 4xx problems are refusals.
fn not_definite<O>(answer: &Answer, problem: Option<Problem>, attempts: u32) -> Step<O> {
    match (answer.status, problem) {
        (status, _) if transient(status) => Step::Retry(answer.retry_after()),
        (_, Some(problem)) if problem.code == ProblemCode::IdempotencyKeyReused => {
            Step::Fail(Error::KeyReused {
                problem: Box::new(problem),
                attempts,
            })
        }
        (400..=499, Some(problem)) => Step::Fail(Error::Rejected {
            problem: Box::new(problem),
            attempts,
        }),
        _ => unexpected(answer, attempts),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn debug_hides_the_secret() {
        let builder = Client::builder("http://127.0.0.1:1", "shop", "sk_very_secret");
        assert!(!format!("{builder:?}").contains("very_secret"));
        let client = builder.build().unwrap();
        assert!(!format!("{client:?}").contains("very_secret"));
    }

    #[test]
    fn base_urls_are_checked_and_joined() {
        assert!(matches!(
            Client::new("not a url", "s", "k"),
            Err(Error::Config(_))
        ));
        assert!(matches!(
            Client::new("ftp://example.com", "s", "k"),
            Err(Error::Config(_))
        ));
        let client = Client::new("http://127.0.0.1:8080/api", "s", "k").unwrap();
        assert_eq!(
            client.url("v1/payments").as_str(),
            "http://127.0.0.1:8080/api/v1/payments"
        );
    }

    #[test]
    fn transient_statuses() {
        for status in [408, 409, 425, 429, 500, 502, 503, 504] {
            assert!(transient(status), "{status}");
        }
        for status in [200, 201, 202, 400, 401, 402, 404, 413, 415, 422] {
            assert!(!transient(status), "{status}");
        }
    }
}
