//! Whether the database answers: the readiness probe's one statement.

use async_trait::async_trait;
use chargeonce_core::StoreError;
use chargeonce_core::store::Health;

use super::PgStore;
use super::errors::store_error;

#[async_trait]
impl Health for PgStore {
    /// Runs `SELECT 1`; an error is the store's classification of why it failed.
    async fn ping(&self) -> Result<(), StoreError> {
        sqlx::query("SELECT 1")
            .execute(&mut *self.conn().await?)
            .await
            .map_err(store_error)?;
        Ok(())
    }
}
