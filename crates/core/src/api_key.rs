//! A shop's API keys (issue 35): several per shop, each with its own secret,
//! mode, scope and life, so a key can be rolled without downtime, a support
//! tool can read without being able to charge, and a lost laptop costs one
//! revoke.
//!
//! The secret is shown once, when the key is made, and stored as its SHA-256
//! ([`SecretHash`]); what stays visible is its prefix (`sk_live_4f3a…`). A key
//! authenticates while it is neither revoked nor past its expiry
//! ([`ApiKey::active_at`]); what it may do is its [`Scope`]'s
//! ([`Scope::allows`]).
//!
//! ```
//! use chargeonce_core::api_key::{Access, ApiKeySecret, Mode, Scope};
//! let secret = ApiKeySecret::generate(Mode::Live);
//! assert!(secret.expose().starts_with("sk_live_"));
//! assert_eq!(secret.prefix().len(), 12);
//! assert!(Scope::ReadOnly.allows(Access::Read));
//! assert!(!Scope::ReadOnly.allows(Access::Move));
//! assert!(Scope::Payments.allows(Access::Move));
//! assert!(!Scope::Payments.allows(Access::Read));
//! assert!(!Scope::Payments.allows(Access::Manage));
//! ```

use std::fmt;

use rand::RngCore as _;
use time::OffsetDateTime;

use crate::{SecretHash, ShopId, ShopSecret};

crate::id::prefixed_id!(
    /// Our id of an API key: `key_` followed by a UUIDv7 (time-ordered).
    ApiKeyId,
    "key_"
);

/// The most keys a shop may hold at once that still authenticate (neither
/// revoked nor expired): enough for one per service and a roll of each, few
/// enough that checking a secret against them all stays cheap.
pub const MAX_ACTIVE_KEYS: usize = 32;

/// Whose money a key moves: `live` (the acquirer's) or `test` (the
/// simulator's, never a real card).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Real money.
    Live,
    /// The simulator's.
    Test,
}

impl Mode {
    /// The stable name (`live`, `test`), as stored and shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Live => "live",
            Self::Test => "test",
        }
    }

    /// Parses a stored or requested name.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "live" => Some(Self::Live),
            "test" => Some(Self::Test),
            _ => None,
        }
    }
}

/// What a request asks of its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Move money: create a payment, capture, void, cancel or refund it.
    Move,
    /// Read back what the key's own moves made: one payment, refund or
    /// capture by its id (the answer a server-side checkout follows).
    ReadOwn,
    /// Read anything else: lists, histories, events, keys' own records.
    Read,
    /// Change the shop's setup: make, roll or revoke keys, resend a merchant
    /// event.
    Manage,
}

/// What a key may do (argued in docs/api.md, "API keys").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    /// Everything, keys included.
    Full,
    /// Every read, no write: a support tool, a dashboard.
    ReadOnly,
    /// Move money and read back the objects it made, by id; no lists, no
    /// events, no histories, no keys: the checkout server's key, which
    /// cannot be used to browse the shop's customers if it leaks.
    Payments,
}

impl Scope {
    /// The stable name (`full`, `read_only`, `payments`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Full => "full",
            Self::ReadOnly => "read_only",
            Self::Payments => "payments",
        }
    }

    /// Parses a stored or requested name.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "full" => Some(Self::Full),
            "read_only" => Some(Self::ReadOnly),
            "payments" => Some(Self::Payments),
            _ => None,
        }
    }

    /// Whether a key of this scope may make a request asking `access`.
    pub fn allows(self, access: Access) -> bool {
        match self {
            Self::Full => true,
            Self::ReadOnly => matches!(access, Access::Read | Access::ReadOwn),
            Self::Payments => matches!(access, Access::Move | Access::ReadOwn),
        }
    }
}

/// A new key's secret, in clear: `sk_live_` or `sk_test_` and 48 hex digits
/// of the OS generator. Exists only until it is shown once and hashed;
/// `Debug` hides it.
#[derive(Clone)]
pub struct ApiKeySecret(ShopSecret);

impl ApiKeySecret {
    /// How many characters of a secret stay visible as its prefix.
    pub const PREFIX_LEN: usize = 12;

    /// A fresh secret for a key of `mode`.
    pub fn generate(mode: Mode) -> Self {
        let mut bytes = [0_u8; 24];
        rand::rng().fill_bytes(&mut bytes);
        let secret = format!("sk_{}_{}", mode.as_str(), hex::encode(bytes));
        Self(ShopSecret::from_string(secret))
    }

    /// The clear text, to show once.
    pub fn expose(&self) -> &str {
        self.0.expose()
    }

    /// The part that stays visible (`sk_live_4f3a`).
    pub fn prefix(&self) -> String {
        self.expose().chars().take(Self::PREFIX_LEN).collect()
    }

    /// What the store keeps.
    pub fn hash(&self) -> SecretHash {
        self.0.hash()
    }
}

impl fmt::Debug for ApiKeySecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKeySecret(***)")
    }
}

/// An API key as stored, without its secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiKey {
    /// Its id.
    pub id: ApiKeyId,
    /// Its shop.
    pub shop_id: ShopId,
    /// Live or test.
    pub mode: Mode,
    /// What it may do.
    pub scope: Scope,
    /// The visible start of its secret; `None` for a shop's first secret,
    /// set before keys had prefixes (the store never saw it in clear).
    pub prefix: Option<String>,
    /// What it is for, as its maker said.
    pub description: Option<String>,
    /// When it was made.
    pub created_at: OffsetDateTime,
    /// When it stops working, if ever (a roll sets it on the key it replaces).
    pub expires_at: Option<OffsetDateTime>,
    /// When it was revoked, if it was.
    pub revoked_at: Option<OffsetDateTime>,
    /// When it last authenticated a request, to the minute; `None` if never
    /// (or not since it was recorded).
    pub last_used_at: Option<OffsetDateTime>,
}

impl ApiKey {
    /// Whether it authenticates at `now`: not revoked, not expired.
    pub fn active_at(&self, now: OffsetDateTime) -> bool {
        self.revoked_at.is_none() && self.expires_at.is_none_or(|at| now < at)
    }

    /// Its state at `now`, as lists show it (a revoked key is revoked
    /// whatever its expiry).
    pub fn state_at(&self, now: OffsetDateTime) -> KeyState {
        if self.revoked_at.is_some() {
            KeyState::Revoked
        } else if self.active_at(now) {
            KeyState::Active
        } else {
            KeyState::Expired
        }
    }
}

/// Whether a key works at a moment ([`ApiKey::state_at`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyState {
    /// It authenticates requests.
    Active,
    /// Its expiry has passed.
    Expired,
    /// It was revoked.
    Revoked,
}

impl KeyState {
    /// `active`, `expired` or `revoked`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Expired => "expired",
            Self::Revoked => "revoked",
        }
    }
}

/// A key with the hash its secret is checked against: what authentication
/// reads (and caches) for a shop.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyCredential {
    /// The key.
    pub key: ApiKey,
    /// Its secret's SHA-256.
    pub hash: SecretHash,
}

/// A key to store: everything but what the store decides (its row's times).
#[derive(Debug, Clone)]
pub struct NewApiKey {
    /// Its id.
    pub id: ApiKeyId,
    /// Its shop.
    pub shop_id: ShopId,
    /// Live or test.
    pub mode: Mode,
    /// What it may do.
    pub scope: Scope,
    /// Its secret's SHA-256.
    pub hash: SecretHash,
    /// The visible start of its secret.
    pub prefix: String,
    /// What it is for.
    pub description: Option<String>,
    /// When it stops working, if ever.
    pub expires_at: Option<OffsetDateTime>,
    /// The shop's request that makes it, when it came through the API: its
    /// `Idempotency-Key`, kept with the key so that a repeat finds it.
    pub request: Option<MakingRequest>,
}

/// The request that makes a key through the API: its idempotency key and
/// the fingerprint of what it asked (operation, path and body), so that a
/// repeat is told from a different request reusing the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MakingRequest {
    /// The `Idempotency-Key` header.
    pub idempotency_key: String,
    /// SHA-256 of the operation, the path's key id (for a roll) and the body.
    pub fingerprint: [u8; 32],
}

/// A key written by a make or a roll, or found as the answer to an earlier
/// request with the same idempotency key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredKey {
    /// The key.
    pub key: ApiKey,
    /// `true` when an earlier request with the same idempotency key made it
    /// (nothing was written now; its secret was shown to that request).
    pub replayed: bool,
}

impl NewApiKey {
    /// A key of `shop` with a fresh id, and `secret`'s hash and prefix.
    pub fn of(shop_id: ShopId, mode: Mode, scope: Scope, secret: &ApiKeySecret) -> Self {
        Self {
            id: ApiKeyId::generate(),
            shop_id,
            mode,
            scope,
            hash: secret.hash(),
            prefix: secret.prefix(),
            description: None,
            expires_at: None,
            request: None,
        }
    }
}

/// Where among a shop's keys the key of a presented secret's hash is (the
/// secret hashed once by the caller), active or not: the caller tells a
/// revoked or expired key ([`ApiKey::active_at`]) from a wrong secret. Every
/// key's hash is compared in constant time (an operator may have chosen a
/// shop's first secret, and its hash is unsalted: no timing of a compare
/// should say how much of it matched).
pub fn position(keys: &[KeyCredential], presented: &SecretHash) -> Option<usize> {
    let mut found = None;
    for (at, credential) in keys.iter().enumerate() {
        if credential.hash.matches(presented) {
            found = Some(at);
        }
    }
    found
}

/// Why a key could not be made, rolled or revoked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyRefusal {
    /// No such shop.
    #[error("no shop {0}")]
    NoShop(String),
    /// No such key of this shop.
    #[error("no key {0} in this shop")]
    NoKey(String),
    /// The key is revoked or expired already.
    #[error("key {0} is revoked or expired")]
    Inactive(String),
    /// The shop holds [`MAX_ACTIVE_KEYS`] active keys.
    #[error("the shop holds {MAX_ACTIVE_KEYS} active keys; revoke one first")]
    TooMany,
    /// The idempotency key made a key with a different request.
    #[error("this idempotency key was used with a different request")]
    RequestReused,
    /// The new key's expiry is not in the future (by the store's clock).
    #[error("the key's expiry is not in the future")]
    ExpiryPassed,
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn key(expires_at: Option<OffsetDateTime>, revoked: bool) -> ApiKey {
        let now = OffsetDateTime::now_utc();
        ApiKey {
            id: ApiKeyId::generate(),
            shop_id: ShopId::new("shop-a").unwrap(),
            mode: Mode::Live,
            scope: Scope::Full,
            prefix: None,
            description: None,
            created_at: now,
            expires_at,
            revoked_at: revoked.then_some(now),
            last_used_at: None,
        }
    }

    #[test]
    fn a_key_is_active_until_revoked_or_expired() {
        let now = OffsetDateTime::now_utc();
        let hour = time::Duration::hours(1);
        assert!(key(None, false).active_at(now));
        assert!(key(Some(now + hour), false).active_at(now));
        assert!(!key(Some(now), false).active_at(now), "expired at its time");
        assert!(!key(None, true).active_at(now));
        assert_eq!(key(None, false).state_at(now), KeyState::Active);
        assert_eq!(key(Some(now), false).state_at(now), KeyState::Expired);
        assert_eq!(key(Some(now), true).state_at(now), KeyState::Revoked);
    }

    #[test]
    fn the_presented_secret_finds_its_key() {
        let now = OffsetDateTime::now_utc();
        let old = ApiKeySecret::generate(Mode::Live);
        let new = ApiKeySecret::generate(Mode::Live);
        let keys = vec![
            KeyCredential {
                key: key(Some(now - time::Duration::seconds(1)), false),
                hash: old.hash(),
            },
            KeyCredential {
                key: key(None, false),
                hash: new.hash(),
            },
        ];
        let presented = |s: &ApiKeySecret| ShopSecret::from_string(s.expose());
        assert_eq!(position(&keys, &presented(&new).hash()), Some(1));
        let expired = &keys[position(&keys, &presented(&old).hash()).unwrap()].key;
        assert!(
            !expired.active_at(now),
            "found, and told apart by its expiry"
        );
        assert_eq!(
            position(
                &keys,
                &ShopSecret::from_string("sk_guess_0123456789").hash()
            ),
            None
        );
    }

    #[test]
    fn scopes_allow_what_they_say_and_never_grant_wider() {
        use Access::*;
        for access in [Move, ReadOwn, Read, Manage] {
            assert!(Scope::Full.allows(access));
        }
        assert!(!Scope::ReadOnly.allows(Move));
        assert!(!Scope::ReadOnly.allows(Manage));
        assert!(Scope::Payments.allows(ReadOwn));
        assert!(!Scope::Payments.allows(Manage));
        // Only a full key manages keys, so none makes a key wider than itself.
        assert!(!Scope::Payments.allows(Manage) && !Scope::ReadOnly.allows(Manage));
        for scope in [Scope::Full, Scope::ReadOnly, Scope::Payments] {
            assert_eq!(Scope::parse(scope.as_str()), Some(scope));
        }
        assert_eq!(Mode::parse("test"), Some(Mode::Test));
        assert_eq!(Mode::parse("prod"), None);
    }

    #[test]
    fn secrets_carry_their_mode_and_show_a_prefix() {
        let secret = ApiKeySecret::generate(Mode::Test);
        assert!(secret.expose().starts_with("sk_test_"));
        assert_eq!(secret.expose().len(), "sk_test_".len() + 48);
        assert_eq!(secret.prefix(), secret.expose()[..12]);
        assert!(format!("{secret:?}").contains("***"));
        assert!(ApiKeyId::parse(ApiKeyId::generate().as_str()).is_ok());
    }
}
