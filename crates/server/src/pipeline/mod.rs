//! The path of every idempotent request (a payment, a refund) from its
//! handler to the engine, written once. A handler parses the request,
//! computes its fingerprint and calls [`answer`]; the steps, in order:
//!
//! 1. [`cached`]: a key finished on this instance is answered from memory,
//!    byte for byte (or 422 for another request under it), without a store
//!    round trip;
//! 2. [`flight`] (without `Prefer: wait`): identical requests in flight on
//!    this instance share one trip through the engine;
//! 3. [`wait`] (with `Prefer: wait=N`): a repeat that finds its key's first
//!    request running waits for its result instead of a 409;
//! 4. the engine, in a task of its own ([`Command::run`]): a client that
//!    hangs up does not cut the command, and the shutdown waits for it.
//!
//! An answer this request executed is then remembered in the response cache
//! (step 1 of the next repeat). None of these steps changes what the engine
//! decides: the store still decides everything between instances.

use axum::http::HeaderMap;
use axum::response::Response;
use chargeonce_core::{
    ClaimRequest, Fingerprint, IdempotencyKey, Money, NewCapture, NewRefund, Outcome, PaymentId,
    PaymentRequest, ShopId,
};
use serde_json::Value;
use tracing::Instrument as _;

use crate::AppState;
use crate::prefer;
use crate::problem::{Problem, ProblemCode};
use crate::respond::{engine_problem, outcome_response};

pub mod cached;
pub mod flight;
pub mod wait;

/// What a request asks the engine for.
#[derive(Debug, Clone)]
pub enum Command {
    /// A payment.
    Pay(PaymentRequest),
    /// A refund of (part of) a payment; `None` refunds what is left.
    Refund {
        /// The payment refunded.
        payment_id: PaymentId,
        /// How much.
        amount: Option<Money>,
    },
    /// A cancel of a pending payment.
    Cancel {
        /// The payment to cancel.
        payment_id: PaymentId,
    },
    /// A capture of (part of) an authorized payment.
    Capture {
        /// The payment captured.
        payment_id: PaymentId,
        /// How much; `None` takes all that is capturable.
        amount: Option<Money>,
        /// Whether it is the last capture.
        last: bool,
    },
    /// A void of what is left of an authorization.
    Void {
        /// The payment whose authorization is voided.
        payment_id: PaymentId,
    },
}

impl Command {
    /// Runs the engine once, in a task the shutdown waits for, in the
    /// request's span.
    pub async fn run(self, state: &AppState, claim: ClaimRequest) -> Result<Outcome, Problem> {
        let engine = state.engine.clone();
        let what = self.name();
        // The engine's log lines stay in the request's span (its request_id).
        let span = tracing::Span::current();
        state
            .engine_tasks
            .spawn(
                // The engine's future is large (8 KiB for a payment): boxed,
                // it is written once, where the task's wrappers would each
                // move it.
                async move {
                    match self {
                        Self::Pay(request) => Box::pin(engine.pay(claim, request)).await,
                        Self::Refund { payment_id, amount } => {
                            let refund = NewRefund::new(
                                claim.shop_id.clone(),
                                payment_id,
                                claim.key.clone(),
                                amount,
                            );
                            Box::pin(engine.refund(claim, refund)).await
                        }
                        Self::Cancel { payment_id } => {
                            Box::pin(engine.cancel(claim, payment_id)).await
                        }
                        Self::Capture {
                            payment_id,
                            amount,
                            last,
                        } => {
                            let capture = NewCapture::new(
                                claim.shop_id.clone(),
                                payment_id,
                                claim.key.clone(),
                                amount,
                                last,
                            );
                            Box::pin(engine.capture(claim, capture)).await
                        }
                        Self::Void { payment_id } => Box::pin(engine.void(claim, payment_id)).await,
                    }
                }
                .instrument(span),
            )
            .await
            .map_err(|e| {
                tracing::error!(error = %e, "{what} task failed");
                Problem::new(ProblemCode::InternalError, "internal error")
            })?
            .map_err(engine_problem)
    }

    /// What the command is called in logs.
    fn name(&self) -> &'static str {
        match self {
            Self::Pay(_) => "payment",
            Self::Refund { .. } => "refund",
            Self::Cancel { .. } => "cancel",
            Self::Capture { .. } => "capture",
            Self::Void { .. } => "void",
        }
    }
}

/// The claim of a `POST` with a JSON body: the key, and the fingerprint of
/// the method, path and body it is first used for (422 `malformed_json`
/// for a body that cannot be fingerprinted).
pub fn claim(
    shop_id: ShopId,
    key: IdempotencyKey,
    path: &str,
    body: &Value,
) -> Result<ClaimRequest, Problem> {
    let fingerprint = Fingerprint::compute("POST", path, body)
        .map_err(|e| Problem::new(ProblemCode::MalformedJson, e.to_string()))?;
    Ok(ClaimRequest {
        shop_id,
        key,
        fingerprint,
        method: "POST".to_owned(),
        path: path.to_owned(),
    })
}

/// The answer to an idempotent request: the steps above, in order.
pub async fn answer(
    state: &AppState,
    claim: ClaimRequest,
    command: Command,
    headers: &HeaderMap,
) -> Result<Response, Problem> {
    if let Some(outcome) = cached::answer(state, &claim) {
        return Ok(outcome_response(outcome));
    }
    // Boxed: the steps below make a future of kilobytes, which would make
    // every request's handler future (a cached replay's too) that much
    // larger to move.
    Box::pin(uncached(state, claim, command, headers)).await
}

/// Steps 2 to 4, for a request the response cache did not answer.
async fn uncached(
    state: &AppState,
    claim: ClaimRequest,
    command: Command,
    headers: &HeaderMap,
) -> Result<Response, Problem> {
    let wait = prefer::wait_preference(headers);
    let (outcome, waited) = match wait {
        None if !state.flight_wait.is_zero() => {
            (flight::share(state, claim, command).await?, false)
        }
        _ => run_and_remember(state, claim, command, wait).await?,
    };
    let mut response = outcome_response(outcome);
    if let (true, Some(wait)) = (waited, wait) {
        let (name, value) = prefer::applied_value(wait);
        response.headers_mut().insert(name, value);
    }
    Ok(response)
}

/// Runs the engine (waiting as `wait` asks, see [`wait::run`]) and
/// remembers a response this request executed. Returns the outcome and
/// whether the request waited.
async fn run_and_remember(
    state: &AppState,
    claim: ClaimRequest,
    command: Command,
    wait: Option<std::time::Duration>,
) -> Result<(Outcome, bool), Problem> {
    let (shop, key, fingerprint) = (claim.shop_id.clone(), claim.key.clone(), claim.fingerprint);
    let (outcome, waited) = wait::run(state, claim, command, wait).await?;
    if let Outcome::Executed(response) = &outcome {
        cached::remember(state, &shop, &key, fingerprint, response);
    }
    Ok((outcome, waited))
}
