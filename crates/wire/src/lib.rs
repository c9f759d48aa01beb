//! # chargeonce-wire
//!
//! The HTTP contract of chargeonce, written once: what the server sends and
//! the client reads.
//!
//! - [`ProblemCode`]: every stable `code` of an error answer, with its HTTP
//!   status and title ([`code`]);
//! - [`Problem`]: the RFC 9457 problem document ([`problem`]);
//! - the resources: [`Payment`], [`Refund`], [`Event`], with [`Amount`], and
//!   the [`List`] envelope, an [`IdempotencyKeyInfo`] as introspection shows it,
//!   and a payment's [`PaymentHistory`];
//! - a shop's [`ApiKey`] and the bodies that make, roll and revoke one
//!   ([`api_key`]);
//! - the request bodies: [`CreatePayment`], [`CreateRefund`] ([`request`]).
//!
//! The types are plain owned serde types, with no domain rules: the server
//! converts its domain types into them, the client converts them into its
//! public model. A resource's fields are declared in the order the server
//! sends them, so serializing one gives the bytes the server sends (stored
//! answers are replayed byte for byte).
//!
//! With the `openapi` feature, every public type derives `utoipa::ToSchema`.
//!
//! ```
//! use chargeonce_wire::{Payment, PaymentStatus, ProblemCode};
//!
//! let body = r#"{"id":"pay_01a2297968b375bcb36eb8e661248216","object":"payment","livemode":true,"shop_id":"demo","status":"succeeded","amount":{"value":"1500.00","currency":"RUB"},"reference":"order-123","provider_payment_id":"ch_01a2297968b7769e806e9688e92895b9","decline_code":null,"created_at":"2026-11-29T22:42:32.243Z","amount_refunded":{"value":"0.00","currency":"RUB"},"refund_status":"none","metadata":{"order_id":"6735"},"capture_method":"automatic","amount_capturable":{"value":"0.00","currency":"RUB"},"amount_captured":{"value":"1500.00","currency":"RUB"},"authorization_expires_at":null}"#;
//! let payment: Payment = serde_json::from_str(body).unwrap();
//! assert_eq!(payment.status, PaymentStatus::Succeeded);
//! assert_eq!(serde_json::to_string(&payment).unwrap(), body);
//!
//! assert_eq!(ProblemCode::parse("payment_not_refundable", 409), Some(ProblemCode::PaymentNotYetRefundable));
//! assert_eq!(ProblemCode::PaymentNotRefundable.status(), 422);
//! ```

pub mod amount;
pub mod api_key;
pub mod capture;
pub mod code;
pub mod event;
pub mod history;
pub mod key;
pub mod list;
pub mod payment;
pub mod problem;
pub mod refund;
pub mod request;
pub mod webhook_endpoint;

pub use amount::Amount;
pub use api_key::{
    ApiKey, ApiKeyObject, ApiKeyScope, ApiKeyState, CreateApiKey, RevokeApiKey, RollApiKey,
};
pub use capture::{Capture, CaptureObject};
pub use code::ProblemCode;
pub use event::{DeliveryState, EndpointDelivery, Event, EventDelivery, EventObject, EventType};
pub use history::{
    CaptureStatus, HistoryAcquirerCall, HistoryCallOutcome, HistoryEntry, HistoryEvent, HistoryKey,
    HistorySettledBy, HistoryTally, PaymentHistory, PaymentHistoryObject, ReleaseReason,
};
pub use key::{
    IdempotencyKeyInfo, IdempotencyKeyObject, KeyLease, KeyRecoveryPoint, KeyRequest, KeyState,
};
pub use list::{List, ListObject};
pub use payment::{CaptureMethod, Payment, PaymentObject, PaymentRefundStatus, PaymentStatus};
pub use problem::{PROBLEM_JSON, PROBLEM_TYPE_PREFIX, Problem};
pub use refund::{Refund, RefundObject, RefundStatus};
pub use request::{
    CancelPayment, CreateCapture, CreatePayment, CreateRefund, PaymentMethod, VoidPayment,
};
pub use webhook_endpoint::{
    CreateWebhookEndpoint, ResendEvent, RollWebhookEndpointSecret, UpdateWebhookEndpoint,
    WebhookEndpoint, WebhookEndpointObject,
};

/// The mode of an object whose answer says none (see `livemode` on each
/// object): stored before test mode existed, so live.
fn live() -> bool {
    true
}
