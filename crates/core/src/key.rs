//! The `Idempotency-Key`: a client-chosen name for one business operation.

use std::fmt;

use sha2::{Digest, Sha256};

/// Why a raw `Idempotency-Key` value was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// The value is empty (or only whitespace, or `""`).
    #[error("the key is empty")]
    Empty,
    /// The value is longer than [`IdempotencyKey::MAX_LEN`] characters.
    #[error("the key is {len} characters long; at most {max} are allowed", max = IdempotencyKey::MAX_LEN)]
    TooLong {
        /// The length that was sent.
        len: usize,
    },
    /// A character outside visible ASCII (0x21..=0x7E): a space, a control
    /// character, NUL, or a non-ASCII byte.
    #[error("the key has a character that is not visible ASCII at position {position}")]
    InvalidCharacter {
        /// Zero-based byte offset of the first bad character in the key.
        position: usize,
    },
    /// A value that opens with `"` but is not a valid structured-field string
    /// (RFC 8941 §3.3.3): no closing quote, a bad escape, or text after the quote.
    #[error("the key starts with a quote but is not a valid structured-field string")]
    BadQuotedString,
}

/// A valid idempotency key: 1 to 255 visible ASCII characters.
///
/// It can only be built valid, so every key that reaches a store is already
/// checked. The IETF header draft sends the key as a structured-field string
/// (`"abc"`); many clients send a bare token (`abc`). Both forms parse to the
/// same key.
///
/// `Debug` and `Display` never print the raw key (it may carry customer data);
/// they print a short hash ([`IdempotencyKey::log_id`]). Use
/// [`IdempotencyKey::as_str`] where the key itself is needed.
///
/// ```
/// use chargeonce_core::{IdempotencyKey, KeyError};
///
/// let bare = IdempotencyKey::from_header(b"order-123-pay").unwrap();
/// let quoted = IdempotencyKey::from_header(br#""order-123-pay""#).unwrap();
/// assert_eq!(bare, quoted);
/// assert_eq!(bare.as_str(), "order-123-pay");
///
/// assert_eq!(IdempotencyKey::from_header(b""), Err(KeyError::Empty));
/// assert!(IdempotencyKey::from_header(b"a\0b").is_err());
/// assert!(IdempotencyKey::new("x".repeat(256)).is_err());
/// ```
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    /// The longest key accepted, in characters.
    pub const MAX_LEN: usize = 255;

    /// Validates a key given as plain text (no quoting rules applied).
    pub fn new(key: impl Into<String>) -> Result<Self, KeyError> {
        let key = key.into();
        validate(key.as_bytes())?;
        Ok(Self(key))
    }

    /// Parses the raw bytes of an `Idempotency-Key` header value, accepting both
    /// the structured-field string form (`"abc"`, with `\"` and `\\` escapes)
    /// and the bare token form (`abc`). Surrounding spaces and tabs are ignored.
    pub fn from_header(raw: &[u8]) -> Result<Self, KeyError> {
        let raw = trim_ows(raw);
        if raw.first() == Some(&b'"') {
            let inner = unquote(raw)?;
            validate(&inner)?;
            // `validate` proved every byte is visible ASCII, so this is UTF-8.
            let key = String::from_utf8(inner).map_err(|_| KeyError::BadQuotedString)?;
            return Ok(Self(key));
        }
        validate(raw)?;
        let key =
            std::str::from_utf8(raw).map_err(|_| KeyError::InvalidCharacter { position: 0 })?;
        Ok(Self(key.to_owned()))
    }

    /// The key as the client chose it.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The key of one business operation on one subject: `{subject}-{operation}`.
    ///
    /// This is how a key should be made: from the *intent* (pay order 123,
    /// refund 1 of order 123), never from the *attempt*. Every retry of the
    /// intent, from this process or from another one after a restart, computes
    /// the same key, so the server recognises the repeat and charges once.
    ///
    /// Characters outside visible ASCII (spaces, Cyrillic, ...) and `%` itself are
    /// percent-encoded as UTF-8, so any order reference gives a valid key, and
    /// for one operation different references never give the same key. (The
    /// `-` between the two is not escaped: `("order-1", "pay")` and
    /// `("order", "1-pay")` give the same key. Keep operation names fixed words
    /// such as `pay` and `refund-1`; a collision is at worst a 422, never a
    /// second charge.) Fails only when the result is empty or longer than
    /// [`IdempotencyKey::MAX_LEN`].
    ///
    /// ```
    /// use chargeonce_core::IdempotencyKey;
    ///
    /// let pay = IdempotencyKey::for_operation("order-123", "pay").unwrap();
    /// assert_eq!(pay.as_str(), "order-123-pay");
    /// // A refund is another operation, with a key of its own.
    /// let refund = IdempotencyKey::for_operation("order-123", "refund-1").unwrap();
    /// assert_eq!(refund.as_str(), "order-123-refund-1");
    /// // The same intent always gives the same key.
    /// assert_eq!(pay, IdempotencyKey::for_operation("order-123", "pay").unwrap());
    /// assert_eq!(
    ///     IdempotencyKey::for_operation("заказ 7", "pay").unwrap().as_str(),
    ///     "%D0%B7%D0%B0%D0%BA%D0%B0%D0%B7%207-pay"
    /// );
    /// ```
    pub fn for_operation(subject: &str, operation: &str) -> Result<Self, KeyError> {
        let mut key = String::with_capacity(subject.len() + operation.len() + 1);
        encode_into(&mut key, subject);
        key.push('-');
        encode_into(&mut key, operation);
        if subject.is_empty() || operation.is_empty() {
            return Err(KeyError::Empty);
        }
        Self::new(key)
    }

    /// A random key (`rnd-` and 32 hex digits), good **only while this process
    /// lives and only if every retry reuses this very value**.
    ///
    /// It protects nothing across a process restart: the key exists only in
    /// this process's memory, so if the process crashes or is redeployed after
    /// sending the payment and before learning its outcome, the code that runs
    /// after the restart cannot find the key again, makes a new one, and the
    /// server sees a new payment: the customer is charged twice. The same
    /// happens when a caller builds the key inside its retry loop. Prefer
    /// [`IdempotencyKey::for_operation`]; use this only for operations that have
    /// no business identity, or store the key durably *before* the first send.
    pub fn random_for_this_process_only() -> Self {
        Self(format!("rnd-{}", uuid::Uuid::new_v4().simple()))
    }

    /// A short, stable, non-reversible name for the key, safe to put in logs:
    /// the first 12 hex digits of its SHA-256.
    pub fn log_id(&self) -> String {
        let digest = Sha256::digest(self.0.as_bytes());
        hex::encode(&digest[..6])
    }
}

/// Appends `text`, percent-encoding every byte that is not visible ASCII, and `%`.
fn encode_into(out: &mut String, text: &str) {
    for byte in text.bytes() {
        if (0x21..=0x7e).contains(&byte) && byte != b'%' {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
}

fn trim_ows(mut raw: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = raw {
        raw = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = raw {
        raw = rest;
    }
    raw
}

/// Decodes an RFC 8941 sf-string. The input starts with `"`.
fn unquote(raw: &[u8]) -> Result<Vec<u8>, KeyError> {
    let mut out = Vec::with_capacity(raw.len());
    let mut chars = raw.iter().skip(1);
    loop {
        match chars.next() {
            None => return Err(KeyError::BadQuotedString),
            Some(b'\\') => match chars.next() {
                Some(&c @ (b'"' | b'\\')) => out.push(c),
                _ => return Err(KeyError::BadQuotedString),
            },
            Some(b'"') => {
                return if chars.next().is_none() {
                    Ok(out)
                } else {
                    Err(KeyError::BadQuotedString)
                };
            }
            Some(&c) => out.push(c),
        }
    }
}

fn validate(bytes: &[u8]) -> Result<(), KeyError> {
    if bytes.is_empty() {
        return Err(KeyError::Empty);
    }
    if let Some(position) = bytes.iter().position(|b| !(0x21..=0x7e).contains(b)) {
        return Err(KeyError::InvalidCharacter { position });
    }
    if bytes.len() > IdempotencyKey::MAX_LEN {
        return Err(KeyError::TooLong { len: bytes.len() });
    }
    Ok(())
}

impl fmt::Debug for IdempotencyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "IdempotencyKey(#{})", self.log_id())
    }
}

impl fmt::Display for IdempotencyKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.log_id())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(raw: &str) -> Result<IdempotencyKey, KeyError> {
        IdempotencyKey::from_header(raw.as_bytes())
    }

    #[test]
    fn bare_and_quoted_forms_are_the_same_key() {
        assert_eq!(parse("abc").unwrap(), parse("\"abc\"").unwrap());
        assert_eq!(parse("  abc\t").unwrap().as_str(), "abc");
    }

    #[test]
    fn quoted_form_unescapes() {
        assert_eq!(parse(r#""a\"b\\c""#).unwrap().as_str(), r#"a"b\c"#);
        assert_eq!(parse(r#""a\nb""#), Err(KeyError::BadQuotedString));
        assert_eq!(parse(r#""abc"x"#), Err(KeyError::BadQuotedString));
        assert_eq!(parse(r#""abc"#), Err(KeyError::BadQuotedString));
        assert_eq!(parse(r#""""#), Err(KeyError::Empty));
        assert_eq!(
            parse(r#""a b""#),
            Err(KeyError::InvalidCharacter { position: 1 })
        );
    }

    #[test]
    fn length_bounds() {
        assert!(IdempotencyKey::new("k".repeat(255)).is_ok());
        assert_eq!(
            IdempotencyKey::new("k".repeat(256)),
            Err(KeyError::TooLong { len: 256 })
        );
        assert_eq!(parse("   "), Err(KeyError::Empty));
    }

    #[test]
    fn control_nul_space_and_non_ascii_are_refused() {
        for bad in ["a b", "a\0b", "a\x7fb", "ключ", "a\x01"] {
            assert!(
                matches!(parse(bad), Err(KeyError::InvalidCharacter { .. })),
                "{bad:?}"
            );
        }
        assert!(IdempotencyKey::from_header(b"a\xffb").is_err());
    }

    #[test]
    fn sql_metacharacters_are_just_characters() {
        let key = parse("';DROP_TABLE_idempotency_keys;--%_\\$$").unwrap();
        assert_eq!(key.as_str(), "';DROP_TABLE_idempotency_keys;--%_\\$$");
    }

    #[test]
    fn keys_come_from_the_operation() {
        let pay = IdempotencyKey::for_operation("order-123", "pay").unwrap();
        assert_eq!(pay.as_str(), "order-123-pay");
        assert_eq!(
            IdempotencyKey::for_operation("order-123", "refund-1")
                .unwrap()
                .as_str(),
            "order-123-refund-1"
        );
        assert_eq!(
            pay,
            IdempotencyKey::for_operation("order-123", "pay").unwrap()
        );
        assert_ne!(
            pay,
            IdempotencyKey::for_operation("order-124", "pay").unwrap()
        );
    }

    #[test]
    fn operation_keys_encode_what_a_key_cannot_hold() {
        let key = IdempotencyKey::for_operation("order 7", "pay").unwrap();
        assert_eq!(key.as_str(), "order%207-pay");
        // `%` is encoded too, so an encoded-looking reference stays distinct.
        let literal = IdempotencyKey::for_operation("order%207", "pay").unwrap();
        assert_eq!(literal.as_str(), "order%25207-pay");
        assert_ne!(key, literal);
        assert_eq!(
            IdempotencyKey::for_operation("заказ", "pay")
                .unwrap()
                .as_str(),
            "%D0%B7%D0%B0%D0%BA%D0%B0%D0%B7-pay"
        );
        assert_eq!(
            IdempotencyKey::for_operation("", "pay"),
            Err(KeyError::Empty)
        );
        assert_eq!(
            IdempotencyKey::for_operation("order-1", ""),
            Err(KeyError::Empty)
        );
        assert!(matches!(
            IdempotencyKey::for_operation(&"x".repeat(252), "pay"),
            Err(KeyError::TooLong { len: 256 })
        ));
        assert!(IdempotencyKey::for_operation(&"x".repeat(251), "pay").is_ok());
    }

    #[test]
    fn random_keys_are_valid_and_distinct() {
        let a = IdempotencyKey::random_for_this_process_only();
        let b = IdempotencyKey::random_for_this_process_only();
        assert_ne!(a, b);
        assert!(a.as_str().starts_with("rnd-"));
        assert_eq!(a.as_str().len(), 36);
        assert_eq!(IdempotencyKey::new(a.as_str()).unwrap(), a);
    }

    #[test]
    fn debug_does_not_leak_the_key() {
        let key = parse("secret-order-42").unwrap();
        assert!(!format!("{key:?}").contains("secret"));
        assert!(!format!("{key}").contains("secret"));
        assert_eq!(key.log_id().len(), 12);
    }
}
