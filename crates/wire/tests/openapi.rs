//! The schemas of the `openapi` feature: money as decimal strings,
//! timestamps as date-times, the codes as a string enum.
#![cfg(feature = "openapi")]
#![allow(clippy::unwrap_used)]

use chargeonce_wire::{
    Amount, CreatePayment, CreateRefund, Event, List, Payment, Problem, ProblemCode, Refund,
};
use serde_json::Value;
use utoipa::PartialSchema;

fn schema<T: PartialSchema>() -> Value {
    serde_json::to_value(T::schema()).unwrap()
}

#[test]
fn money_is_a_decimal_string_and_times_are_date_times() {
    let amount = schema::<Amount>();
    assert_eq!(amount["properties"]["value"]["type"], "string");
    assert_eq!(amount["properties"]["currency"]["type"], "string");
    assert_eq!(amount["example"]["value"], "1500.00");

    let payment = schema::<Payment>();
    let created_at = &payment["properties"]["created_at"];
    assert_eq!(created_at["type"], "string");
    assert_eq!(created_at["format"], "date-time");
    assert_eq!(payment["example"]["reference"], "order-123");
    assert!(
        payment["properties"]["id"]["description"]
            .as_str()
            .unwrap()
            .contains("pay_")
    );
    let refund = schema::<Refund>();
    assert_eq!(refund["properties"]["created_at"]["format"], "date-time");
    let event = schema::<Event>();
    assert_eq!(event["properties"]["created_at"]["format"], "date-time");
}

#[test]
fn every_type_has_a_schema() {
    let request = schema::<CreatePayment>();
    assert_eq!(request["example"]["payment_method"]["token"], "tok_ok");
    assert!(schema::<CreateRefund>()["properties"]["amount"].is_object());
    assert!(schema::<List<Payment>>()["properties"]["has_more"].is_object());
    let problem = schema::<Problem>();
    let required = problem["required"].as_array().unwrap();
    for member in ["type", "title", "status", "detail", "code"] {
        assert!(required.contains(&Value::from(member)), "{member}");
    }
    assert!(!required.contains(&Value::from("request_id")));
    let codes = schema::<ProblemCode>();
    let codes = codes["enum"].as_array().unwrap();
    assert!(codes.contains(&Value::from("payment_not_refundable")));
    assert_eq!(
        codes.len(),
        ProblemCode::ALL.len() - 1,
        "payment_not_refundable once"
    );
}
