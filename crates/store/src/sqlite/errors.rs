//! Which SQLite errors count as what: another holder of the lock is
//! [`StoreError::Unavailable`] (the caller answers 503 and executes
//! nothing), rows that do not decode are [`StoreError::Corrupt`], the rest
//! [`StoreError::Other`]; and how a call's error comes back from the thread
//! that ran it ([`Fail`]).

use chargeonce_core::StoreError;
use chargeonce_sqlite::Failure;
use chargeonce_sqlite::rusqlite;

/// A store error on its way back from an SQLite thread.
#[derive(Debug)]
pub(super) struct Fail(pub(super) StoreError);

/// What the steps that run on an SQLite thread return.
pub(super) type Result<T, E = Fail> = std::result::Result<T, E>;

impl From<StoreError> for Fail {
    fn from(error: StoreError) -> Self {
        Self(error)
    }
}

impl From<Failure> for Fail {
    fn from(failure: Failure) -> Self {
        Self(match failure {
            // Nothing of the call is in the file in any of these cases.
            Failure::Closed
            | Failure::NotRun(_)
            | Failure::RolledBack(_)
            | Failure::CommitFailed(_) => StoreError::unavailable(failure),
            Failure::Panicked(_) => StoreError::other(failure),
            Failure::Overloaded(_) => StoreError::overloaded(failure),
        })
    }
}

impl From<rusqlite::Error> for Fail {
    fn from(error: rusqlite::Error) -> Self {
        Self(sql_error(error))
    }
}

/// Classifies an SQLite error.
fn sql_error(error: rusqlite::Error) -> StoreError {
    use rusqlite::ErrorCode;
    match &error {
        rusqlite::Error::SqliteFailure(e, _)
            if matches!(
                e.code,
                ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked | ErrorCode::CannotOpen
            ) =>
        {
            StoreError::unavailable(error)
        }
        rusqlite::Error::FromSqlConversionFailure(..)
        | rusqlite::Error::InvalidColumnType(..)
        | rusqlite::Error::InvalidColumnName(_)
        | rusqlite::Error::IntegralValueOutOfRange(..) => StoreError::corrupt_by(error),
        _ => StoreError::other(error),
    }
}
