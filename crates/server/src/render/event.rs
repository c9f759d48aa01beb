//! A merchant event as the API shows it (`GET /v1/events`, `GET
//! /v1/events/{id}`): its id, type, the payload's `data` exactly as
//! delivered, and the delivery log.

use chargeonce_core::events::{DeliveryState, Event, EventType, PARKED_UNTIL_MS};
use chargeonce_wire as wire;
use serde_json::Value;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// Unix milliseconds as RFC 3339.
fn timestamp(ms: i64) -> Option<String> {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
}

/// An event as the API shows it: its id, type, the payload's `data` exactly
/// as delivered, and the delivery log.
pub fn event_view(event: &Event) -> wire::Event {
    let payload: Value = serde_json::from_slice(&event.payload).unwrap_or(Value::Null);
    let delivery = &event.delivery;
    let state = delivery.state();
    let pending = state == DeliveryState::Pending;
    wire::Event {
        created_at: timestamp(event.created_at_ms).unwrap_or_default(),
        data: payload.get("data").cloned().unwrap_or(Value::Null),
        delivery: wire::EventDelivery {
            attempts: delivery.attempts,
            delivered_at: delivery.delivered_at_ms.and_then(timestamp),
            gave_up_at: delivery.gave_up_at_ms.and_then(timestamp),
            last_error: delivery.last_error.clone(),
            last_status: delivery.last_status,
            // Null when delivered, given up, or parked until the shop has a webhook URL.
            next_attempt_at: if pending && delivery.next_attempt_at_ms < PARKED_UNTIL_MS {
                timestamp(delivery.next_attempt_at_ms)
            } else {
                None
            },
            state: match state {
                DeliveryState::Pending => wire::DeliveryState::Pending,
                DeliveryState::Delivered => wire::DeliveryState::Delivered,
                DeliveryState::GaveUp => wire::DeliveryState::GaveUp,
            },
        },
        id: event.id.as_str().to_owned(),
        object: wire::EventObject::Event,
        payment_id: event.payment_id.as_str().to_owned(),
        refund_id: event.refund_id.as_ref().map(|id| id.as_str().to_owned()),
        event_type: match event.event_type {
            EventType::PaymentSucceeded => wire::EventType::PaymentSucceeded,
            EventType::PaymentDeclined => wire::EventType::PaymentDeclined,
            EventType::PaymentCanceled => wire::EventType::PaymentCanceled,
            EventType::RefundSucceeded => wire::EventType::RefundSucceeded,
            EventType::RefundFailed => wire::EventType::RefundFailed,
            EventType::CaptureSucceeded => wire::EventType::CaptureSucceeded,
            EventType::CaptureFailed => wire::EventType::CaptureFailed,
            EventType::PaymentAuthorized => wire::EventType::PaymentAuthorized,
            EventType::PaymentVoided => wire::EventType::PaymentVoided,
            EventType::PaymentExpired => wire::EventType::PaymentExpired,
        },
    }
}
