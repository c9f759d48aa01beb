//! A shop's API key as `/v1/api-keys` shows it: never its secret, except
//! once, in the answer to the request that made it.

use serde::{Deserialize, Serialize};

/// Always `api_key`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum ApiKeyObject {
    /// `api_key`.
    #[default]
    ApiKey,
}

/// What a key may do (docs/api.md, "API keys", argues the set).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum ApiKeyScope {
    /// Everything, managing keys included.
    Full,
    /// Every read; no POST.
    ReadOnly,
    /// Money moves, and reading back one payment, refund or capture by id.
    Payments,
}

/// Whether a key works now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum ApiKeyState {
    /// It authenticates requests.
    Active,
    /// Its expiry has passed (a roll sets one on the key it replaces).
    Expired,
    /// It was revoked.
    Revoked,
}

/// An API key of a shop.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ApiKey {
    /// `key_` and 32 hex digits.
    #[cfg_attr(
        feature = "openapi",
        schema(example = "key_01a2297968c07d11b0f4c7e8e0d6a3b1")
    )]
    pub id: String,
    /// Always `api_key`.
    pub object: ApiKeyObject,
    /// `true` for a live key (`sk_live_…`), `false` for a test key (`sk_test_…`),
    /// which sees and makes only the shop's test-mode objects.
    pub livemode: bool,
    /// What it may do.
    pub scope: ApiKeyScope,
    /// The visible start of its secret (`sk_live_4f3a`); `null` for a
    /// shop's first secret, set before keys had prefixes.
    #[cfg_attr(feature = "openapi", schema(example = "sk_live_4f3a"))]
    pub prefix: Option<String>,
    /// What it is for.
    pub description: Option<String>,
    /// Whether it works now.
    pub state: ApiKeyState,
    /// When it was made (RFC 3339, UTC, milliseconds).
    pub created_at: String,
    /// When it stops working, if ever.
    pub expires_at: Option<String>,
    /// When it was revoked, if it was.
    pub revoked_at: Option<String>,
    /// When it last authenticated a request, to the minute (written once a
    /// minute at most); `null` if never.
    pub last_used_at: Option<String>,
    /// The secret, in the answer to the request that made the key only: it
    /// is stored hashed and never shown again (a repeat of that request
    /// answers the key without it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(
        feature = "openapi",
        schema(example = "sk_live_4f3a9c0e5b7d1f2a3c4e5f60718293a4b5c6d7e8f9011223")
    )]
    pub secret: Option<String>,
}

/// Hides the secret.
impl std::fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiKey")
            .field("id", &self.id)
            .field("livemode", &self.livemode)
            .field("scope", &self.scope)
            .field("prefix", &self.prefix)
            .field("state", &self.state)
            .field("secret", &self.secret.as_ref().map(|_| "***"))
            .finish_non_exhaustive()
    }
}

/// The body of `POST /v1/api-keys`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CreateApiKey {
    /// What the key may do.
    pub scope: ApiKeyScope,
    /// What it is for (at most 200 characters).
    #[serde(default)]
    pub description: Option<String>,
    /// When it stops working (RFC 3339, in the future); never by default.
    #[serde(default)]
    #[cfg_attr(feature = "openapi", schema(example = "2027-01-01T00:00:00Z"))]
    pub expires_at: Option<String>,
}

/// The body of `POST /v1/api-keys/{id}/roll`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RollApiKey {
    /// Seconds the old key keeps working: 0 (at once) to 604800 (7 days);
    /// 86400 (24 h) by default.
    #[serde(default)]
    #[cfg_attr(
        feature = "openapi",
        schema(minimum = 0, maximum = 604800, example = 3600)
    )]
    pub expire_old_in_seconds: Option<u64>,
}

/// The body of `POST /v1/api-keys/{id}/revoke`: `{}`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RevokeApiKey {}
