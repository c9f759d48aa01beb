//! The acquirer's HTTP protocol as this adapter speaks it: the header that
//! carries our key and the refusal codes the adapter reads. The simulator
//! (`chargeonce-acquirer`) serves the same protocol and answers with these
//! codes, so both sides name them once, here.

/// The header that carries the caller's key on `POST /v1/charges` and
/// `POST /v1/refunds`.
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";

/// What the acquirer says when a key is reused with other parameters
/// (amount, currency, shop, reference or payment id), as a real provider's
/// idempotency error. Nothing definite may be concluded from it: the key's
/// first request may well have moved money, so the adapter reads it as
/// [`AcquirerError::Unknown`](chargeonce_core::AcquirerError::Unknown),
/// never as a decline.
pub const KEY_REUSED: &str = "idempotency_key_reused";

/// Refund refusal code: the refunded charge does not exist.
pub const REFUND_NO_SUCH_CHARGE: &str = "no_such_charge";

/// Refund refusal code: the refunded charge was declined.
pub const REFUND_CHARGE_DECLINED: &str = "charge_declined";

/// Refund refusal code: the refund exceeds what is left of the charge.
pub const REFUND_EXCEEDS_CHARGE: &str = chargeonce_core::acquirer::REFUND_EXCEEDS_CHARGE;

/// Capture or void refusal code: the charge is not an authorization (it was
/// charged at once, or declined).
pub const CHARGE_NOT_CAPTURABLE: &str = "charge_not_capturable";

/// Capture or void refusal code: the authorization's rest was voided.
pub const AUTHORIZATION_VOIDED: &str = chargeonce_core::acquirer::AUTHORIZATION_VOIDED;

/// Capture refusal code: the authorization was closed by its last capture
/// (or fully captured).
pub const AUTHORIZATION_CLOSED: &str = chargeonce_core::acquirer::AUTHORIZATION_CLOSED;

/// Capture refusal code: the capture exceeds what is left of the
/// authorization.
pub const CAPTURE_EXCEEDS_AUTHORIZATION: &str =
    chargeonce_core::acquirer::CAPTURE_EXCEEDS_AUTHORIZATION;

/// Void refusal code: nothing is left to release (the authorization was
/// closed by its last capture, or fully captured).
pub const NOTHING_TO_VOID: &str = chargeonce_core::acquirer::NOTHING_TO_VOID;
