//! `POST /console/payments/{id}/cancel`: an operator cancels a pending
//! payment, after a confirmation page.
//!
//! It goes through the engine exactly as the shop's
//! `POST /v1/payments/{id}/cancel` would: the same path and body (`{}`), so
//! the same fingerprint, under an `Idempotency-Key` rendered into the form
//! (`console-cancel-<payment id>-<random>`). A double click cancels once, and
//! a later API request with that key agrees with it. The cancel usually ends
//! later (the charge is looked up once the settle window has passed): the
//! flash says so, and the payment page shows how it ended.

use askama::Template;
use axum::Form;
use axum::extract::State;
use axum::response::Response;
use serde::Deserialize;
use serde_json::{Value, json};

use super::action::Action;
use super::{Chrome, ConsoleError, Operator, html, money};
use crate::Console;
use chargeonce_server::extract::PathId;
use chargeonce_server::pipeline::Command;

/// The cancel form.
#[derive(Debug, Deserialize)]
pub struct CancelForm {
    csrf: Option<String>,
    key: Option<String>,
    confirm: Option<String>,
}

/// The confirmation step of a cancel.
#[derive(Template)]
#[template(path = "console/confirm_cancel.html")]
struct ConfirmPage {
    page: Chrome,
    id: String,
    shop: String,
    reference: String,
    amount: String,
    key: String,
}

/// What a cancel's answer means, in words for the flash.
fn outcome_words(status: u16, replayed: bool, body: &Value, detail: &str, key: &str) -> String {
    let again = if replayed {
        " (already, under this key)"
    } else {
        ""
    };
    match (status, body["status"].as_str()) {
        (200, Some("canceled")) => format!("canceled{again}: nothing was taken (key {key})"),
        (200, Some("declined")) => {
            format!("declined by the acquirer{again}: nothing was taken (key {key})")
        }
        (200, Some("succeeded")) => format!(
            "the charge was found{again}: the payment is kept and refunded ({} refunded; key {key})",
            body["amount_refunded"]["value"].as_str().unwrap_or("?")
        ),
        (202, _) => format!(
            "cancel recorded (202, key {key}): the charge is never sent again and is looked up \
             once the settle window has passed; this page shows when it ends"
        ),
        (409, _) => format!("not canceled (409): {detail}"),
        _ => format!("not canceled ({status}): {detail}"),
    }
}

/// `POST /console/payments/{id}/cancel`: without `confirm=yes`, the
/// confirmation page; with it, the cancel through the engine, then 303 back
/// to the payment with what happened.
pub async fn cancel(
    State(state): State<Console>,
    operator: Operator,
    PathId(id): PathId,
    Form(form): Form<CancelForm>,
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
        return action.flash("the cancel form had no valid key: reload the page".to_owned());
    };
    if form.confirm.as_deref() != Some("yes") {
        return html(&ConfirmPage {
            page: Chrome::new(&operator, "Confirm the cancel", "payments"),
            id: payment.id.as_str().to_owned(),
            shop: crate::shop_shown(&payment.shop_id),
            reference: payment.reference.as_str().to_owned(),
            amount: money(payment.amount),
            key: key.as_str().to_owned(),
        });
    }
    // The request a shop would send for this cancel.
    let path = format!("/v1/payments/{}/cancel", payment.id);
    let command = Command::Cancel {
        payment_id: payment.id.clone(),
    };
    let answered = action.run(&key, &path, &json!({}), command).await;
    let status = answered.status;
    tracing::info!(payment = %payment.id, key = key.as_str(), status, "console cancel");
    let detail = answered.detail();
    action.flash(outcome_words(
        status,
        answered.replayed,
        &answered.body,
        &detail,
        key.as_str(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_answer_is_told_in_words() {
        let done = |status: &str| json!({"status": status, "amount_refunded": {"value": "20.00"}});
        assert!(
            outcome_words(200, false, &done("canceled"), "", "k").starts_with("canceled: nothing")
        );
        assert!(outcome_words(200, true, &done("canceled"), "", "k").contains("already"));
        assert!(outcome_words(200, false, &done("succeeded"), "", "k").contains("20.00 refunded"));
        assert!(outcome_words(202, false, &done("pending"), "", "k").contains("settle window"));
        assert!(outcome_words(409, false, &Value::Null, "final", "k").contains("final"));
    }
}
