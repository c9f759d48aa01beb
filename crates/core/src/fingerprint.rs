//! The request fingerprint: what makes "the same request" the same.

use std::fmt;
use std::io::Write;

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
        let canonical = canonical_json(body)?;
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

/// The RFC 8785 (JCS) form of `body`, byte for byte what `serde_jcs::to_vec`
/// writes (fingerprints stored before this fast path must still match).
///
/// `serde_jcs` buffers and re-sorts every object through UTF-16 copies of its
/// keys and formats every number as a float; that was 8 % of a fresh
/// payment's instructions. A request body is objects, strings and small
/// integers, which are written here directly: keys sorted by their UTF-16
/// code units (as JCS says), strings escaped as serde_json escapes them (which
/// is JCS's escaping), integers of at most 2^53 in magnitude as their digits
/// (what JCS's ECMAScript number form gives for them). Any other number (a
/// fraction, an exponent, a larger integer) sends the whole body to
/// `serde_jcs`.
fn canonical_json(body: &serde_json::Value) -> Result<Vec<u8>, FingerprintError> {
    let mut out = Vec::with_capacity(256);
    if write_canonical(body, &mut out)? {
        Ok(out)
    } else {
        Ok(serde_jcs::to_vec(body)?)
    }
}

/// Writes `value` in JCS form; `Ok(false)` where the fast path does not
/// apply (see [`canonical_json`]), with `out` then in an unspecified state.
fn write_canonical(value: &serde_json::Value, out: &mut Vec<u8>) -> Result<bool, FingerprintError> {
    use serde_json::Value;
    /// The largest magnitude every f64 holds exactly: JCS writes integers up
    /// to it as their digits.
    const EXACT: u64 = 1 << 53;
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(number) => match number.as_i64() {
            // Every integer up to 2^53 fits an i64, and writes as its digits.
            Some(n) if n.unsigned_abs() <= EXACT => {
                write!(out, "{n}").map_err(serde_json::Error::io)?
            }
            _ => return Ok(false),
        },
        Value::String(text) => serde_json::to_writer(&mut *out, text)?,
        Value::Array(items) => {
            out.push(b'[');
            for (n, item) in items.iter().enumerate() {
                if n > 0 {
                    out.push(b',');
                }
                if !write_canonical(item, out)? {
                    return Ok(false);
                }
            }
            out.push(b']');
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.encode_utf16().cmp(b.0.encode_utf16()));
            out.push(b'{');
            for (n, (key, item)) in entries.into_iter().enumerate() {
                if n > 0 {
                    out.push(b',');
                }
                serde_json::to_writer(&mut *out, key)?;
                out.push(b':');
                if !write_canonical(item, out)? {
                    return Ok(false);
                }
            }
            out.push(b'}');
        }
    }
    Ok(true)
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

    /// A small deterministic generator of JSON values that stress the
    /// canonical form: keys and strings with escapes, controls, BMP
    /// characters above the surrogates and characters outside the BMP (where
    /// UTF-16 order and UTF-8 order differ), integers around 2^53, fractions.
    struct Values(u64);

    impl Values {
        fn next(&mut self) -> u64 {
            // xorshift64*
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }

        fn text(&mut self) -> String {
            const PIECES: &[&str] = &[
                "a",
                "b",
                "Z",
                "0",
                "amount",
                "\"",
                "\\",
                "/",
                "\n",
                "\u{1}",
                "\u{1f}",
                "\u{7f}",
                "é",
                "я",
                "\u{2028}",
                "\u{e000}",
                "\u{ffee}",
                "\u{1f600}",
                "\u{10000}",
                "€",
                " ",
            ];
            let len = self.next() % 4;
            (0..len)
                .map(|_| PIECES[(self.next() % PIECES.len() as u64) as usize])
                .collect()
        }

        fn value(&mut self, depth: u32) -> serde_json::Value {
            use serde_json::Value;
            let pick = if depth == 0 {
                self.next() % 5
            } else {
                self.next() % 7
            };
            match pick {
                0 => Value::Null,
                1 => Value::Bool(self.next().is_multiple_of(2)),
                2 => Value::String(self.text()),
                3 => {
                    const INTEGERS: &[i64] = &[
                        0,
                        1,
                        -1,
                        1000,
                        -250,
                        9_007_199_254_740_992,
                        -9_007_199_254_740_992,
                        9_007_199_254_740_993,
                        -9_007_199_254_740_993,
                        i64::MAX,
                        i64::MIN,
                    ];
                    let n = INTEGERS[(self.next() % INTEGERS.len() as u64) as usize];
                    if self.next().is_multiple_of(8) {
                        serde_json::json!(u64::MAX - self.next() % 3)
                    } else {
                        serde_json::json!(n)
                    }
                }
                4 => {
                    const FRACTIONS: &[f64] = &[0.5, -0.0, 1e21, 1e-7, 123.456, 1.0];
                    serde_json::json!(FRACTIONS[(self.next() % FRACTIONS.len() as u64) as usize])
                }
                5 => Value::Array(
                    (0..self.next() % 4)
                        .map(|_| self.value(depth - 1))
                        .collect(),
                ),
                _ => Value::Object(
                    (0..self.next() % 5)
                        .map(|_| (self.text(), self.value(depth - 1)))
                        .collect(),
                ),
            }
        }
    }

    #[test]
    fn the_canonical_form_is_serde_jcs_byte_for_byte() {
        let mut values = Values(0x9e37_79b9_7f4a_7c15);
        let mut fast = 0;
        for _ in 0..20_000 {
            let value = values.value(3);
            let expected = serde_jcs::to_vec(&value).unwrap();
            assert_eq!(
                canonical_json(&value).unwrap(),
                expected,
                "{}",
                String::from_utf8_lossy(&expected)
            );
            let mut out = Vec::new();
            if write_canonical(&value, &mut out).unwrap() {
                fast += 1;
            }
        }
        // Most values took the fast path, so the comparison above tested it.
        assert!(fast > 10_000, "only {fast} of 20000 on the fast path");
    }

    #[test]
    fn a_payment_body_takes_the_fast_path() {
        let body = serde_json::json!({
            "amount": {"value": "10.00", "currency": "RUB"},
            "reference": "order-1",
            "payment_method": {"token": "tok_ok"},
            "metadata": {"я": "ключ", "\u{1f600}": 1, "\u{ffee}": -2},
        });
        let mut out = Vec::new();
        assert!(write_canonical(&body, &mut out).unwrap());
        assert_eq!(out, serde_jcs::to_vec(&body).unwrap());
        // Keys in UTF-16 order: U+1F600 (a surrogate pair, D83D ...) before U+FFEE.
        let text = String::from_utf8(out).unwrap();
        assert!(text.find('\u{1f600}').unwrap() < text.find('\u{ffee}').unwrap());
    }

    #[test]
    fn bytes_round_trip() {
        let f = Fingerprint::compute("POST", "/", &serde_json::json!({})).unwrap();
        assert_eq!(Fingerprint::from_bytes(f.as_bytes()), Some(f));
        assert_eq!(Fingerprint::from_bytes(&[0; 31]), None);
        assert_eq!(f.to_hex().len(), 64);
    }
}
