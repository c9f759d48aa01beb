//! [`Metadata`]: the shop's own key-value pairs on a payment (its order id,
//! customer id, ...), as Stripe takes them: at most [`MAX_PAIRS`] pairs,
//! keys of 1 to [`MAX_KEY_CHARS`] characters, values of at most
//! [`MAX_VALUE_CHARS`]. Part of the request, so part of its fingerprint: the
//! same key with other metadata is another request (422).

use std::collections::BTreeMap;

/// Most pairs one payment carries.
pub const MAX_PAIRS: usize = 50;

/// Most characters (Unicode scalar values) of a key.
pub const MAX_KEY_CHARS: usize = 40;

/// Most characters (Unicode scalar values) of a value.
pub const MAX_VALUE_CHARS: usize = 500;

/// Why metadata was refused. Each names the offending key, if there is one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MetadataError {
    /// More than [`MAX_PAIRS`] pairs.
    #[error("metadata has {0} pairs; at most {MAX_PAIRS} are allowed")]
    TooManyPairs(usize),
    /// An empty key.
    #[error("a metadata key is empty")]
    EmptyKey,
    /// A key over [`MAX_KEY_CHARS`] characters (named by its first ones).
    #[error("the metadata key `{0}` is longer than {MAX_KEY_CHARS} characters")]
    KeyTooLong(String),
    /// A key with a control character (it could not be shown or logged safely).
    #[error("a metadata key holds a control character")]
    ControlInKey,
    /// A value over [`MAX_VALUE_CHARS`] characters.
    #[error("the value of metadata key `{0}` is longer than {MAX_VALUE_CHARS} characters")]
    ValueTooLong(String),
}

impl MetadataError {
    /// The key the error is about, when it names one.
    pub fn key(&self) -> Option<&str> {
        match self {
            Self::KeyTooLong(key) | Self::ValueTooLong(key) => Some(key),
            _ => None,
        }
    }
}

/// A payment's metadata: validated pairs, in key order. Empty when the shop
/// sent none.
///
/// ```
/// use std::collections::BTreeMap;
/// use chargeonce_core::Metadata;
///
/// let pairs = BTreeMap::from([("order_id".to_owned(), "6735".to_owned())]);
/// let metadata = Metadata::new(pairs).unwrap();
/// assert_eq!(metadata.get("order_id"), Some("6735"));
/// assert!(Metadata::new(BTreeMap::from([(String::new(), "x".to_owned())])).is_err());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Metadata(BTreeMap<String, String>);

impl Metadata {
    /// Checks `pairs` against the limits.
    pub fn new(pairs: BTreeMap<String, String>) -> Result<Self, MetadataError> {
        if pairs.len() > MAX_PAIRS {
            return Err(MetadataError::TooManyPairs(pairs.len()));
        }
        for (key, value) in &pairs {
            check_pair(key, value)?;
        }
        Ok(Self(pairs))
    }

    /// No pairs.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    /// The pairs, in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// The pairs as a map.
    pub fn as_map(&self) -> &BTreeMap<String, String> {
        &self.0
    }

    /// The stored form: a JSON object, or `None` when empty (stores keep
    /// no text for the common case).
    pub fn to_stored(&self) -> Option<String> {
        if self.0.is_empty() {
            return None;
        }
        serde_json::to_string(&self.0).ok()
    }

    /// Reads the stored form back, checked again.
    pub fn from_stored(stored: Option<&str>) -> Result<Self, StoredMetadataError> {
        let Some(text) = stored else {
            return Ok(Self::default());
        };
        let pairs: BTreeMap<String, String> = serde_json::from_str(text)?;
        Ok(Self::new(pairs)?)
    }
}

/// Why stored metadata could not be read back.
#[derive(Debug, thiserror::Error)]
pub enum StoredMetadataError {
    /// Not a JSON object of strings.
    #[error("stored metadata is not a JSON object of strings: {0}")]
    Json(#[from] serde_json::Error),
    /// Outside the limits.
    #[error("stored metadata breaks a limit: {0}")]
    Limits(#[from] MetadataError),
}

fn check_pair(key: &str, value: &str) -> Result<(), MetadataError> {
    if key.is_empty() {
        return Err(MetadataError::EmptyKey);
    }
    if key.chars().any(char::is_control) {
        return Err(MetadataError::ControlInKey);
    }
    if key.chars().count() > MAX_KEY_CHARS {
        // Named by its first characters: a hostile key may be as long as
        // the body, and the error is shown back.
        let shown: String = key.chars().take(MAX_KEY_CHARS).collect();
        return Err(MetadataError::KeyTooLong(format!("{shown}…")));
    }
    if value.chars().count() > MAX_VALUE_CHARS {
        return Err(MetadataError::ValueTooLong(key.to_owned()));
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn pairs(n: usize) -> BTreeMap<String, String> {
        (0..n).map(|i| (format!("k{i}"), format!("v{i}"))).collect()
    }

    #[test]
    fn the_limits_hold_at_their_edges() {
        assert!(Metadata::new(pairs(MAX_PAIRS)).is_ok());
        assert_eq!(
            Metadata::new(pairs(MAX_PAIRS + 1)),
            Err(MetadataError::TooManyPairs(MAX_PAIRS + 1))
        );
        let key = "ключ".repeat(10); // 40 characters, 80 bytes
        let value = "é".repeat(MAX_VALUE_CHARS);
        assert!(Metadata::new(BTreeMap::from([(key.clone(), value.clone())])).is_ok());
        let long_key = format!("{key}x");
        assert_eq!(
            Metadata::new(BTreeMap::from([(long_key, String::new())])),
            Err(MetadataError::KeyTooLong(format!("{key}…")))
        );
        assert_eq!(
            Metadata::new(BTreeMap::from([(key.clone(), format!("{value}x"))])),
            Err(MetadataError::ValueTooLong(key))
        );
        assert_eq!(
            Metadata::new(BTreeMap::from([("a\nb".to_owned(), String::new())])),
            Err(MetadataError::ControlInKey)
        );
    }

    #[test]
    fn the_stored_form_round_trips_and_empty_is_none() {
        assert_eq!(Metadata::default().to_stored(), None);
        let metadata = Metadata::new(pairs(3)).unwrap();
        let stored = metadata.to_stored().unwrap();
        assert_eq!(stored, r#"{"k0":"v0","k1":"v1","k2":"v2"}"#);
        assert_eq!(Metadata::from_stored(Some(&stored)).unwrap(), metadata);
        assert_eq!(Metadata::from_stored(None).unwrap(), Metadata::default());
        assert!(Metadata::from_stored(Some("[1]")).is_err());
    }
}
