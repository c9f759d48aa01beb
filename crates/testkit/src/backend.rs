//! Which store a test runs on, and [`on_both_stores!`](crate::on_both_stores),
//! which defines a test once per store.

use crate::db::TestDb;

/// Which store a test runs on. Every test gets a database of its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// PostgreSQL: a fresh database on the test server ([`TestDb::postgres`]).
    Postgres,
    /// SQLite: a fresh file in a temporary folder ([`TestDb::sqlite`]).
    Sqlite,
}

impl Backend {
    /// A fresh, empty database of this kind.
    ///
    /// # Panics
    /// On PostgreSQL, when the server cannot be reached.
    pub async fn db(self) -> TestDb {
        match self {
            Self::Postgres => TestDb::postgres().await,
            Self::Sqlite => TestDb::sqlite(),
        }
    }
}

/// Defines each listed test once per store, in the modules `postgres` and
/// `sqlite`: `on_both_stores!(a, b)` makes `postgres::a`, `sqlite::a`, ...,
/// each a multi-threaded tokio test calling `super::a(Backend::Postgres)` (or
/// `Sqlite`), an `async fn` of the enclosing module.
///
/// With a setup first, `on_both_stores!(fixture => a, b)`, each test calls
/// `super::a(super::fixture(backend).await)`: `fixture` is an `async fn`
/// taking a [`Backend`](crate::Backend), in (or imported into) the enclosing
/// module.
///
/// The calling crate needs `tokio` (with the `macros` and `rt-multi-thread`
/// features) among its dependencies.
#[macro_export]
macro_rules! on_both_stores {
    (@store $store:ident $backend:ident $setup:tt $($name:ident)*) => {
        mod $store {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    let backend = $crate::Backend::$backend;
                    $crate::on_both_stores!(@call $setup $name backend);
                }
            )*
        }
    };
    (@call [] $name:ident $backend:ident) => {
        super::$name($backend).await
    };
    (@call [$setup:ident] $name:ident $backend:ident) => {
        super::$name(super::$setup($backend).await).await
    };
    ($setup:ident => $($name:ident),* $(,)?) => {
        $crate::on_both_stores!(@store postgres Postgres [$setup] $($name)*);
        $crate::on_both_stores!(@store sqlite Sqlite [$setup] $($name)*);
    };
    ($($name:ident),* $(,)?) => {
        $crate::on_both_stores!(@store postgres Postgres [] $($name)*);
        $crate::on_both_stores!(@store sqlite Sqlite [] $($name)*);
    };
}
