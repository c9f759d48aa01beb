//! `POST /console/payments/{id}/capture` and `POST
//! /console/payments/{id}/void`: an operator captures (part of) an
//! authorization, or voids what is left of it, after a confirmation page.
//!
//! Each goes through the engine exactly as the shop's `POST
//! /v1/payments/{id}/captures` or `/void` would: the same path and body, so
//! the same fingerprint, under an `Idempotency-Key` rendered into the form
//! (`console-capture-<payment id>-<random>`, `console-void-...`). A double
//! click captures or voids once, and a later API request with that key
//! agrees with it.

use askama::Template;
use axum::Form;
use axum::extract::State;
use axum::response::Response;
use chargeonce_core::Money;
use chargeonce_server::extract::PathId;
use chargeonce_server::pipeline::Command;
use serde::Deserialize;
use serde_json::{Value, json};

use super::action::Action;
use super::{Chrome, ConsoleError, Operator, html, money};
use crate::Console;

/// The capture and void forms.
#[derive(Debug, Deserialize)]
pub struct MoveForm {
    csrf: Option<String>,
    key: Option<String>,
    amount: Option<String>,
    #[serde(rename = "final")]
    last: Option<String>,
    confirm: Option<String>,
}

/// The confirmation step of a capture or a void.
#[derive(Template)]
#[template(path = "console/confirm_move.html")]
struct ConfirmPage {
    page: Chrome,
    id: String,
    shop: String,
    reference: String,
    /// `capture` or `void`.
    action: &'static str,
    /// What will happen, in words.
    what: String,
    key: String,
    amount: String,
    last: bool,
}

/// `POST /console/payments/{id}/capture`: without `confirm=yes`, the
/// confirmation page; with it, the capture through the engine, then 303
/// back to the payment with what happened.
pub async fn capture(
    State(state): State<Console>,
    operator: Operator,
    PathId(id): PathId,
    Form(form): Form<MoveForm>,
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
        return action.flash("the capture form had no valid key: reload the page".to_owned());
    };
    let amount = match super::given(&form.amount) {
        None => None,
        Some(value) => match Money::parse(value, payment.amount.currency().code()) {
            Ok(amount) => Some(amount),
            Err(e) => return action.flash(format!("not captured: {e}")),
        },
    };
    // Without an amount everything capturable is taken: final.
    let last = amount.is_none() || form.last.as_deref() == Some("yes");
    if form.confirm.as_deref() != Some("yes") {
        let what = match (amount, last) {
            (Some(amount), true) => format!(
                "capture {} and release the rest of the authorization",
                money(amount)
            ),
            (Some(amount), false) => {
                format!("capture {}; more captures may follow", money(amount))
            }
            (None, _) => "capture everything still capturable (the last capture)".to_owned(),
        };
        return html(&ConfirmPage {
            page: Chrome::new(&operator, "Confirm the capture", "payments"),
            id: payment.id.as_str().to_owned(),
            shop: crate::shop_shown(&payment.shop_id),
            reference: payment.reference.as_str().to_owned(),
            action: "capture",
            what,
            key: key.as_str().to_owned(),
            amount: amount.map(|a| a.to_decimal_string()).unwrap_or_default(),
            last: last && amount.is_some(),
        });
    }
    // The body a shop would send for this capture.
    let body = capture_body(amount, last);
    let path = format!("/v1/payments/{}/captures", payment.id);
    let command = Command::Capture {
        payment_id: payment.id.clone(),
        amount,
        last,
    };
    let answered = action.run(&key, &path, &body, command).await;
    let (status, replayed, detail) = (answered.status, answered.replayed, answered.detail());
    tracing::info!(payment = %payment.id, key = key.as_str(), status, "console capture");
    let message = match status {
        201 if replayed => format!("already captured under key {} (201)", key.as_str()),
        201 => format!(
            "captured {} (201, key {})",
            answered.body["amount"]["value"].as_str().unwrap_or("?"),
            key.as_str()
        ),
        202 => format!(
            "capture pending at the acquirer (202, key {}): its amount is reserved and it will \
             be settled",
            key.as_str()
        ),
        _ => format!("not captured ({status}): {detail}"),
    };
    action.flash(message)
}

/// The body of a capture as the API takes it: `{}` for everything,
/// `{"amount": ..., "final": true}` for a last part.
fn capture_body(amount: Option<Money>, last: bool) -> Value {
    match amount {
        Some(amount) => {
            let mut body = json!({"amount": {
                "value": amount.to_decimal_string(),
                "currency": amount.currency().code(),
            }});
            if last {
                body["final"] = true.into();
            }
            body
        }
        None => json!({}),
    }
}

/// `POST /console/payments/{id}/void`: without `confirm=yes`, the
/// confirmation page; with it, the void through the engine.
pub async fn void(
    State(state): State<Console>,
    operator: Operator,
    PathId(id): PathId,
    Form(form): Form<MoveForm>,
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
        return action.flash("the void form had no valid key: reload the page".to_owned());
    };
    if form.confirm.as_deref() != Some("yes") {
        let capturable = payment
            .authorization()
            .map_or(0, |hold| hold.capturable_minor());
        let rest = chargeonce_server::render::amount_minor(capturable, payment.amount);
        return html(&ConfirmPage {
            page: Chrome::new(&operator, "Confirm the void", "payments"),
            id: payment.id.as_str().to_owned(),
            shop: crate::shop_shown(&payment.shop_id),
            reference: payment.reference.as_str().to_owned(),
            action: "void",
            what: format!(
                "release {} {} still held on the customer's card (captures made are kept)",
                rest.value, rest.currency
            ),
            key: key.as_str().to_owned(),
            amount: String::new(),
            last: false,
        });
    }
    let path = format!("/v1/payments/{}/void", payment.id);
    let command = Command::Void {
        payment_id: payment.id.clone(),
    };
    let answered = action.run(&key, &path, &json!({}), command).await;
    let (status, replayed, detail) = (answered.status, answered.replayed, answered.detail());
    tracing::info!(payment = %payment.id, key = key.as_str(), status, "console void");
    let again = if replayed {
        " (already, under this key)"
    } else {
        ""
    };
    let message = match status {
        200 => format!(
            "released{again}: the payment is {} (key {})",
            answered.body["status"].as_str().unwrap_or("?"),
            key.as_str()
        ),
        202 => format!(
            "void in flight (202, key {}): no capture is accepted meanwhile; it will be settled",
            key.as_str()
        ),
        _ => format!("not voided ({status}): {detail}"),
    };
    action.flash(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_body_is_the_apis() {
        let amount = Money::parse("10.00", "RUB").unwrap();
        assert_eq!(capture_body(None, true), json!({}));
        assert_eq!(
            capture_body(Some(amount), false),
            json!({"amount": {"value": "10.00", "currency": "RUB"}})
        );
        assert_eq!(capture_body(Some(amount), true)["final"], true);
    }
}
