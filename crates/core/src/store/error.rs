//! How a store call fails.

/// An error of a store's database driver, boxed: core knows no driver.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Why a store call failed.
///
/// The variants that come from the database keep the driver's error as
/// their [`source`](std::error::Error::source); their messages say only
/// their own part, so a printed chain names the driver's error once (log
/// one with [`Chain`](crate::Chain)).
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database could not be reached or did not answer in time. Nothing may
    /// be executed on the strength of a call that failed this way.
    #[error("store unavailable")]
    Unavailable {
        /// What the driver said.
        source: BoxError,
    },
    /// The store is too busy to take new work now (its queue is full); the
    /// call did nothing. Only calls that start work (a claim, a take-over)
    /// are refused this way; retry later.
    #[error("store overloaded")]
    Overloaded {
        /// What the store's queue said.
        source: BoxError,
    },
    /// A row could not be read back into a domain value (a bug or a manual edit).
    #[error("corrupt row: {what}")]
    Corrupt {
        /// What is wrong with the row.
        what: String,
        /// The error that found it, when there is one.
        #[source]
        source: Option<BoxError>,
    },
    /// `add_shop` for a shop id that exists.
    #[error("shop `{0}` already exists")]
    ShopExists(String),
    /// A list's cursor (`starting_after`, `ending_before`) is not a row of
    /// the shop's list: another shop's, or unknown. Nothing was read.
    #[error("unknown cursor `{0}`")]
    UnknownCursor(String),
    /// Any other database error.
    #[error("store error")]
    Other(#[source] BoxError),
}

impl StoreError {
    /// [`StoreError::Unavailable`] because of `source`.
    pub fn unavailable(source: impl Into<BoxError>) -> Self {
        Self::Unavailable {
            source: source.into(),
        }
    }

    /// [`StoreError::Overloaded`] because of `source`.
    pub fn overloaded(source: impl Into<BoxError>) -> Self {
        Self::Overloaded {
            source: source.into(),
        }
    }

    /// [`StoreError::Corrupt`], saying what is wrong.
    pub fn corrupt(what: impl Into<String>) -> Self {
        Self::Corrupt {
            what: what.into(),
            source: None,
        }
    }

    /// [`StoreError::Corrupt`] found by `source`, which says what is wrong.
    pub fn corrupt_by(source: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::Corrupt {
            what: source.to_string(),
            source: Some(Box::new(source)),
        }
    }

    /// [`StoreError::Other`] because of `source` (an error, or a message).
    pub fn other(source: impl Into<BoxError>) -> Self {
        Self::Other(source.into())
    }
}
