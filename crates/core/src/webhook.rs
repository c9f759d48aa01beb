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
use subtle::{Choice, ConstantTimeEq};

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

    /// The shortest secret an operator may choose: 16 characters.
    pub const MIN_LEN: usize = 16;

    /// Checks a secret chosen by an operator (a flag, an environment
    /// variable): at least [`Self::MIN_LEN`] characters. Generated secrets
    /// ([`Self::generate`]) are 70.
    ///
    /// ```
    /// use chargeonce_core::webhook::WebhookSecret;
    /// assert!(WebhookSecret::chosen("whsec_0123456789abcdef").is_ok());
    /// assert!(WebhookSecret::chosen("").is_err());
    /// assert!(WebhookSecret::chosen("whsec_short").is_err());
    /// ```
    pub fn chosen(secret: impl Into<String>) -> Result<Self, ShortWebhookSecret> {
        let secret = secret.into();
        if secret.chars().count() < Self::MIN_LEN {
            return Err(ShortWebhookSecret {
                len: secret.chars().count(),
            });
        }
        Ok(Self::new(secret))
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

/// A webhook secret chosen by an operator was refused: too short (see
/// [`WebhookSecret::chosen`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "a webhook secret must be at least {} characters, this one has {len} \
     (leave it out to generate one where the command can)",
    WebhookSecret::MIN_LEN
)]
pub struct ShortWebhookSecret {
    /// Its length, in characters.
    pub len: usize,
}

/// Why a signature was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignatureError {
    /// No `t=` or no `v1=` part, a part that does not parse, a `v1=` that is
    /// not 64 hex digits, more than [`MAX_SIGNATURES`] of them, or a header
    /// longer than [`MAX_HEADER_BYTES`].
    #[error(
        "the signature header is not `t=<unix seconds>,v1=<64 hex digits>` \
         (at most {} v1 parts, at most {} bytes)",
        MAX_SIGNATURES,
        MAX_HEADER_BYTES
    )]
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

/// The most `v1=` signatures one header may carry (a sender rotating its
/// secret sends two; more is refused as [`SignatureError::Malformed`]).
pub const MAX_SIGNATURES: usize = 8;

/// The longest signature header accepted, in bytes: a timestamp and
/// [`MAX_SIGNATURES`] signatures fit with room to spare.
pub const MAX_HEADER_BYTES: usize = 1024;

/// The length of one `v1=` signature: HMAC-SHA256 in hex.
const SIGNATURE_HEX_LEN: usize = 64;

/// A parsed signature header: its timestamp and its candidate signatures.
///
/// Parsing is bounded by [`MAX_HEADER_BYTES`] and [`MAX_SIGNATURES`] and does
/// no cryptography; [`Self::check_timestamp`] is a comparison; only
/// [`Self::verify_body`] computes a MAC, exactly one whatever the number of
/// candidates. [`verify`] does the three in this order, so an unauthenticated
/// request costs at most one HMAC over a body the caller has bounded.
///
/// ```
/// use std::time::Duration;
/// use chargeonce_core::webhook::{SignatureError, SignatureHeader, WebhookSecret, sign};
///
/// let secret = WebhookSecret::new("whsec_test");
/// let header = SignatureHeader::parse(&sign(&secret, 1_000, b"{}")).unwrap();
/// assert_eq!(header.timestamp(), 1_000);
/// assert!(header.check_timestamp(1_100, Duration::from_secs(300)).is_ok());
/// assert_eq!(header.verify_body(&secret, b"{}"), Ok(()));
/// assert_eq!(SignatureHeader::parse("t=1,v1=00").unwrap_err(), SignatureError::Malformed);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignatureHeader {
    timestamp: i64,
    candidates: [[u8; 32]; MAX_SIGNATURES],
    count: usize,
}

impl SignatureHeader {
    /// Parses `t=<unix seconds>,v1=<hex>[,v1=<hex>...]`. Parts are separated
    /// by commas, with optional spaces around them; parts of other names are
    /// ignored (future schemes). Exactly one `t`, one to [`MAX_SIGNATURES`]
    /// `v1` of exactly 64 hex digits each, and at most [`MAX_HEADER_BYTES`]
    /// in all; anything else is [`SignatureError::Malformed`].
    pub fn parse(header: &str) -> Result<Self, SignatureError> {
        if header.len() > MAX_HEADER_BYTES {
            return Err(SignatureError::Malformed);
        }
        let mut timestamp = None;
        let mut candidates = [[0_u8; 32]; MAX_SIGNATURES];
        let mut count = 0;
        for part in header.split(',') {
            let Some((name, value)) = part.trim().split_once('=') else {
                return Err(SignatureError::Malformed);
            };
            match name {
                "t" => {
                    let digits = !value.is_empty()
                        && value.len() <= 19
                        && value.bytes().all(|b| b.is_ascii_digit());
                    let parsed = value.parse::<i64>().ok().filter(|_| digits);
                    if timestamp.is_some() || parsed.is_none() {
                        return Err(SignatureError::Malformed);
                    }
                    timestamp = parsed;
                }
                "v1" => {
                    if count == MAX_SIGNATURES || value.len() != SIGNATURE_HEX_LEN {
                        return Err(SignatureError::Malformed);
                    }
                    hex::decode_to_slice(value, &mut candidates[count])
                        .map_err(|_| SignatureError::Malformed)?;
                    count += 1;
                }
                _ => {}
            }
        }
        let timestamp = timestamp.ok_or(SignatureError::Malformed)?;
        if count == 0 {
            return Err(SignatureError::Malformed);
        }
        Ok(Self {
            timestamp,
            candidates,
            count,
        })
    }

    /// The signed timestamp, unix seconds.
    pub fn timestamp(&self) -> i64 {
        self.timestamp
    }

    /// How many `v1` signatures the header carries (1 to [`MAX_SIGNATURES`]).
    pub fn signatures(&self) -> usize {
        self.count
    }

    /// Refuses a timestamp more than `tolerance` away from `now` (unix
    /// seconds), either way. No cryptography: check it before the body.
    pub fn check_timestamp(&self, now: i64, tolerance: Duration) -> Result<(), SignatureError> {
        let age_secs = now.abs_diff(self.timestamp);
        if age_secs > tolerance.as_secs() {
            return Err(SignatureError::OutsideTolerance { age_secs });
        }
        Ok(())
    }

    /// Computes the body's MAC once and compares it with every candidate in
    /// constant time (all of them, whichever matches).
    pub fn verify_body(&self, secret: &WebhookSecret, body: &[u8]) -> Result<(), SignatureError> {
        let expected = signature(secret, self.timestamp, body)
            .finalize()
            .into_bytes();
        let mut matched = Choice::from(0);
        for candidate in &self.candidates[..self.count] {
            matched |= candidate.as_slice().ct_eq(expected.as_slice());
        }
        if bool::from(matched) {
            Ok(())
        } else {
            Err(SignatureError::Mismatch)
        }
    }
}

#[cfg(test)]
thread_local! {
    /// MACs computed on this thread, so tests can tell that a refusal did none.
    static MACS: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

fn signature(secret: &WebhookSecret, timestamp: i64, body: &[u8]) -> Hmac<Sha256> {
    #[cfg(test)]
    MACS.with(|macs| macs.set(macs.get() + 1));
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

/// The signature header value signed with each of `secrets` (the current
/// one first): `t=<timestamp>,v1=<hex>,v1=<hex>`. A receiver verifying with
/// any one of them accepts it ([`verify`] compares every `v1`).
///
/// ```
/// use chargeonce_core::webhook::{WebhookSecret, sign_all, verify, TOLERANCE};
///
/// let (new, old) = (WebhookSecret::new("whsec_new_0123456789"), WebhookSecret::new("whsec_old_0123456789"));
/// let header = sign_all(&[&new, &old], 1000, b"{}");
/// assert_eq!(verify(&old, &header, b"{}", 1000, TOLERANCE), Ok(()));
/// assert_eq!(verify(&new, &header, b"{}", 1000, TOLERANCE), Ok(()));
/// ```
pub fn sign_all(secrets: &[&WebhookSecret], timestamp: i64, body: &[u8]) -> String {
    let mut header = format!("t={timestamp}");
    for secret in secrets.iter().take(MAX_SIGNATURES) {
        let tag = signature(secret, timestamp, body).finalize().into_bytes();
        header.push_str(",v1=");
        header.push_str(&hex::encode(tag));
    }
    header
}

/// Checks a signature header against the body and its timestamp against
/// `now` (unix seconds), in bounded work: the header is parsed first
/// ([`SignatureHeader::parse`]: at most [`MAX_HEADER_BYTES`] and
/// [`MAX_SIGNATURES`] signatures of 64 hex digits, else
/// [`SignatureError::Malformed`]), the timestamp is checked next (no MAC for
/// a stale one: [`SignatureError::OutsideTolerance`]), and then one MAC over
/// the body is compared with every `v1=` part in constant time (several are
/// allowed for a sender rotating secrets; one must match, else
/// [`SignatureError::Mismatch`]). Bound the body before calling it: the MAC
/// reads all of it.
pub fn verify(
    secret: &WebhookSecret,
    header: &str,
    body: &[u8],
    now: i64,
    tolerance: Duration,
) -> Result<(), SignatureError> {
    let header = SignatureHeader::parse(header)?;
    header.check_timestamp(now, tolerance)?;
    header.verify_body(secret, body)
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

    fn macs() -> usize {
        MACS.with(|macs| macs.get())
    }

    #[test]
    fn a_stale_timestamp_is_refused_before_any_mac() {
        let secret = WebhookSecret::new("s");
        let body = vec![b'x'; 1 << 20];
        let header = sign(&secret, 1000, &body);
        let before = macs();
        assert_eq!(
            verify(&secret, &header, &body, 1000 + 3600, TOLERANCE),
            Err(SignatureError::OutsideTolerance { age_secs: 3600 })
        );
        // A forged, stale header is stale too: the MAC is never looked at.
        let forged = format!("t=1000,v1={}", "0".repeat(64));
        assert_eq!(
            verify(&secret, &forged, &body, 1000 + 301, TOLERANCE),
            Err(SignatureError::OutsideTolerance { age_secs: 301 })
        );
        assert_eq!(macs(), before, "no MAC for a stale timestamp");
    }

    #[test]
    fn one_mac_whatever_the_number_of_signatures() {
        let secret = WebhookSecret::new("s");
        let ours = sign(&secret, 1000, b"x");
        let wrong = format!("v1={}", "ab".repeat(32));
        let mut header = String::from("t=1000");
        for _ in 0..MAX_SIGNATURES - 1 {
            header.push(',');
            header.push_str(&wrong);
        }
        let before = macs();
        assert_eq!(
            verify(&secret, &header, b"x", 1000, TOLERANCE),
            Err(SignatureError::Mismatch)
        );
        assert_eq!(macs(), before + 1, "one MAC for seven candidates");
        // The matching one last among eight still matches.
        header.push(',');
        header.push_str(ours.trim_start_matches("t=1000,"));
        assert_eq!(SignatureHeader::parse(&header).unwrap().signatures(), 8);
        assert_eq!(verify(&secret, &header, b"x", 1000, TOLERANCE), Ok(()));
        assert_eq!(macs(), before + 2);
    }

    #[test]
    fn header_caps_refuse_without_any_mac() {
        let secret = WebhookSecret::new("s");
        let v1 = format!("v1={}", "ab".repeat(32));
        let before = macs();
        // Nine full signatures: over the cap.
        let nine = format!("t=1000{}", format!(",{v1}").repeat(MAX_SIGNATURES + 1));
        assert!(nine.len() <= MAX_HEADER_BYTES);
        assert_eq!(
            verify(&secret, &nine, b"x", 1000, TOLERANCE),
            Err(SignatureError::Malformed)
        );
        // Ten thousand short parts, and ten thousand ignored ones.
        for part in ["v1=00", "v0=00"] {
            let many = format!("t=1000{}", format!(",{part}").repeat(10_000));
            assert_eq!(
                verify(&secret, &many, b"x", 1000, TOLERANCE),
                Err(SignatureError::Malformed)
            );
        }
        // Not 64 hex digits, two timestamps, a signed or spaced timestamp.
        for bad in [
            format!("t=1000,v1={}", "a".repeat(63)),
            format!("t=1000,v1={}", "a".repeat(65)),
            format!("t=1000,v1={}", "g".repeat(64)),
            format!("t=1000,t=1001,{v1}"),
            format!("t=+1000,{v1}"),
            format!("t=-1000,{v1}"),
            format!("t=,{v1}"),
            format!("t=99999999999999999999,{v1}"),
            format!("{v1},{v1}"),
        ] {
            assert_eq!(
                SignatureHeader::parse(&bad),
                Err(SignatureError::Malformed),
                "{bad}"
            );
        }
        assert_eq!(macs(), before, "no MAC for a malformed header");
        // Spaces around parts and unknown parts are fine.
        let spaced = sign(&secret, 1000, b"x").replace(',', " , v0=whatever , ");
        assert_eq!(verify(&secret, &spaced, b"x", 1000, TOLERANCE), Ok(()));
        let message = SignatureError::Malformed.to_string();
        assert!(
            message.contains("at most 8 v1 parts, at most 1024 bytes"),
            "{message}"
        );
    }

    #[test]
    fn malformed_headers_and_other_secrets() {
        let secret = WebhookSecret::new("s");
        for bad in [
            "",
            "t=1",
            "v1=00",
            "t=x,v1=00",
            "t=1,v1=zz",
            "t=1,v1=00",
            "garbage",
        ] {
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
