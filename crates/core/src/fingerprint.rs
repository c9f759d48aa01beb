//! The request fingerprint: what makes "the same request" the same.

use std::fmt;

use sha2::{Digest, Sha256};

/// Why a fingerprint could not be computed.
#[derive(Debug, thiserror::Error)]
#[error("the body cannot be put in canonical JSON form: {0}")]
pub struct FingerprintError(#[from] serde_json::Error);

/// SHA-256 over the method, the path and the canonical JSON (RFC 8785, JCS) of
/// the body.
///
/// Object keys are sorted and insignificant whitespace is dropped before
/// hashing, so a client that re-serialises the same request gets the same
/// fingerprint; another body, another path or another method gets another one.
/// The fingerprint is computed once, when a request arrives, and compared on
/// every path that returns a stored response.
///
/// ```
/// use chargeonce_core::Fingerprint;
/// use serde_json::json;
///
/// let body = json!({"amount": {"value": "1.00", "currency": "EUR"}});
/// let a = Fingerprint::compute("POST", "/v1/payments", &body).unwrap();
/// let b = Fingerprint::compute("POST", "/v1/payments/x/refunds", &body).unwrap();
/// assert_ne!(a, b);
/// assert_eq!(Fingerprint::from_bytes(a.as_bytes()), Some(a));
/// ```
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint([u8; 32]);

impl Fingerprint {
    /// Fingerprints one request.
    pub fn compute(
        method: &str,
        path: &str,
        body: &serde_json::Value,
    ) -> Result<Self, FingerprintError> {
        let canonical = serde_jcs::to_vec(body)?;
        let mut hasher = Sha256::new();
        hasher.update(method.as_bytes());
        hasher.update(b"\n");
        hasher.update(path.as_bytes());
        hasher.update(b"\n");
        hasher.update(&canonical);
        Ok(Self(hasher.finalize().into()))
    }

    /// Rebuilds a fingerprint read back from a store; `None` unless 32 bytes.
    pub fn from_bytes(bytes: &[u8]) -> Option<Self> {
        bytes.try_into().ok().map(Self)
    }

    /// The 32 raw bytes, for storage.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// Lower-case hex, as shown to people.
    pub fn to_hex(&self) -> String {
        hex::encode(self.0)
    }
}

impl fmt::Debug for Fingerprint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Fingerprint({})", self.to_hex())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_order_and_whitespace_do_not_matter() {
        let a: serde_json::Value = serde_json::from_str(
            r#"{"reference":"o-1","amount":{"value":"1.00","currency":"RUB"}}"#,
        )
        .unwrap();
        let b: serde_json::Value = serde_json::from_str(
            "{\n  \"amount\" : { \"currency\":\"RUB\", \"value\":\"1.00\" },\n  \"reference\":\"o-1\"\n}",
        )
        .unwrap();
        assert_eq!(
            Fingerprint::compute("POST", "/v1/payments", &a).unwrap(),
            Fingerprint::compute("POST", "/v1/payments", &b).unwrap()
        );
    }

    #[test]
    fn method_path_and_values_matter() {
        let body = serde_json::json!({"a": "1"});
        let base = Fingerprint::compute("POST", "/v1/payments", &body).unwrap();
        assert_ne!(
            base,
            Fingerprint::compute("PUT", "/v1/payments", &body).unwrap()
        );
        assert_ne!(
            base,
            Fingerprint::compute("POST", "/v1/refunds", &body).unwrap()
        );
        assert_ne!(
            base,
            Fingerprint::compute("POST", "/v1/payments", &serde_json::json!({"a": "2"})).unwrap()
        );
    }

    #[test]
    fn bytes_round_trip() {
        let f = Fingerprint::compute("POST", "/", &serde_json::json!({})).unwrap();
        assert_eq!(Fingerprint::from_bytes(f.as_bytes()), Some(f));
        assert_eq!(Fingerprint::from_bytes(&[0; 31]), None);
        assert_eq!(f.to_hex().len(), 64);
    }
}
