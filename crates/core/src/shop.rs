//! Shops: the tenants of chargeonce. Every key, payment and response belongs to one.

use std::fmt;

use rand::RngCore;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::api_key::Mode;

/// Why a shop id was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a shop id is 1 to 64 characters of A-Z, a-z, 0-9, `_` and `-`")]
pub struct InvalidShopId;

/// The suffix of the id of a shop's test mode (see [`ShopId::in_mode`]).
/// `.` is not allowed in a shop's own id, so no shop's id can be another
/// shop's test mode.
const TEST_SUFFIX: &str = ".test";

/// A shop's identifier in one of its two modes: the shop's own id (the user
/// name of HTTP Basic auth) names its live mode, and that id with `.test`
/// appended names its test mode.
///
/// Every object of a shop (payment, refund, idempotency key, order, event,
/// webhook endpoint) is stored under the id of the mode it was made in, so
/// every key, look-up and list that names the shop names the mode too: test
/// and live objects cannot meet, whatever a query forgets.
///
/// ```
/// use chargeonce_core::ShopId;
/// use chargeonce_core::api_key::Mode;
/// assert!(ShopId::new("demo-shop").is_ok());
/// assert!(ShopId::new("demo shop").is_err());
/// assert!(ShopId::new("").is_err());
/// let live = ShopId::new("demo-shop").unwrap();
/// let test = live.in_mode(Mode::Test);
/// assert_eq!(test.as_str(), "demo-shop.test");
/// assert_eq!(test.mode(), Mode::Test);
/// assert_eq!(test.shop(), live);
/// assert_eq!(ShopId::new("demo-shop.test").unwrap(), test);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ShopId(String);

impl ShopId {
    /// Validates a shop id: 1 to 64 characters of `[A-Za-z0-9_-]`, then
    /// `.test` when it names the shop's test mode.
    pub fn new(id: impl Into<String>) -> Result<Self, InvalidShopId> {
        let id = id.into();
        let shop = id.strip_suffix(TEST_SUFFIX).unwrap_or(&id);
        let ok = (1..=64).contains(&shop.len())
            && shop
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if ok { Ok(Self(id)) } else { Err(InvalidShopId) }
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The mode whose objects this id holds.
    pub fn mode(&self) -> Mode {
        if self.0.ends_with(TEST_SUFFIX) {
            Mode::Test
        } else {
            Mode::Live
        }
    }

    /// Whether it names a live mode (real money).
    pub fn is_live(&self) -> bool {
        self.mode() == Mode::Live
    }

    /// The shop itself: its own id, which names its live mode and owns its
    /// API keys.
    pub fn shop(&self) -> ShopId {
        Self(
            self.0
                .strip_suffix(TEST_SUFFIX)
                .unwrap_or(&self.0)
                .to_owned(),
        )
    }

    /// The same shop in `mode`.
    pub fn in_mode(&self, mode: Mode) -> ShopId {
        let shop = self.0.strip_suffix(TEST_SUFFIX).unwrap_or(&self.0);
        match mode {
            Mode::Live => Self(shop.to_owned()),
            Mode::Test => Self(format!("{shop}{TEST_SUFFIX}")),
        }
    }
}

impl fmt::Display for ShopId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Why a secret chosen for a shop was refused (see [`ShopSecret::new`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidShopSecret {
    /// The empty string.
    #[error("a shop secret must not be empty (leave it out to generate one)")]
    Empty,
    /// Fewer than [`ShopSecret::MIN_LEN`] characters.
    #[error(
        "a shop secret must be at least {} characters, this one has {len} \
         (leave it out to generate one)",
        ShopSecret::MIN_LEN
    )]
    TooShort {
        /// Its length.
        len: usize,
    },
    /// More than [`ShopSecret::MAX_LEN`] characters.
    #[error(
        "a shop secret may be at most {} characters, this one has {len}",
        ShopSecret::MAX_LEN
    )]
    TooLong {
        /// Its length.
        len: usize,
    },
    /// A space, a control character or a non-ASCII character.
    #[error("a shop secret is visible ASCII characters only (no spaces)")]
    NotVisibleAscii,
}

/// A shop's secret key, in clear. Exists only between generation (or the
/// operator typing it) and hashing; `Debug` hides it.
#[derive(Clone)]
pub struct ShopSecret(String);

impl ShopSecret {
    /// Prefix of generated secrets, so a leaked one is easy to recognise and scan for.
    pub const PREFIX: &'static str = "sk_";

    /// 32 random bytes from the OS generator, hex-encoded behind [`Self::PREFIX`].
    pub fn generate() -> Self {
        let mut bytes = [0_u8; 32];
        rand::rng().fill_bytes(&mut bytes);
        Self(format!("{}{}", Self::PREFIX, hex::encode(bytes)))
    }

    /// The shortest secret a shop may be given: 16 characters.
    pub const MIN_LEN: usize = 16;

    /// The longest secret a shop may be given: 256 characters.
    pub const MAX_LEN: usize = 256;

    /// Checks a secret chosen by an operator for a new shop: [`Self::MIN_LEN`]
    /// to [`Self::MAX_LEN`] visible ASCII characters (no spaces). Generated
    /// secrets ([`Self::generate`]) are 67.
    ///
    /// ```
    /// use chargeonce_core::{InvalidShopSecret, ShopSecret};
    /// assert!(ShopSecret::new("sk_0123456789abcdef").is_ok());
    /// assert_eq!(ShopSecret::new("").unwrap_err(), InvalidShopSecret::Empty);
    /// assert!(matches!(ShopSecret::new("sk_short"), Err(InvalidShopSecret::TooShort { len: 8 })));
    /// ```
    pub fn new(secret: impl Into<String>) -> Result<Self, InvalidShopSecret> {
        let secret = secret.into();
        if secret.is_empty() {
            return Err(InvalidShopSecret::Empty);
        }
        if !secret.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(InvalidShopSecret::NotVisibleAscii);
        }
        if secret.len() < Self::MIN_LEN {
            return Err(InvalidShopSecret::TooShort { len: secret.len() });
        }
        if secret.len() > Self::MAX_LEN {
            return Err(InvalidShopSecret::TooLong { len: secret.len() });
        }
        Ok(Self(secret))
    }

    /// Wraps a secret as a client presented it, unchecked: a wrong one simply
    /// does not match any stored hash. A new shop's secret goes through
    /// [`Self::new`] instead.
    pub fn from_string(secret: impl Into<String>) -> Self {
        Self(secret.into())
    }

    /// The clear text, to show once to the operator.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// The SHA-256 the store keeps instead of the secret.
    pub fn hash(&self) -> SecretHash {
        SecretHash(Sha256::digest(self.0.as_bytes()).into())
    }
}

impl std::str::FromStr for ShopSecret {
    type Err = std::convert::Infallible;

    /// Wraps a secret given on a command line or in the environment to
    /// present it (as [`ShopSecret::from_string`], unchecked).
    fn from_str(secret: &str) -> Result<Self, Self::Err> {
        Ok(Self::from_string(secret))
    }
}

impl fmt::Debug for ShopSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ShopSecret(***)")
    }
}

/// SHA-256 of a shop secret, as stored. Generated secrets carry 256 bits of
/// entropy, so a fast hash is enough and keeps auth cheap on every request.
///
/// ```
/// use chargeonce_core::ShopSecret;
/// let secret = ShopSecret::generate();
/// let stored = secret.hash();
/// assert!(stored.verify(&ShopSecret::from_string(secret.expose())));
/// assert!(!stored.verify(&ShopSecret::from_string("guess")));
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct SecretHash([u8; 32]);

impl SecretHash {
    /// Rebuilds a hash read back from a store; `None` unless 32 bytes.
    pub fn from_bytes(bytes: &[u8]) -> Option<Self> {
        bytes.try_into().ok().map(Self)
    }

    /// The raw bytes, for storage.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// Compares a presented secret with this hash in constant time.
    pub fn verify(&self, presented: &ShopSecret) -> bool {
        self.matches(&presented.hash())
    }

    /// Compares two hashes in constant time (a presented secret hashed
    /// once, against each of a shop's keys).
    pub fn matches(&self, other: &SecretHash) -> bool {
        other.0.ct_eq(&self.0).into()
    }
}

impl fmt::Debug for SecretHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretHash(***)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shops_two_modes_have_two_ids_that_never_name_another_shop() {
        let live = ShopId::new("acme").unwrap();
        let test = live.in_mode(Mode::Test);
        assert_eq!((live.mode(), test.mode()), (Mode::Live, Mode::Test));
        assert_eq!(test.in_mode(Mode::Live), live);
        assert_eq!(test.in_mode(Mode::Test), test);
        assert_eq!(live.shop(), live);
        assert!(live.is_live() && !test.is_live());
        // A shop's own id cannot hold the suffix, nor be only the suffix.
        assert!(ShopId::new(".test").is_err());
        assert!(ShopId::new("acme.test.test").is_err());
        assert!(ShopId::new("acme.live").is_err());
        assert!(ShopId::new(format!("{}.test", "a".repeat(64))).is_ok());
    }

    #[test]
    fn a_new_shops_secret_is_long_enough_and_visible_ascii() {
        assert_eq!(ShopSecret::new("").unwrap_err(), InvalidShopSecret::Empty);
        assert_eq!(
            ShopSecret::new("sk_test_shop_a").unwrap_err(),
            InvalidShopSecret::TooShort { len: 14 }
        );
        assert_eq!(
            ShopSecret::new("x".repeat(15)).unwrap_err(),
            InvalidShopSecret::TooShort { len: 15 }
        );
        assert!(ShopSecret::new("x".repeat(16)).is_ok());
        assert!(ShopSecret::new("x".repeat(256)).is_ok());
        assert_eq!(
            ShopSecret::new("x".repeat(257)).unwrap_err(),
            InvalidShopSecret::TooLong { len: 257 }
        );
        for bad in [
            "sk_0123456789 abcdef",
            "sk_0123456789abcdé",
            "sk_0123456789abc\n",
        ] {
            assert_eq!(
                ShopSecret::new(bad).unwrap_err(),
                InvalidShopSecret::NotVisibleAscii,
                "{bad:?}"
            );
        }
        assert!(ShopSecret::new(ShopSecret::generate().expose()).is_ok());
        let message = InvalidShopSecret::TooShort { len: 3 }.to_string();
        assert!(message.contains("at least 16 characters"), "{message}");
    }
}
