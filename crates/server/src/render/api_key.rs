//! An API key as `/v1/api-keys` shows it.

use chargeonce_core::api_key::{ApiKey, KeyState, Mode, Scope};
use chargeonce_wire as wire;
use time::OffsetDateTime;

use super::rfc3339;

/// The key as the API shows it at `now`, with `secret` only in the answer
/// to the request that made it.
pub fn api_key_view(key: &ApiKey, now: OffsetDateTime, secret: Option<&str>) -> wire::ApiKey {
    wire::ApiKey {
        id: key.id.to_string(),
        object: wire::ApiKeyObject::ApiKey,
        livemode: key.mode == Mode::Live,
        scope: match key.scope {
            Scope::Full => wire::ApiKeyScope::Full,
            Scope::ReadOnly => wire::ApiKeyScope::ReadOnly,
            Scope::Payments => wire::ApiKeyScope::Payments,
        },
        prefix: key.prefix.clone(),
        description: key.description.clone(),
        state: match key.state_at(now) {
            KeyState::Active => wire::ApiKeyState::Active,
            KeyState::Expired => wire::ApiKeyState::Expired,
            KeyState::Revoked => wire::ApiKeyState::Revoked,
        },
        created_at: rfc3339(key.created_at),
        expires_at: key.expires_at.map(rfc3339),
        revoked_at: key.revoked_at.map(rfc3339),
        last_used_at: key.last_used_at.map(rfc3339),
        secret: secret.map(str::to_owned),
    }
}

/// The wire's scope as the core's.
pub fn scope_of(scope: wire::ApiKeyScope) -> Scope {
    match scope {
        wire::ApiKeyScope::Full => Scope::Full,
        wire::ApiKeyScope::ReadOnly => Scope::ReadOnly,
        wire::ApiKeyScope::Payments => Scope::Payments,
    }
}
