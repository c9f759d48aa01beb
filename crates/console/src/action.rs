//! A console action on a payment (a refund, a cancel), run through the
//! engine exactly as the shop's API request with the same key, path and
//! body would be, so a double click acts once and a later API request with
//! the key agrees with it. Every action's handler starts the same way
//! ([`Action::start`]: the CSRF check, the payment, the form's key) and
//! ends with a flash on the payment's page ([`Action::flash`]).

use axum::http::HeaderMap;
use axum::response::{IntoResponse, Redirect, Response};
use chargeonce_core::{IdempotencyKey, Payment, PaymentId};
use chargeonce_server::pipeline::{self, Command};
use rand::RngCore;
use serde_json::Value;

use super::{ConsoleError, Operator};
use crate::{Console, payment_of};

/// A fresh key for an action's form: `console-<what>-<payment id>-<random>`.
pub fn fresh_key(what: &str, payment: &PaymentId) -> String {
    let mut bytes = [0_u8; 8];
    rand::rng().fill_bytes(&mut bytes);
    format!("console-{what}-{payment}-{}", hex::encode(bytes))
}

/// An action under way: the operator, the payment and the form's key.
pub(crate) struct Action<'a> {
    state: &'a Console,
    operator: &'a Operator,
    /// The payment acted on.
    pub(crate) payment: Payment,
    /// The form's key, when it holds a valid one.
    pub(crate) key: Option<IdempotencyKey>,
}

impl<'a> Action<'a> {
    /// Checks the form's CSRF token, reads the payment (any shop's) and the
    /// form's key.
    pub(crate) async fn start(
        state: &'a Console,
        operator: &'a Operator,
        id: &str,
        csrf: Option<&str>,
        key: Option<&str>,
    ) -> Result<Action<'a>, ConsoleError> {
        operator.check_csrf(csrf)?;
        let payment = payment_of(state, id).await?;
        let key = key.map(str::trim).and_then(|k| IdempotencyKey::new(k).ok());
        Ok(Self {
            state,
            operator,
            payment,
            key,
        })
    }

    /// Back to the payment's page, with `message` shown once.
    pub(crate) fn flash(&self, message: String) -> Result<Response, ConsoleError> {
        let back = format!("/console/payments/{}", self.payment.id);
        self.state
            .console
            .sessions
            .flash(&self.operator.session, message);
        Ok(Redirect::to(&back).into_response())
    }

    /// Runs `command` through the engine under `key`, as the shop's
    /// request to `path` with `body` would run.
    pub(crate) async fn run(
        &self,
        key: &IdempotencyKey,
        path: &str,
        body: &Value,
        command: Command,
    ) -> Answered {
        through_engine(self.state, &self.payment, key, path, body, command).await
    }
}

/// The engine's answer to a console action, read whole.
pub(crate) struct Answered {
    /// Its HTTP status.
    pub(crate) status: u16,
    /// A replay of the key's first answer.
    pub(crate) replayed: bool,
    /// Its JSON body (`Null` when it has none).
    pub(crate) body: Value,
}

impl Answered {
    /// The detail of a problem answer (or the resource's status).
    pub(crate) fn detail(&self) -> String {
        self.body["detail"]
            .as_str()
            .map(str::to_owned)
            .or_else(|| self.body["status"].as_str().map(|s| format!("it is {s}")))
            .unwrap_or_default()
    }
}

/// Runs a console action through the same pipeline as the shop's API
/// request with this key, path and body would (so the same fingerprint:
/// a later API request with the key agrees with it); a claim refused
/// answers its problem.
async fn through_engine(
    state: &Console,
    payment: &Payment,
    key: &IdempotencyKey,
    path: &str,
    body: &Value,
    command: Command,
) -> Answered {
    let response = match pipeline::claim(payment.shop_id.clone(), key.clone(), path, body) {
        Ok(claim) => match pipeline::answer(state, claim, command, &HeaderMap::new()).await {
            Ok(response) => response,
            Err(problem) => problem.into_response(),
        },
        Err(problem) => problem.into_response(),
    };
    let replayed = response
        .headers()
        .get("idempotent-replayed")
        .is_some_and(|v| v == "true");
    let status = response.status().as_u16();
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 20)
        .await
        .unwrap_or_default();
    Answered {
        status,
        replayed,
        body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    }
}
