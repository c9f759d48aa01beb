//! A merchant event as the API shows it (`GET /v1/events`, `GET
//! /v1/events/{id}`): its id, type, the payload's `data` exactly as
//! delivered, and its deliveries to the shop's endpoints.

use chargeonce_core::events::{Delivery, DeliveryState, EndpointDelivery, Event, EventType};
use chargeonce_wire as wire;
use serde_json::Value;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// Unix milliseconds as RFC 3339.
pub fn timestamp(ms: i64) -> Option<String> {
    OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .ok()
        .and_then(|t| t.format(&Rfc3339).ok())
}

/// A delivery's state on the wire.
fn state_view(state: DeliveryState) -> wire::DeliveryState {
    match state {
        DeliveryState::Pending => wire::DeliveryState::Pending,
        DeliveryState::Delivered => wire::DeliveryState::Delivered,
        DeliveryState::GaveUp => wire::DeliveryState::GaveUp,
    }
}

/// The summary of an event's deliveries on the wire.
fn summary_view(delivery: &Delivery) -> wire::EventDelivery {
    wire::EventDelivery {
        attempts: delivery.attempts,
        delivered_at: delivery.delivered_at_ms.and_then(timestamp),
        gave_up_at: delivery.gave_up_at_ms.and_then(timestamp),
        last_error: delivery.last_error.clone(),
        last_status: delivery.last_status,
        next_attempt_at: delivery.next_attempt().and_then(timestamp),
        state: state_view(delivery.state()),
    }
}

/// One endpoint's delivery on the wire.
fn delivery_view(delivery: &EndpointDelivery) -> wire::EndpointDelivery {
    let log = &delivery.delivery;
    wire::EndpointDelivery {
        attempts: log.attempts,
        delivered_at: log.delivered_at_ms.and_then(timestamp),
        endpoint_id: delivery.endpoint_id.to_string(),
        gave_up_at: log.gave_up_at_ms.and_then(timestamp),
        last_error: log.last_error.clone(),
        last_status: log.last_status,
        next_attempt_at: log.next_attempt().and_then(timestamp),
        state: state_view(log.state()),
    }
}

/// An event as the API shows it: its id, type, the payload's `data` exactly
/// as delivered, its delivery to each endpoint and their summary.
pub fn event_view(event: &Event) -> wire::Event {
    let payload: Value = serde_json::from_slice(&event.payload).unwrap_or(Value::Null);
    wire::Event {
        created_at: timestamp(event.created_at_ms).unwrap_or_default(),
        data: payload.get("data").cloned().unwrap_or(Value::Null),
        deliveries: event.deliveries.iter().map(delivery_view).collect(),
        delivery: summary_view(&event.delivery()),
        id: event.id.as_str().to_owned(),
        livemode: event.shop_id.is_live(),
        object: wire::EventObject::Event,
        payment_id: event.payment_id.as_str().to_owned(),
        refund_id: event.refund_id.as_ref().map(|id| id.as_str().to_owned()),
        event_type: event_type_view(event.event_type),
    }
}

/// An event type on the wire.
pub fn event_type_view(event_type: EventType) -> wire::EventType {
    match event_type {
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
    }
}
