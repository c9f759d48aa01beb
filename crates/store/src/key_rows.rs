//! The rows of a shop's API keys and their column list, shared by both
//! stores (declared with the same [`rows!`] macro as [`crate::rows`]).

use chargeonce_core::api_key::{ApiKey, ApiKeyId, KeyCredential, Mode, Scope};
use chargeonce_core::{SecretHash, ShopId, StoreError};
use chargeonce_sqlite::rusqlite;

use crate::rows::{At, FromSqliteRow, rows};

/// The columns of an API key row ([`ApiKeyRow`]); its times decode as
/// [`At`] in both dialects.
macro_rules! api_key_columns {
    () => {
        "shop_id, id, mode, scope, secret_sha256, prefix, description, created_at, expires_at, \
         revoked_at, last_used_at"
    };
}
pub(crate) use api_key_columns;

rows! {
    /// An API key row ([`api_key_columns`]).
    struct ApiKeyRow {
        shop_id: String,
        id: String,
        mode: String,
        scope: String,
        secret_sha256: Vec<u8>,
        prefix: Option<String>,
        description: Option<String>,
        created_at: At,
        expires_at: Option<At>,
        revoked_at: Option<At>,
        last_used_at: Option<At>,
    }
}

impl TryFrom<ApiKeyRow> for KeyCredential {
    type Error = StoreError;

    fn try_from(row: ApiKeyRow) -> Result<Self, StoreError> {
        let corrupt = |what: &str| StoreError::corrupt(format!("api key {}: {what}", row.id));
        let hash = SecretHash::from_bytes(&row.secret_sha256).ok_or_else(|| corrupt("hash"))?;
        let key = ApiKey {
            id: ApiKeyId::parse(&row.id).map_err(StoreError::corrupt_by)?,
            shop_id: ShopId::new(&row.shop_id).map_err(StoreError::corrupt_by)?,
            mode: Mode::parse(&row.mode).ok_or_else(|| corrupt("mode"))?,
            scope: Scope::parse(&row.scope).ok_or_else(|| corrupt("scope"))?,
            prefix: row.prefix,
            description: row.description,
            created_at: row.created_at.0,
            expires_at: row.expires_at.map(|at| at.0),
            revoked_at: row.revoked_at.map(|at| at.0),
            last_used_at: row.last_used_at.map(|at| at.0),
        };
        Ok(Self { key, hash })
    }
}

/// 32 random bytes: a hash no secret has, to retire the copy of a first
/// secret's hash in `shops.secret_sha256` (read only by binaries from before
/// the keys' migration).
pub(crate) fn random_hash() -> [u8; 32] {
    use rand::RngCore as _;
    let mut bytes = [0_u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    bytes
}
