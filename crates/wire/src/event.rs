//! A merchant event (`GET /v1/events`) and its delivery log.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Always `event`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum EventObject {
    /// `event`.
    #[default]
    Event,
}

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum EventType {
    /// `payment.succeeded`: a payment was charged.
    #[serde(rename = "payment.succeeded")]
    PaymentSucceeded,
    /// `payment.declined`: a payment was declined.
    #[serde(rename = "payment.declined")]
    PaymentDeclined,
    /// `payment.canceled`: a pending payment was canceled (nothing taken).
    #[serde(rename = "payment.canceled")]
    PaymentCanceled,
    /// `refund.succeeded`: a refund gave the money back.
    #[serde(rename = "refund.succeeded")]
    RefundSucceeded,
    /// `refund.failed`: the acquirer refused a refund.
    #[serde(rename = "refund.failed")]
    RefundFailed,
    /// `capture.succeeded`: a capture took part of an authorization.
    #[serde(rename = "capture.succeeded")]
    CaptureSucceeded,
    /// `capture.failed`: the acquirer refused a capture; its reservation
    /// on the authorization was given back.
    #[serde(rename = "capture.failed")]
    CaptureFailed,
    /// `payment.authorized`: a payment with manual capture was authorized;
    /// its amount is held for captures.
    #[serde(rename = "payment.authorized")]
    PaymentAuthorized,
    /// `payment.voided`: an authorization's rest was released by a void.
    #[serde(rename = "payment.voided")]
    PaymentVoided,
    /// `payment.expired`: an authorization's rest was released because it
    /// was not captured in time.
    #[serde(rename = "payment.expired")]
    PaymentExpired,
}

/// Where an event's delivery stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum DeliveryState {
    /// Not acknowledged yet; it will be (re)tried.
    Pending,
    /// The shop's webhook answered 2xx.
    Delivered,
    /// Retried until the give-up time without a 2xx; resend it by hand
    /// (`POST /v1/events/{id}/resend`).
    GaveUp,
}

/// The delivery log of one event.
///
/// The members are declared (and sent) in the order the server has always
/// sent them: sorted by name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EventDelivery {
    /// Delivery attempts made (each a POST to the shop's webhook).
    pub attempts: u32,
    /// When the shop acknowledged it (RFC 3339).
    #[cfg_attr(feature = "openapi", schema(format = DateTime))]
    pub delivered_at: Option<String>,
    /// When delivery was given up (RFC 3339).
    #[cfg_attr(feature = "openapi", schema(format = DateTime))]
    pub gave_up_at: Option<String>,
    /// Why the last attempt failed (a transport error, or the status).
    pub last_error: Option<String>,
    /// The HTTP status of the last attempt, if one came back.
    pub last_status: Option<u16>,
    /// When the next attempt is due (RFC 3339), while pending; null when
    /// delivered, given up, or waiting for an endpoint.
    #[cfg_attr(feature = "openapi", schema(format = DateTime))]
    pub next_attempt_at: Option<String>,
    /// Where it stands.
    pub state: DeliveryState,
}

/// An event's delivery to one webhook endpoint.
///
/// The members are declared (and sent) sorted by name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct EndpointDelivery {
    /// Delivery attempts made to this endpoint.
    pub attempts: u32,
    /// When the endpoint acknowledged it (RFC 3339).
    #[cfg_attr(feature = "openapi", schema(format = DateTime))]
    pub delivered_at: Option<String>,
    /// The endpoint (`we_...`).
    pub endpoint_id: String,
    /// When delivery was given up (RFC 3339).
    #[cfg_attr(feature = "openapi", schema(format = DateTime))]
    pub gave_up_at: Option<String>,
    /// Why the last attempt failed (a transport error, or the status).
    pub last_error: Option<String>,
    /// The HTTP status of the last attempt, if one came back.
    pub last_status: Option<u16>,
    /// When the next attempt is due (RFC 3339), while pending; null when
    /// delivered, given up, or waiting for its disabled endpoint.
    #[cfg_attr(feature = "openapi", schema(format = DateTime))]
    pub next_attempt_at: Option<String>,
    /// Where it stands.
    pub state: DeliveryState,
}

/// A merchant event: what happened to a payment or refund, the `data`
/// delivered to the shop's webhook, and the delivery log.
///
/// The members are declared (and sent) in the order the server has always
/// sent them: sorted by name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(
    feature = "openapi",
    schema(example = json!({
        "created_at": "2026-11-29T22:42:32.245Z",
        "data": {"payment": {
            "amount": {"currency": "RUB", "value": "1500.00"},
            "decline_code": null,
            "id": "pay_01a2297968b375bcb36eb8e661248216",
            "reference": "order-123",
            "status": "succeeded"
        }},
        "deliveries": [{
            "attempts": 1,
            "delivered_at": "2026-11-29T22:42:32.301Z",
            "endpoint_id": "we_01a2297968b375bcb36eb8e661248216",
            "gave_up_at": null,
            "last_error": null,
            "last_status": 200,
            "next_attempt_at": null,
            "state": "delivered"
        }],
        "delivery": {
            "attempts": 1,
            "delivered_at": "2026-11-29T22:42:32.301Z",
            "gave_up_at": null,
            "last_error": null,
            "last_status": 200,
            "next_attempt_at": null,
            "state": "delivered"
        },
        "id": "evt_01a2297968c07d11b0f4c7e8e0d6a3b1",
        "object": "event",
        "livemode": true,
        "payment_id": "pay_01a2297968b375bcb36eb8e661248216",
        "refund_id": null,
        "type": "payment.succeeded"
    }))
)]
pub struct Event {
    /// When it was written (RFC 3339), with the transition it tells of.
    #[cfg_attr(
        feature = "openapi",
        schema(format = DateTime, example = "2026-11-29T22:42:32.245Z")
    )]
    pub created_at: String,
    /// The event's `data`, exactly as delivered: `{"payment": {...}}` or
    /// `{"refund": {...}}`.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub data: Value,
    /// Its delivery to each webhook endpoint it was written for (the
    /// enabled ones whose `enabled_events` matched) or resent to.
    pub deliveries: Vec<EndpointDelivery>,
    /// The deliveries summed up: `pending` while one is, else `gave_up` if
    /// one was, else `delivered` (`pending` with no attempt while there is
    /// no delivery at all); attempts summed.
    pub delivery: EventDelivery,
    /// Its id (`evt_...`): receivers deduplicate deliveries by it.
    pub id: String,
    /// `true` for an object of live mode (real money), `false` for test
    /// mode's (the simulator's). Absent only in answers stored before test
    /// mode existed, which were all live.
    #[serde(default = "crate::live")]
    pub livemode: bool,
    /// Always `event`.
    pub object: EventObject,
    /// The payment it is about (for a refund: the refunded payment).
    pub payment_id: String,
    /// The refund it is about, for refund events.
    pub refund_id: Option<String>,
    /// What happened.
    #[serde(rename = "type")]
    pub event_type: EventType,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::List;

    /// The declared order is the sorted order the server has always sent
    /// (through `serde_json::Value`): both give the same bytes.
    #[test]
    fn an_event_list_serializes_sorted() {
        let event = Event {
            created_at: "2026-11-29T22:42:32.245Z".into(),
            data: serde_json::json!({"payment": {"id": "pay_1", "status": "succeeded"}}),
            deliveries: vec![EndpointDelivery {
                attempts: 1,
                delivered_at: Some("2026-11-29T22:42:32.301Z".into()),
                endpoint_id: "we_1".into(),
                gave_up_at: None,
                last_error: None,
                last_status: Some(200),
                next_attempt_at: None,
                state: DeliveryState::Delivered,
            }],
            delivery: EventDelivery {
                attempts: 1,
                delivered_at: Some("2026-11-29T22:42:32.301Z".into()),
                gave_up_at: None,
                last_error: None,
                last_status: Some(200),
                next_attempt_at: None,
                state: DeliveryState::Delivered,
            },
            id: "evt_1".into(),
            livemode: true,
            object: EventObject::Event,
            payment_id: "pay_1".into(),
            refund_id: None,
            event_type: EventType::PaymentSucceeded,
        };
        let list = List::page(vec![event], true);
        let direct = serde_json::to_string(&list).unwrap();
        let sorted = serde_json::to_string(&serde_json::to_value(&list).unwrap()).unwrap();
        assert_eq!(direct, sorted);
        assert!(direct.contains(r#""type":"payment.succeeded""#), "{direct}");
        let back: List<Event> = serde_json::from_str(&direct).unwrap();
        assert_eq!(back, list);
    }
}
