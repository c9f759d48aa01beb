//! # chargeonce-core
//!
//! The heart of chargeonce: the domain types of an idempotent payment API and the
//! engine that makes "charged exactly once" true. This crate knows nothing of HTTP
//! or of any SQL dialect: it speaks to a [`Store`] and an
//! [`Acquirer`] through traits, and hands rendered responses
//! back as opaque bytes ([`StoredResponse`]).
//!
//! The engine follows Stripe's and Brandur Leach's *atomic phases*:
//!
//! 1. **claim** — one store transaction inserts the key row and the payment row
//!    (or finds the key and decides: replay, in progress, mismatch, take-over);
//! 2. **acquirer call** — no transaction open, with an acquirer key fixed in phase 1;
//! 3. **finish** — one store transaction saves the acquirer's answer and the final
//!    response, fenced by the lease token.
//!
//! ```
//! use chargeonce_core::{Fingerprint, IdempotencyKey, Money};
//!
//! let key = IdempotencyKey::from_header(br#""order-123-pay""#).unwrap();
//! assert_eq!(key, IdempotencyKey::from_header(b"order-123-pay").unwrap());
//!
//! let a = serde_json::json!({"b": 1, "a": "x"});
//! let b: serde_json::Value = serde_json::from_str(r#"{ "a":"x",  "b":1 }"#).unwrap();
//! assert_eq!(
//!     Fingerprint::compute("POST", "/v1/payments", &a).unwrap(),
//!     Fingerprint::compute("POST", "/v1/payments", &b).unwrap(),
//! );
//!
//! let amount = Money::parse("1500.00", "RUB").unwrap();
//! assert_eq!(amount.minor_units(), 150_000);
//! assert_eq!(amount.to_decimal_string(), "1500.00");
//! ```

pub mod acquirer;
pub mod acquirers;
pub mod api_key;
pub mod authorization;
pub mod capture;
mod chain;
pub mod endpoint;
pub mod engine;
pub mod events;
pub mod findings;
pub mod fingerprint;
pub mod history;
mod id;
pub mod key;
pub mod keyring;
pub mod metadata;
pub mod money;
pub mod observe;
pub mod payment;
pub mod refund;
pub mod shop;
pub mod store;
pub mod webhook;

pub use acquirer::{
    Acquirer, AcquirerCapture, AcquirerCharge, AcquirerError, AcquirerLedger, AcquirerRefund,
    CaptureRequest, CaptureSettlement, ChargeRequest, ChargeResult, LedgerCursor, RefundRequest,
    VoidRequest, VoidSettlement,
};
pub use acquirers::Acquirers;
pub use authorization::{CaptureId, CaptureMethod};
pub use capture::{Capture, CaptureClaimRefusal, CaptureStatus, NewCapture, ReleaseClaimRefusal};
pub use chain::Chain;
pub use engine::{
    ConfigError, Engine, EngineConfig, EngineError, Expiry, Outcome, Render, Rendered,
    cancel_refund_key,
};
pub use fingerprint::Fingerprint;
pub use key::{IdempotencyKey, KeyError};
pub use metadata::{Metadata, MetadataError};
pub use money::{Currency, Money, MoneyError};
pub use observe::{AcquirerCall, AcquirerOutcomeKind, CompleterResult, NoObserver, Observer};
pub use payment::{
    AcquirerKey, CardToken, DEFAULT_AUTHORIZATION_TTL, NewPayment, Payment, PaymentCapture,
    PaymentId, PaymentRequest, PaymentStatus, Reference, Settlement, ShownStatus, ValidationError,
};
pub use refund::{NewRefund, Refund, RefundId, RefundRefusal, RefundSettlement, RefundStatus};
pub use shop::{InvalidShopSecret, SecretHash, ShopId, ShopSecret};
pub use store::{
    Acquired, Authorizations, BoxError, CancelClaim, CaptureClaim, Claim, ClaimRequest, Cursor,
    EventRecorded, FinishOutcome, Health, InboundEvent, KeyInfo, KeyLease, KeyRecord, KeyTiming,
    Keys, Lease, LeaseToken, MAX_PAGE_LIMIT, Outbox, Page, PageLimit, PageRequest, PaymentFilter,
    Payments, Reconciliation, RecoveryPoint, RefundAnswer, RefundClaim, Refunds, ReleaseClaim,
    SettleOutcome, Shops, StalledKey, Store, StoreError, StoredResponse, WebhookEndpoints,
};
