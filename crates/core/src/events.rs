//! Merchant events: what the service tells a shop about its payments and
//! refunds, through a transactional outbox.
//!
//! A store writes a [`NewEvent`] in the same transaction as the state change
//! it reports (a payment settling, a refund ending), and only when that
//! transition actually happened, so there is exactly one event per
//! transition and none for a change that rolled back. A relay then delivers
//! the stored bytes to the shop's webhook URL, at least once, signed with the
//! shop's [`WebhookSecret`] in the scheme of
//! [`crate::webhook`], with the same event id on every attempt: the receiver
//! deduplicates on it.
//!
//! ```
//! use chargeonce_core::events::{EventId, EventType};
//!
//! let id = EventId::generate();
//! assert!(id.as_str().starts_with("evt_"));
//! assert_eq!(EventId::parse(id.as_str()).unwrap(), id);
//! assert_eq!(EventType::parse("refund.succeeded"), Some(EventType::RefundSucceeded));
//! ```

use std::fmt;
use std::time::Duration;

use serde::Serialize;
use time::OffsetDateTime;
use uuid::Uuid;

use crate::endpoint::{Destination, EndpointId};
use crate::webhook::WebhookSecret;
use crate::{
    Capture, CaptureId, CaptureStatus, Payment, PaymentId, PaymentStatus, Refund, RefundId,
    RefundStatus, ShopId,
};

/// The id of a merchant event: `evt_` and a UUIDv7, the same on every delivery.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EventId(String);

/// An event id that is not `evt_` and 32 lowercase hex digits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not an event id")]
pub struct InvalidEventId;

impl EventId {
    /// A fresh, time-ordered id.
    pub fn generate() -> Self {
        Self(format!("evt_{}", Uuid::now_v7().simple()))
    }

    /// Parses an id as the API shows it.
    pub fn parse(id: &str) -> Result<Self, InvalidEventId> {
        let hex = id.strip_prefix("evt_").ok_or(InvalidEventId)?;
        if hex.len() == 32
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
        {
            Ok(Self(id.to_owned()))
        } else {
            Err(InvalidEventId)
        }
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for EventId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What a merchant event reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    /// A payment moved money.
    PaymentSucceeded,
    /// A payment was declined.
    PaymentDeclined,
    /// A pending payment was canceled (nothing charged).
    PaymentCanceled,
    /// A refund gave money back.
    RefundSucceeded,
    /// The acquirer refused a refund.
    RefundFailed,
    /// A capture took part of an authorization.
    CaptureSucceeded,
    /// The acquirer refused a capture; its reservation was given back.
    CaptureFailed,
    /// A payment with manual capture was authorized: its amount is held
    /// for captures.
    PaymentAuthorized,
    /// An authorization's rest was released by a void.
    PaymentVoided,
    /// An authorization's rest was released because it was not captured
    /// in time.
    PaymentExpired,
}

impl EventType {
    /// As sent and stored (`payment.succeeded`, ...).
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::PaymentSucceeded => "payment.succeeded",
            Self::PaymentDeclined => "payment.declined",
            Self::PaymentCanceled => "payment.canceled",
            Self::RefundSucceeded => "refund.succeeded",
            Self::RefundFailed => "refund.failed",
            Self::CaptureSucceeded => "capture.succeeded",
            Self::CaptureFailed => "capture.failed",
            Self::PaymentAuthorized => "payment.authorized",
            Self::PaymentVoided => "payment.voided",
            Self::PaymentExpired => "payment.expired",
        }
    }

    /// Parses a stored or requested type.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "payment.succeeded" => Some(Self::PaymentSucceeded),
            "payment.declined" => Some(Self::PaymentDeclined),
            "payment.canceled" => Some(Self::PaymentCanceled),
            "refund.succeeded" => Some(Self::RefundSucceeded),
            "refund.failed" => Some(Self::RefundFailed),
            "capture.succeeded" => Some(Self::CaptureSucceeded),
            "capture.failed" => Some(Self::CaptureFailed),
            "payment.authorized" => Some(Self::PaymentAuthorized),
            "payment.voided" => Some(Self::PaymentVoided),
            "payment.expired" => Some(Self::PaymentExpired),
            _ => None,
        }
    }
}

/// An event to insert, built from the row a transition just wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewEvent {
    /// Its id.
    pub id: EventId,
    /// The shop it belongs to (and is delivered to).
    pub shop_id: ShopId,
    /// What happened.
    pub event_type: EventType,
    /// The payment it is about (for a refund: the refunded payment). Events
    /// of one payment are delivered in the order they were written.
    pub payment_id: PaymentId,
    /// The refund it is about, for refund events.
    pub refund_id: Option<RefundId>,
    /// The capture it is about, for capture events.
    pub capture_id: Option<CaptureId>,
    /// The JSON body delivered, exactly these bytes on every attempt.
    pub payload: Vec<u8>,
}

/// A merchant event's body, as sent and signed. The fields are in
/// alphabetical order, the order the body has always had (it was a
/// `serde_json::Value`, whose maps sort their keys), so a body's bytes do not
/// depend on how it is built; built from borrowed fields, it allocates only
/// its bytes.
#[derive(Serialize)]
struct Body<'a, D> {
    created: i64,
    data: D,
    id: &'a str,
    /// `false` for test mode's events (see [`crate::ShopId::mode`]).
    livemode: bool,
    #[serde(rename = "type")]
    event_type: &'a str,
}

/// An amount in a body: its decimal string and currency.
#[derive(Serialize)]
struct AmountBody<'a> {
    currency: &'a str,
    value: String,
}

impl<'a> AmountBody<'a> {
    fn of(amount: &'a crate::Money) -> Self {
        Self {
            currency: amount.currency().code(),
            value: amount.to_decimal_string(),
        }
    }
}

/// `data` of a payment's event.
#[derive(Serialize)]
struct PaymentData<'a> {
    payment: PaymentBody<'a>,
}

/// A payment in a body.
#[derive(Serialize)]
struct PaymentBody<'a> {
    amount: AmountBody<'a>,
    decline_code: Option<&'a str>,
    id: &'a str,
    /// The shop's own pairs (`{}` when none): what a merchant matches the
    /// event to its order by.
    metadata: &'a std::collections::BTreeMap<String, String>,
    reference: &'a str,
    status: &'a str,
}

/// `data` of a capture's event.
#[derive(Serialize)]
struct CaptureData<'a> {
    capture: CaptureBody<'a>,
}

/// A capture in a body.
#[derive(Serialize)]
struct CaptureBody<'a> {
    amount: AmountBody<'a>,
    failure_code: Option<&'a str>,
    r#final: bool,
    id: &'a str,
    payment_id: &'a str,
    reference: &'a str,
    status: &'a str,
}

/// `data` of a refund's event.
#[derive(Serialize)]
struct RefundData<'a> {
    refund: RefundBody<'a>,
}

/// A refund in a body.
#[derive(Serialize)]
struct RefundBody<'a> {
    amount: AmountBody<'a>,
    failure_code: Option<&'a str>,
    id: &'a str,
    payment_id: &'a str,
    reference: &'a str,
    status: &'a str,
}

impl NewEvent {
    /// The event of a payment that just settled; `None` while it is pending.
    /// An authorization that succeeded is `payment.authorized` (status
    /// `authorized`): nothing was taken yet.
    ///
    /// Body: `{"id", "type", "livemode", "created" (unix ms), "data": {"payment": {...}}}`.
    pub fn payment_settled(payment: &Payment) -> Option<Self> {
        let manual = payment.capture.method() == crate::CaptureMethod::Manual;
        let (event_type, status) = match payment.status {
            PaymentStatus::Succeeded if manual => (EventType::PaymentAuthorized, "authorized"),
            PaymentStatus::Succeeded => (EventType::PaymentSucceeded, "succeeded"),
            PaymentStatus::Declined => (EventType::PaymentDeclined, "declined"),
            PaymentStatus::Canceled => (EventType::PaymentCanceled, "canceled"),
            PaymentStatus::Pending => return None,
        };
        Some(Self::of_payment(payment, event_type, status))
    }

    /// A payment's event of `event_type`, its body showing `status`.
    fn of_payment(payment: &Payment, event_type: EventType, status: &str) -> Self {
        let id = EventId::generate();
        let payload = body(
            &id,
            &payment.shop_id,
            event_type,
            PaymentData {
                payment: PaymentBody {
                    amount: AmountBody::of(&payment.amount),
                    decline_code: payment.decline_code.as_deref(),
                    id: payment.id.as_str(),
                    metadata: payment.metadata.as_map(),
                    reference: payment.reference.as_str(),
                    status,
                },
            },
        );
        Self {
            id,
            shop_id: payment.shop_id.clone(),
            event_type,
            payment_id: payment.id.clone(),
            refund_id: None,
            capture_id: None,
            payload,
        }
    }

    /// The event of a refund that just ended; `None` while it is pending.
    /// `reference` is the refunded payment's order reference.
    pub fn refund_settled(refund: &Refund, reference: &str) -> Option<Self> {
        let event_type = match refund.status {
            RefundStatus::Succeeded => EventType::RefundSucceeded,
            RefundStatus::Failed => EventType::RefundFailed,
            RefundStatus::Pending => return None,
        };
        let id = EventId::generate();
        let payload = body(
            &id,
            &refund.shop_id,
            event_type,
            RefundData {
                refund: RefundBody {
                    amount: AmountBody::of(&refund.amount),
                    failure_code: refund.failure_code.as_deref(),
                    id: refund.id.as_str(),
                    payment_id: refund.payment_id.as_str(),
                    reference,
                    status: refund.status.as_str(),
                },
            },
        );
        Some(Self {
            id,
            shop_id: refund.shop_id.clone(),
            event_type,
            payment_id: refund.payment_id.clone(),
            refund_id: Some(refund.id.clone()),
            capture_id: None,
            payload,
        })
    }

    /// The event of an authorization whose rest was just released (its
    /// hold [`Hold::Released`](crate::authorization::Hold::Released));
    /// `None` for any other payment. The payment's status in the body is
    /// the hold's: `voided` or `expired` with nothing captured, else
    /// `succeeded`.
    pub fn authorization_released(payment: &Payment) -> Option<Self> {
        use crate::authorization::{Hold, ReleaseReason};
        let hold = payment.authorization()?;
        let event_type = match hold.hold() {
            Hold::Released(ReleaseReason::Void) => EventType::PaymentVoided,
            Hold::Released(ReleaseReason::Expiry) => EventType::PaymentExpired,
            _ => return None,
        };
        Some(Self::of_payment(
            payment,
            event_type,
            hold.status().as_str(),
        ))
    }

    /// The event of a capture that just ended; `None` while it is pending.
    /// `reference` is the captured payment's order reference.
    pub fn capture_settled(capture: &Capture, reference: &str) -> Option<Self> {
        let event_type = match capture.status {
            CaptureStatus::Succeeded => EventType::CaptureSucceeded,
            CaptureStatus::Failed => EventType::CaptureFailed,
            CaptureStatus::Pending => return None,
        };
        let id = EventId::generate();
        let payload = body(
            &id,
            &capture.shop_id,
            event_type,
            CaptureData {
                capture: CaptureBody {
                    amount: AmountBody::of(&capture.amount),
                    failure_code: capture.failure_code.as_deref(),
                    r#final: capture.last,
                    id: capture.id.as_str(),
                    payment_id: capture.payment_id.as_str(),
                    reference,
                    status: capture.status.as_str(),
                },
            },
        );
        Some(Self {
            id,
            shop_id: capture.shop_id.clone(),
            event_type,
            payment_id: capture.payment_id.clone(),
            refund_id: None,
            capture_id: Some(capture.id.clone()),
            payload,
        })
    }
}

/// The bytes of an event's body, created now (unix milliseconds).
fn body<D: Serialize>(
    id: &EventId,
    shop_id: &crate::ShopId,
    event_type: EventType,
    data: D,
) -> Vec<u8> {
    let created = OffsetDateTime::now_utc().unix_timestamp_nanos() / 1_000_000;
    let body = Body {
        // Unix milliseconds fit an i64 for 292 million years.
        created: i64::try_from(created).unwrap_or(i64::MAX),
        data,
        id: id.as_str(),
        livemode: shop_id.is_live(),
        event_type: event_type.as_str(),
    };
    // Strings, numbers and options: serialising cannot fail.
    serde_json::to_vec(&body).unwrap_or_default()
}

/// Where an event's delivery stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeliveryState {
    /// Not acknowledged yet; the relay will (re)try it.
    Pending,
    /// The shop answered 2xx.
    Delivered,
    /// Retried until the give-up time without a 2xx; resend it by hand.
    GaveUp,
}

impl DeliveryState {
    /// As the API shows it.
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Delivered => "delivered",
            Self::GaveUp => "gave_up",
        }
    }
}

/// `next_attempt_at` of a delivery whose endpoint is disabled
/// (9999-12-31T23:59:59Z, in unix milliseconds): parked, so the relay's scan
/// of due deliveries never reads it. Enabling the endpoint makes it due.
pub const PARKED_UNTIL_MS: i64 = 253_402_300_799_000;

/// The delivery log of one event to one endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// Delivery attempts made (each a POST to the endpoint).
    pub attempts: u32,
    /// When the next attempt is due (unix ms), while pending;
    /// [`PARKED_UNTIL_MS`] while the endpoint is disabled.
    pub next_attempt_at_ms: i64,
    /// When the endpoint acknowledged it (unix ms).
    pub delivered_at_ms: Option<i64>,
    /// When the relay gave up (unix ms).
    pub gave_up_at_ms: Option<i64>,
    /// The HTTP status of the last attempt, if one came back.
    pub last_status: Option<u16>,
    /// Why the last attempt failed (a transport error, or the status).
    pub last_error: Option<String>,
}

impl Delivery {
    /// Where it stands.
    pub fn state(&self) -> DeliveryState {
        if self.delivered_at_ms.is_some() {
            DeliveryState::Delivered
        } else if self.gave_up_at_ms.is_some() {
            DeliveryState::GaveUp
        } else {
            DeliveryState::Pending
        }
    }

    /// When the next attempt is due, while one is (pending, not parked).
    pub fn next_attempt(&self) -> Option<i64> {
        (self.state() == DeliveryState::Pending && self.next_attempt_at_ms < PARKED_UNTIL_MS)
            .then_some(self.next_attempt_at_ms)
    }
}

/// An event's delivery to one of the shop's endpoints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointDelivery {
    /// The endpoint.
    pub endpoint_id: EndpointId,
    /// Its log.
    pub delivery: Delivery,
}

/// A stored event with its delivery log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// Its id.
    pub id: EventId,
    /// Its shop.
    pub shop_id: ShopId,
    /// What happened.
    pub event_type: EventType,
    /// The payment it is about.
    pub payment_id: PaymentId,
    /// The refund it is about, for refund events.
    pub refund_id: Option<RefundId>,
    /// The JSON body, as delivered.
    pub payload: Vec<u8>,
    /// When it was written (unix ms), in the transaction of its transition.
    pub created_at_ms: i64,
    /// Its deliveries, one per endpoint it was written for (or resent to),
    /// in endpoint id order; empty when no endpoint wanted it.
    pub deliveries: Vec<EndpointDelivery>,
}

impl Event {
    /// The deliveries summed up: pending while one is, else given up if
    /// one was, else delivered (pending, with no attempt, when there is
    /// none). Attempts are summed; the times and the last answer are those
    /// of a delivery in the state shown (the earliest next attempt, the
    /// latest delivery or give-up).
    pub fn delivery(&self) -> Delivery {
        let Some(state) = self
            .deliveries
            .iter()
            .map(|d| d.delivery.state())
            .min_by_key(|s| match s {
                DeliveryState::Pending => 0,
                DeliveryState::GaveUp => 1,
                DeliveryState::Delivered => 2,
            })
        else {
            return Delivery {
                attempts: 0,
                next_attempt_at_ms: PARKED_UNTIL_MS,
                delivered_at_ms: None,
                gave_up_at_ms: None,
                last_status: None,
                last_error: None,
            };
        };
        let attempts = self
            .deliveries
            .iter()
            .map(|d| d.delivery.attempts)
            .fold(0_u32, u32::saturating_add);
        let shown = self
            .deliveries
            .iter()
            .map(|d| &d.delivery)
            .filter(|d| d.state() == state)
            .max_by_key(|d| match state {
                DeliveryState::Pending => -d.next_attempt_at_ms,
                DeliveryState::GaveUp => d.gave_up_at_ms.unwrap_or(0),
                DeliveryState::Delivered => d.delivered_at_ms.unwrap_or(0),
            });
        match shown {
            Some(shown) => Delivery {
                attempts,
                ..shown.clone()
            },
            None => Delivery {
                attempts,
                next_attempt_at_ms: PARKED_UNTIL_MS,
                delivered_at_ms: None,
                gave_up_at_ms: None,
                last_status: None,
                last_error: None,
            },
        }
    }
}

/// Which of a shop's events to list: newest first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventQuery {
    /// At most this many.
    pub limit: u32,
    /// Only events older than this one (the last of the previous page).
    pub starting_after: Option<EventId>,
    /// Only events of this type.
    pub event_type: Option<EventType>,
}

/// The operator's webhook endpoint of a shop (`shops set-webhook`): where
/// its events go and the secret they are signed with.
#[derive(Debug, Clone)]
pub struct WebhookEndpoint {
    /// The URL events are POSTed to.
    pub url: String,
    /// The signing secret (`Debug` never shows it).
    pub secret: WebhookSecret,
}

/// A delivery the relay claimed for one attempt: the event and where it goes.
#[derive(Debug, Clone)]
pub struct DueEvent {
    /// The event (its `deliveries` not read).
    pub event: Event,
    /// The endpoint, with the secrets that sign.
    pub destination: Destination,
    /// Attempts made of this delivery before this one.
    pub attempts: u32,
}

/// How one delivery attempt ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttemptOutcome {
    /// The shop answered 2xx.
    Delivered {
        /// The status.
        status: u16,
    },
    /// No 2xx: a transport error, a timeout, or another status.
    Failed {
        /// The status, if an answer came.
        status: Option<u16>,
        /// A short description (never a secret).
        error: String,
        /// When to try again, from now.
        retry_in: Duration,
        /// Give up once this long has passed since the event became due
        /// (written, or resent by hand).
        give_up_after: Duration,
    },
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// The body in the form it had when it was built as a `serde_json::Value`
    /// (maps sort their keys), for the test below.
    fn value_form(event: &NewEvent, data: serde_json::Value) -> Vec<u8> {
        let sent: serde_json::Value = serde_json::from_slice(&event.payload).unwrap();
        serde_json::to_vec(&serde_json::json!({
            "id": event.id.as_str(),
            "type": event.event_type.as_str(),
            "created": sent["created"],
            // The shops of these tests are live.
            "livemode": true,
            "data": data,
        }))
        .unwrap()
    }

    /// A test mode's event says so in its body; a live one's says live.
    #[test]
    fn bodies_say_their_mode() {
        use crate::api_key::Mode;
        use crate::{IdempotencyKey, Money, NewPayment, PaymentRequest, Reference};
        let live = ShopId::new("shop").unwrap();
        for (shop, livemode) in [(live.clone(), true), (live.in_mode(Mode::Test), false)] {
            let mut payment = NewPayment::new(
                shop,
                IdempotencyKey::new("k1").unwrap(),
                PaymentRequest {
                    amount: Money::parse("15.00", "RUB").unwrap(),
                    reference: Reference::new("order-1").unwrap(),
                    token: crate::CardToken::new("tok_ok").unwrap(),
                    metadata: crate::Metadata::default(),
                    capture_method: crate::CaptureMethod::Automatic,
                },
            )
            .to_payment();
            payment.status = PaymentStatus::Succeeded;
            let event = NewEvent::payment_settled(&payment).unwrap();
            let sent: serde_json::Value = serde_json::from_slice(&event.payload).unwrap();
            assert_eq!(sent["livemode"], livemode, "{sent}");
        }
    }

    /// A body's bytes are the form they had when built as a JSON value
    /// (keys sorted), `livemode` added with test mode: what merchants'
    /// signature checks see.
    #[test]
    fn bodies_keep_their_bytes() {
        use crate::{IdempotencyKey, Money, NewPayment, PaymentRequest, Reference};
        let mut payment = NewPayment::new(
            ShopId::new("shop").unwrap(),
            IdempotencyKey::new("k1").unwrap(),
            PaymentRequest {
                amount: Money::parse("15.00", "RUB").unwrap(),
                reference: Reference::new("order-\"1\"").unwrap(),
                token: crate::CardToken::new("tok_ok").unwrap(),
                metadata: crate::Metadata::new(
                    [("a\"b".to_owned(), "é\n".to_owned())]
                        .into_iter()
                        .collect(),
                )
                .unwrap(),
                capture_method: crate::CaptureMethod::Automatic,
            },
        )
        .to_payment();
        for decline_code in [None, Some("card_declined".to_owned())] {
            payment.status = if decline_code.is_some() {
                PaymentStatus::Declined
            } else {
                PaymentStatus::Succeeded
            };
            payment.decline_code = decline_code.clone();
            let event = NewEvent::payment_settled(&payment).unwrap();
            let data = serde_json::json!({"payment": {
                "id": payment.id.as_str(),
                "reference": payment.reference.as_str(),
                "amount": {"value": "15.00", "currency": "RUB"},
                "status": payment.status.as_str(),
                "decline_code": decline_code,
                "metadata": {"a\"b": "é\n"},
            }});
            assert_eq!(
                String::from_utf8(event.payload.clone()).unwrap(),
                String::from_utf8(value_form(&event, data)).unwrap()
            );
        }
        let refund = Refund {
            id: RefundId::generate(),
            shop_id: payment.shop_id.clone(),
            payment_id: payment.id.clone(),
            idempotency_key: IdempotencyKey::new("r1").unwrap(),
            amount: Money::parse("5.50", "RUB").unwrap(),
            status: RefundStatus::Failed,
            acquirer_key: payment.acquirer_key.clone(),
            provider_refund_id: None,
            failure_code: Some("too_late".into()),
            created_at: payment.created_at,
        };
        let event = NewEvent::refund_settled(&refund, "order-1").unwrap();
        let data = serde_json::json!({"refund": {
            "id": refund.id.as_str(),
            "payment_id": refund.payment_id.as_str(),
            "reference": "order-1",
            "amount": {"value": "5.50", "currency": "RUB"},
            "status": "failed",
            "failure_code": "too_late",
        }});
        assert_eq!(event.payload, value_form(&event, data));
    }

    #[test]
    fn ids_parse_only_their_own_shape() {
        assert!(EventId::parse("evt_").is_err());
        assert!(EventId::parse("pay_0123456789abcdef0123456789abcdef").is_err());
        assert!(EventId::parse("evt_0123456789ABCDEF0123456789abcdef").is_err());
        assert!(EventId::parse("evt_0123456789abcdef0123456789abcdef").is_ok());
    }

    #[test]
    fn types_round_trip() {
        for t in [
            EventType::PaymentSucceeded,
            EventType::PaymentDeclined,
            EventType::PaymentCanceled,
            EventType::RefundSucceeded,
            EventType::RefundFailed,
            EventType::CaptureSucceeded,
            EventType::CaptureFailed,
            EventType::PaymentAuthorized,
            EventType::PaymentVoided,
            EventType::PaymentExpired,
        ] {
            assert_eq!(EventType::parse(t.as_str()), Some(t));
        }
        assert_eq!(EventType::parse("payment.pending"), None);
    }
}
