//! Shops: the tenants of chargeonce. Every key, payment and response belongs to one.

use std::fmt;

use rand::RngCore;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// Why a shop id was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a shop id is 1 to 64 characters of A-Z, a-z, 0-9, `_` and `-`")]
pub struct InvalidShopId;

/// A shop's public identifier (the user name of HTTP Basic auth).
///
/// ```
/// use chargeonce_core::ShopId;
/// assert!(ShopId::new("demo-shop").is_ok());
/// assert!(ShopId::new("demo shop").is_err());
/// assert!(ShopId::new("").is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ShopId(String);

impl ShopId {
    /// Validates a shop id: 1 to 64 characters of `[A-Za-z0-9_-]`.
    pub fn new(id: impl Into<String>) -> Result<Self, InvalidShopId> {
        let id = id.into();
        let ok = (1..=64).contains(&id.len())
            && id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if ok { Ok(Self(id)) } else { Err(InvalidShopId) }
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ShopId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
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

    /// Wraps a secret chosen by the operator or sent by a client.
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

    /// Wraps a secret given on a command line or in the environment.
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
        presented.hash().0.ct_eq(&self.0).into()
    }
}

impl fmt::Debug for SecretHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretHash(***)")
    }
}
