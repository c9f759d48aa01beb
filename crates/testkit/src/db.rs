//! One test's database: a fresh PostgreSQL database or a fresh SQLite file.
//!
//! PostgreSQL is reached at `CHARGEONCE_TEST_PG` (default
//! `postgres://postgres@127.0.0.1:5432/postgres`, trust auth); each
//! [`TestDb::postgres`] creates a database named `chargeonce_test_<uuid>` and
//! drops it when the value is dropped.

use std::path::PathBuf;

use sqlx::Connection;

/// The server tests connect to for creating databases.
pub fn admin_url() -> String {
    std::env::var("CHARGEONCE_TEST_PG")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
}

/// One test's database: a fresh PostgreSQL database or a fresh SQLite file.
pub struct TestDb {
    url: String,
    pg_name: Option<String>,
    dir: tempfile::TempDir,
}

impl TestDb {
    /// A new, empty PostgreSQL database.
    ///
    /// # Panics
    /// When PostgreSQL cannot be reached (tests need it running).
    pub async fn postgres() -> Self {
        let admin = admin_url();
        let name = format!("chargeonce_test_{}", uuid::Uuid::new_v4().simple());
        let mut conn = sqlx::PgConnection::connect(&admin)
            .await
            .unwrap_or_else(|e| panic!("PostgreSQL at {admin} is needed for this test: {e}"));
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut conn)
            .await
            .expect("create test database");
        let (base, _) = admin
            .rsplit_once('/')
            .expect("admin URL has a database path");
        Self {
            url: format!("{base}/{name}"),
            pg_name: Some(name),
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    /// A new SQLite file in a temporary folder (removed on drop).
    pub fn sqlite() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let url = format!("sqlite://{}", dir.path().join("chargeonce.db").display());
        Self {
            url,
            pg_name: None,
            dir,
        }
    }

    /// The database URL, as `chargeonce serve --database-url` takes it.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A scratch folder that lives as long as the database (for ledger files).
    pub fn dir(&self) -> PathBuf {
        self.dir.path().to_path_buf()
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let Some(name) = self.pg_name.take() else {
            return;
        };
        // Drop runs inside or outside a runtime; a thread with its own runtime works in both.
        let _ = std::thread::spawn(move || {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            rt.block_on(async move {
                if let Ok(mut conn) = sqlx::PgConnection::connect(&admin_url()).await {
                    let sql = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
                    let _ = sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
                        .execute(&mut conn)
                        .await;
                }
            });
        })
        .join();
    }
}
