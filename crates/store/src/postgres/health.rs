//! Whether the database answers: the readiness probe's one statement.

use chargeonce_core::StoreError;

use super::PgStore;
use super::errors::store_error;

/// Runs `SELECT 1`; an error is the store's classification of why it failed.
pub(super) async fn ping(store: &PgStore) -> Result<(), StoreError> {
    sqlx::query("SELECT 1")
        .execute(&mut *store.conn().await?)
        .await
        .map_err(store_error)?;
    Ok(())
}
