//! Whether the database answers: the readiness probe's one statement.

use chargeonce_core::StoreError;

use super::SqliteStore;

/// Runs `SELECT 1`; an error is the store's classification of why it failed.
pub(super) async fn ping(store: &SqliteStore) -> Result<(), StoreError> {
    store
        .read(|conn| {
            conn.prepare_cached("SELECT 1")?.query_row([], |_| Ok(()))?;
            Ok(())
        })
        .await
}
