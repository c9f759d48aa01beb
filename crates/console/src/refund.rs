//! `POST /console/payments/{id}/refund`: an operator refunds a payment, or
//! part of it, after a confirmation page.
//!
//! A console refund goes through the engine exactly as the shop's
//! `POST /v1/payments/{id}/refunds` would: the same path, the same body
//! (`{"amount": {...}}`, or `{}` for the rest), so the same fingerprint,
//! under an `Idempotency-Key` rendered into the form
//! (`console-refund-<payment id>-<random>`). A double click refunds once,
//! and a later API request with that key agrees with it.

use askama::Template;
use axum::Form;
use axum::extract::State;
use axum::response::Response;
use chargeonce_core::Money;
use chargeonce_server::extract::PathId;
use chargeonce_server::pipeline::Command;
use serde::Deserialize;
use serde_json::json;

use super::action::Action;
use super::{Chrome, ConsoleError, Operator, html, money};
use crate::Console;

/// The refund form.
#[derive(Debug, Deserialize)]
pub struct RefundForm {
    csrf: Option<String>,
    key: Option<String>,
    amount: Option<String>,
    confirm: Option<String>,
}

/// The confirmation step of a refund.
#[derive(Template)]
#[template(path = "console/confirm_refund.html")]
struct ConfirmPage {
    page: Chrome,
    id: String,
    shop: String,
    reference: String,
    what: String,
    key: String,
    amount: String,
}

/// `POST /console/payments/{id}/refund`: without `confirm=yes`, the
/// confirmation page; with it, the refund through the engine, then 303 back
/// to the payment with what happened.
pub async fn refund(
    State(state): State<Console>,
    operator: Operator,
    PathId(id): PathId,
    Form(form): Form<RefundForm>,
) -> Result<Response, ConsoleError> {
    let action = Action::start(
        &state,
        &operator,
        &id,
        form.csrf.as_deref(),
        form.key.as_deref(),
    )
    .await?;
    let payment = &action.payment;
    let Some(key) = action.key.clone() else {
        return action.flash("the refund form had no valid key: reload the page".to_owned());
    };
    let amount = match super::given(&form.amount) {
        None => None,
        Some(value) => match Money::parse(value, payment.amount.currency().code()) {
            Ok(amount) => Some(amount),
            Err(e) => return action.flash(format!("not refunded: {e}")),
        },
    };
    if form.confirm.as_deref() != Some("yes") {
        let what = match amount {
            Some(amount) => money(amount),
            None => "everything not refunded yet".to_owned(),
        };
        return html(&ConfirmPage {
            page: Chrome::new(&operator, "Confirm the refund", "payments"),
            id: payment.id.as_str().to_owned(),
            shop: crate::shop_shown(&payment.shop_id),
            reference: payment.reference.as_str().to_owned(),
            what,
            key: key.as_str().to_owned(),
            amount: amount.map(|a| a.to_decimal_string()).unwrap_or_default(),
        });
    }
    // The body a shop would send for this refund, so the fingerprint is
    // the one its API request with this key would have.
    let body = match amount {
        Some(amount) => json!({"amount": {
            "value": amount.to_decimal_string(),
            "currency": amount.currency().code(),
        }}),
        None => json!({}),
    };
    let path = format!("/v1/payments/{}/refunds", payment.id);
    let command = Command::Refund {
        payment_id: payment.id.clone(),
        amount,
    };
    let answered = action.run(&key, &path, &body, command).await;
    let (status, replayed, detail) = (answered.status, answered.replayed, answered.detail());
    tracing::info!(payment = %payment.id, key = key.as_str(), status, "console refund");
    let message = match status {
        201 if replayed => format!("already refunded under key {} (201)", key.as_str()),
        201 => format!("refunded (201, key {})", key.as_str()),
        202 => format!(
            "refund pending at the acquirer (202, key {}): it will be settled",
            key.as_str()
        ),
        _ => format!("not refunded ({status}): {detail}"),
    };
    action.flash(message)
}
