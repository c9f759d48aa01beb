//! Our ids of payments and refunds: a prefix (`pay_`, `re_`) and a UUIDv7
//! in 32 hex digits, time-ordered. One macro writes both types, so the two
//! cannot drift apart (they did once: the same 30 lines twice).

/// Declares an id type `$name` with prefix `$prefix`, whose parse errors are
/// `ValidationError::$name`.
macro_rules! prefixed_id {
    ($(#[$doc:meta])* $name:ident, $prefix:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(String);

        impl $name {
            const PREFIX: &'static str = $prefix;

            /// A new, time-ordered id.
            pub fn generate() -> Self {
                Self(format!("{}{}", Self::PREFIX, uuid::Uuid::now_v7().simple()))
            }

            /// Checks an id given by a client or read back from a store.
            pub fn parse(id: &str) -> Result<Self, $crate::ValidationError> {
                let bad = || $crate::ValidationError::$name(id.chars().take(64).collect());
                let hex = id.strip_prefix(Self::PREFIX).ok_or_else(bad)?;
                if hex.len() != 32 || uuid::Uuid::try_parse(hex).is_err() {
                    return Err(bad());
                }
                Ok(Self(id.to_owned()))
            }

            /// The id as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}

pub(crate) use prefixed_id;
