//! Which PostgreSQL errors count as what: connection trouble is
//! [`StoreError::Unavailable`] (the caller answers 503 and executes
//! nothing), rows that do not decode are [`StoreError::Corrupt`], the rest
//! [`StoreError::Other`].

use chargeonce_core::StoreError;

/// Classifies a database error.
pub(super) fn store_error(error: sqlx::Error) -> StoreError {
    match &error {
        sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed => StoreError::unavailable(error),
        sqlx::Error::Database(db) => {
            let code = db.code().unwrap_or_default();
            // PostgreSQL: connection exceptions (08), operator intervention
            // (57P01..57P03), too many connections (53300), statement or lock
            // timeouts (57014, 55P03), and a write refused by a node that is
            // not (or no longer) the leader (25006, read_only_sql_transaction:
            // a demoted leader, or a standby reached during a failover).
            // SQLite: SQLITE_BUSY (5), SQLITE_LOCKED (6).
            let transient = code.starts_with("08")
                || code.starts_with("57P")
                || matches!(
                    code.as_ref(),
                    "53300" | "57014" | "55P03" | "25006" | "5" | "6" | "517"
                );
            if transient {
                StoreError::unavailable(error)
            } else {
                StoreError::other(error)
            }
        }
        sqlx::Error::ColumnDecode { .. }
        | sqlx::Error::Decode(_)
        | sqlx::Error::ColumnNotFound(_)
        | sqlx::Error::TypeNotFound { .. } => StoreError::corrupt_by(error),
        _ => StoreError::other(error),
    }
}
