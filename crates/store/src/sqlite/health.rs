//! Whether the database answers: the readiness probe's one statement.

use async_trait::async_trait;
use chargeonce_core::StoreError;
use chargeonce_core::store::Health;

use super::SqliteStore;

#[async_trait]
impl Health for SqliteStore {
    /// Runs `SELECT 1`; an error is the store's classification of why it failed.
    async fn ping(&self) -> Result<(), StoreError> {
        self.read(|conn| {
            conn.prepare_cached("SELECT 1")?.query_row([], |_| Ok(()))?;
            Ok(())
        })
        .await
    }
}
