//! Acquirer webhooks: the event the acquirer sends, and its signature. The
//! same signature scheme signs the merchant events chargeonce sends to shops
//! ([`crate::events`]), with each shop's own secret.
//!
//! The signature is HMAC-SHA256 over `"{timestamp}.{body}"` with a secret
//! shared by the acquirer and the service, sent as `t={timestamp},v1={hex}`
//! (the scheme of Stripe and Standard Webhooks). The timestamp is signed, so
//! an old event cannot be replayed with a new one; a verifier refuses
//! timestamps more than a tolerance (5 minutes) away from its clock. A sender
//! signs every delivery attempt afresh.
//!
//! ```
//! use std::time::Duration;
//! use chargeonce_core::webhook::{WebhookSecret, sign, verify, SignatureError};
//!
//! let secret = WebhookSecret::new("whsec_test");
//! let body = br#"{"id":"evt_1"}"#;
//! let header = sign(&secret, 1_700_000_000, body);
//! let tolerance = Duration::from_secs(300);
//! assert_eq!(verify(&secret, &header, body, 1_700_000_100, tolerance), Ok(()));
//! assert_eq!(
//!     verify(&secret, &header, b"{}", 1_700_000_100, tolerance),
//!     Err(SignatureError::Mismatch)
//! );
//! assert!(matches!(
//!     verify(&secret, &header, body, 1_700_000_400, tolerance),
//!     Err(SignatureError::OutsideTolerance { .. })
//! ));
//! ```

use std::fmt;
use std::time::Duration;

use hmac::{Hmac, KeyInit, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

/// The HTTP header the signature travels in.
pub const SIGNATURE_HEADER: &str = "chargeonce-signature";

/// How far a signed timestamp may be from the verifier's clock: 5 minutes.
pub const TOLERANCE: Duration = Duration::from_secs(300);

/// The shared secret of webhook signatures. `Debug` never shows it.
#[derive(Clone)]
pub struct WebhookSecret(Vec<u8>);

impl WebhookSecret {
    /// Wraps a secret given by the operator.
    pub fn new(secret: impl Into<String>) -> Self {
        Self(secret.into().into_bytes())
    }

    /// Prefix of generated secrets, so a leaked one is easy to recognise.
    pub const PREFIX: &'static str = "whsec_";

    /// 32 random bytes from the OS generator, hex-encoded behind [`Self::PREFIX`].
    pub fn generate() -> Self {
        use rand::RngCore;
        let mut bytes = [0_u8; 32];
        rand::rng().fill_bytes(&mut bytes);
        Self::new(format!("{}{}", Self::PREFIX, hex::encode(bytes)))
    }

    /// The clear text, to store or show once to the operator. Never log it.
    pub fn expose(&self) -> String {
        String::from_utf8_lossy(&self.0).into_owned()
    }

    fn mac(&self) -> Hmac<Sha256> {
        // HMAC takes keys of any length; this cannot fail.
        <Hmac<Sha256> as KeyInit>::new_from_slice(&self.0)
            .unwrap_or_else(|_| unreachable!("HMAC accepts any key length"))
    }
}

impl fmt::Debug for WebhookSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("WebhookSecret(***)")
    }
}

/// Why a signature was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    /// No `t=` or no `v1=` part, or a part that does not parse.
    #[error("the signature header is not `t=<unix seconds>,v1=<hex>`")]
    Malformed,
    /// No `v1` signature matches the body and timestamp.
    #[error("the signature does not match")]
    Mismatch,
    /// The signed timestamp is too far from now (a replayed or delayed event).
    #[error("the signature timestamp is {age_secs} s away from now")]
    OutsideTolerance {
        /// Seconds between the timestamp and now (either way).
        age_secs: u64,
    },
}

fn signature(secret: &WebhookSecret, timestamp: i64, body: &[u8]) -> Hmac<Sha256> {
    let mut mac = secret.mac();
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    mac
}

/// The signature header value for a body sent at `timestamp` (unix seconds).
pub fn sign(secret: &WebhookSecret, timestamp: i64, body: &[u8]) -> String {
    let tag = signature(secret, timestamp, body).finalize().into_bytes();
    format!("t={timestamp},v1={}", hex::encode(tag))
}

/// Checks a signature header against the body, in constant time, and its
/// timestamp against `now` (unix seconds). Several `v1=` parts are allowed (a
/// sender rotating secrets); one must match.
pub fn verify(
    secret: &WebhookSecret,
    header: &str,
    body: &[u8],
    now: i64,
    tolerance: Duration,
) -> Result<(), SignatureError> {
    let mut timestamp = None;
    let mut candidates = Vec::new();
    for part in header.split(',') {
        let Some((name, value)) = part.trim().split_once('=') else {
            return Err(SignatureError::Malformed);
        };
        match name {
            "t" => {
                timestamp = Some(
                    value
                        .parse::<i64>()
                        .map_err(|_| SignatureError::Malformed)?,
                )
            }
            "v1" => candidates.push(hex::decode(value).map_err(|_| SignatureError::Malformed)?),
            _ => {}
        }
    }
    let timestamp = timestamp.ok_or(SignatureError::Malformed)?;
    if candidates.is_empty() {
        return Err(SignatureError::Malformed);
    }
    let matches = candidates
        .iter()
        .any(|tag| signature(secret, timestamp, body).verify_slice(tag).is_ok());
    if !matches {
        return Err(SignatureError::Mismatch);
    }
    let age_secs = now.abs_diff(timestamp);
    if age_secs > tolerance.as_secs() {
        return Err(SignatureError::OutsideTolerance { age_secs });
    }
    Ok(())
}

/// The kinds of acquirer events.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EventKind {
    /// The acquirer has the charge and no outcome yet. Never moves a payment;
    /// it exists so that an out-of-order delivery can be told apart.
    #[serde(rename = "payment.processing")]
    Processing,
    /// The charge moved money.
    #[serde(rename = "payment.succeeded")]
    Succeeded,
    /// The charge was declined.
    #[serde(rename = "payment.declined")]
    Declined,
}

impl EventKind {
    /// The event type as sent (`payment.succeeded`, ...).
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Processing => "payment.processing",
            Self::Succeeded => "payment.succeeded",
            Self::Declined => "payment.declined",
        }
    }
}

/// An amount as events carry it: a decimal string and a currency code.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventAmount {
    /// Decimal string with the currency's minor units (`"1500.00"`).
    pub value: String,
    /// ISO 4217 code.
    pub currency: String,
}

/// The charge an event is about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EventCharge {
    /// The acquirer's charge id (our `provider_payment_id`).
    pub charge_id: String,
    /// The acquirer key we sent with the charge.
    pub acquirer_key: String,
    /// The merchant.
    pub shop_id: String,
    /// Our payment id (our reference at the acquirer).
    pub payment_id: String,
    /// The shop's order reference.
    pub reference: String,
    /// How much.
    pub amount: EventAmount,
    /// Why it was declined (`payment.declined` only).
    pub decline_code: Option<String>,
}

/// One acquirer event, as JSON:
/// `{"id": "evt_...", "type": "payment.succeeded", "created": 1700000000123, "data": {...}}`.
/// Its id stays the same across deliveries: the receiver deduplicates on it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AcquirerEvent {
    /// The event id, the same on every delivery of the event.
    pub id: String,
    /// What happened.
    #[serde(rename = "type")]
    pub kind: EventKind,
    /// When it happened, unix milliseconds by the acquirer's clock.
    pub created: i64,
    /// The charge.
    pub data: EventCharge,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    const TOLERANCE: Duration = Duration::from_secs(300);

    #[test]
    fn tolerance_boundary_and_future_timestamps() {
        let secret = WebhookSecret::new("s");
        let header = sign(&secret, 1000, b"x");
        assert_eq!(verify(&secret, &header, b"x", 1300, TOLERANCE), Ok(()));
        assert_eq!(
            verify(&secret, &header, b"x", 1301, TOLERANCE),
            Err(SignatureError::OutsideTolerance { age_secs: 301 })
        );
        assert_eq!(
            verify(&secret, &header, b"x", 699, TOLERANCE),
            Err(SignatureError::OutsideTolerance { age_secs: 301 })
        );
    }

    #[test]
    fn malformed_headers_and_other_secrets() {
        let secret = WebhookSecret::new("s");
        for bad in ["", "t=1", "v1=00", "t=x,v1=00", "t=1,v1=zz", "garbage"] {
            assert_eq!(
                verify(&secret, bad, b"x", 1, TOLERANCE),
                Err(SignatureError::Malformed),
                "{bad}"
            );
        }
        let other = sign(&WebhookSecret::new("other"), 1, b"x");
        assert_eq!(
            verify(&secret, &other, b"x", 1, TOLERANCE),
            Err(SignatureError::Mismatch)
        );
        // A rotated secret: one of two signatures matches.
        let ours = sign(&secret, 1, b"x");
        let both = format!("{other},{}", ours.trim_start_matches("t=1,"));
        assert_eq!(verify(&secret, &both, b"x", 1, TOLERANCE), Ok(()));
        assert_eq!(format!("{secret:?}"), "WebhookSecret(***)");
    }

    #[test]
    fn events_round_trip_as_json() {
        let event = AcquirerEvent {
            id: "evt_1".into(),
            kind: EventKind::Succeeded,
            created: 1,
            data: EventCharge {
                charge_id: "ch_1".into(),
                acquirer_key: "chargeonce-pay_1".into(),
                shop_id: "s".into(),
                payment_id: "pay_1".into(),
                reference: "o".into(),
                amount: EventAmount {
                    value: "1.00".into(),
                    currency: "RUB".into(),
                },
                decline_code: None,
            },
        };
        let json = serde_json::to_value(&event).unwrap();
        assert_eq!(json["type"], "payment.succeeded");
        assert_eq!(
            serde_json::from_value::<AcquirerEvent>(json).unwrap(),
            event
        );
    }
}
