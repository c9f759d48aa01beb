//! A real server on a real socket, backed by a real store and the simulator.

#![allow(dead_code, clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use chargeonce_acquirer::{Simulator, SimulatorConfig};
use chargeonce_core::webhook::WebhookSecret;
use chargeonce_core::{Engine, EngineConfig, KeyTiming, ShopId, ShopSecret, Store};
use chargeonce_server::{AppState, HttpRender};
use chargeonce_store::{PgStore, PoolConfig, SqliteStore};
use chargeonce_testkit::TestDb;
use serde_json::{Value, json};

/// Which store a test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Postgres,
    Sqlite,
}

enum Concrete {
    Pg(Arc<PgStore>),
    Lite(Arc<SqliteStore>),
}

pub struct TestServer {
    pub base: String,
    /// A clone of the server's state (its caches, waiters and metrics).
    pub state: AppState,
    pub http: reqwest::Client,
    pub sim: Arc<Simulator>,
    pub store: Arc<dyn Store>,
    concrete: Concrete,
    server: tokio::task::JoinHandle<()>,
    _db: TestDb,
}

pub const SHOP: &str = "shop-a";
pub const SECRET: &str = "sk_test_shop_a_0123456789";
pub const OTHER_SHOP: &str = "shop-b";
pub const OTHER_SECRET: &str = "sk_test_shop_b_0123456789";
/// The secret acquirer webhooks are signed with.
pub const WEBHOOK_SECRET: &str = "whsec_test_server_0123456789";

pub struct Options {
    pub timing: KeyTiming,
    pub slow: Duration,
    pub acquirer_timeout: Duration,
    pub pool: PoolConfig,
    /// Changes to the server's state (its limits, say).
    pub state: fn(AppState) -> AppState,
    pub connection: chargeonce_server::conn::ConnectionLimits,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            timing: KeyTiming {
                lease: Duration::from_secs(30),
                ttl: Duration::from_secs(3600),
            },
            slow: Duration::from_millis(1500),
            acquirer_timeout: Duration::from_secs(10),
            pool: PoolConfig::default(),
            state: |state| state,
            connection: chargeonce_server::conn::ConnectionLimits::default(),
        }
    }
}

impl TestServer {
    pub async fn start(backend: Backend) -> Self {
        Self::start_with(backend, Options::default()).await
    }

    pub async fn start_with(backend: Backend, options: Options) -> Self {
        let db = match backend {
            Backend::Postgres => TestDb::postgres().await,
            Backend::Sqlite => TestDb::sqlite(),
        };
        let pool = options.pool.clone();
        let (store, concrete): (Arc<dyn Store>, Concrete) = match backend {
            Backend::Postgres => {
                let s = Arc::new(PgStore::connect(db.url(), &pool).await.unwrap());
                (s.clone(), Concrete::Pg(s))
            }
            Backend::Sqlite => {
                let s = Arc::new(SqliteStore::connect(db.url(), &pool).await.unwrap());
                (s.clone(), Concrete::Lite(s))
            }
        };
        for (shop, secret) in [(SHOP, SECRET), (OTHER_SHOP, OTHER_SECRET)] {
            store
                .add_shop(
                    &ShopId::new(shop).unwrap(),
                    &ShopSecret::new(secret).unwrap().hash(),
                )
                .await
                .unwrap();
        }
        let sim = Arc::new(
            Simulator::open(
                &db.dir().join("ledger.db"),
                SimulatorConfig { slow: options.slow },
            )
            .await
            .unwrap(),
        );
        let config = EngineConfig {
            timing: options.timing,
            acquirer_timeout: options.acquirer_timeout,
            ..EngineConfig::default()
        };
        let engine = Arc::new(
            Engine::new(store.clone(), sim.clone(), Arc::new(HttpRender), config).unwrap(),
        );
        let state = (options.state)(
            AppState::new(engine).with_webhook_secret(WebhookSecret::new(WEBHOOK_SECRET)),
        );
        let app = chargeonce_server::router(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let limits = options.connection;
        let server = tokio::spawn(async move {
            chargeonce_server::conn::serve_with(listener, app, limits, std::future::pending())
                .await
                .unwrap();
        });
        Self {
            base,
            state,
            http: reqwest::Client::new(),
            sim,
            store,
            concrete,
            server,
            _db: db,
        }
    }

    /// Closes the store's connections: the database is now out of reach.
    pub async fn break_store(&self) {
        match &self.concrete {
            Concrete::Pg(s) => s.close().await,
            Concrete::Lite(s) => s.close().await,
        }
    }

    /// The SQLite writer's counters (`None` on PostgreSQL).
    pub fn sqlite_stats(&self) -> Option<chargeonce_store::SqliteWriterStats> {
        match &self.concrete {
            Concrete::Pg(_) => None,
            Concrete::Lite(s) => Some(s.writer_stats()),
        }
    }

    /// The PostgreSQL store (`None` on SQLite).
    pub fn pg(&self) -> Option<&PgStore> {
        match &self.concrete {
            Concrete::Pg(s) => Some(s),
            Concrete::Lite(_) => None,
        }
    }

    /// The database URL.
    pub fn db_url(&self) -> &str {
        self._db.url()
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// A POST /v1/payments as shop A with a key and a JSON body.
    pub fn pay(&self, key: &str, body: &Value) -> reqwest::RequestBuilder {
        self.http
            .post(self.url("/v1/payments"))
            .basic_auth(SHOP, Some(SECRET))
            .header("idempotency-key", key)
            .json(body)
    }

    pub fn get(&self, path: &str) -> reqwest::RequestBuilder {
        self.http.get(self.url(path)).basic_auth(SHOP, Some(SECRET))
    }

    /// Charges in the simulator's ledger for one order reference.
    pub async fn charges_for(&self, reference: &str) -> Vec<chargeonce_acquirer::LedgerEntry> {
        self.sim
            .ledger()
            .await
            .unwrap()
            .into_iter()
            .filter(|c| c.reference.as_str() == reference)
            .collect()
    }

    pub async fn ledger_len(&self) -> usize {
        self.sim.ledger().await.unwrap().len()
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// `Authorization: Basic ...` of shop A, as a raw header line.
pub fn raw_auth() -> String {
    use base64::Engine as _;
    let credentials = base64::engine::general_purpose::STANDARD.encode(format!("{SHOP}:{SECRET}"));
    format!("Authorization: Basic {credentials}\r\n")
}

/// The seed's payment body.
pub fn body(reference: &str, value: &str, token: &str) -> Value {
    json!({
        "amount": {"value": value, "currency": "RUB"},
        "reference": reference,
        "payment_method": {"token": token},
    })
}

/// Status, headers and the raw body bytes of an answer.
pub struct Answer {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub bytes: Vec<u8>,
}

impl Answer {
    pub async fn of(response: reqwest::Response) -> Self {
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let bytes = response.bytes().await.unwrap().to_vec();
        Self {
            status,
            headers,
            bytes,
        }
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.bytes).unwrap()
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    pub fn replayed(&self) -> bool {
        self.header("idempotent-replayed") == Some("true")
    }

    /// Asserts a problem+json answer with this status and code.
    pub fn assert_problem(&self, status: u16, code: &str) {
        assert_eq!(
            self.status,
            status,
            "body: {}",
            String::from_utf8_lossy(&self.bytes)
        );
        assert_eq!(
            self.header("content-type"),
            Some("application/problem+json")
        );
        let problem = self.json();
        assert_eq!(problem["code"], code, "{problem}");
        assert_eq!(problem["status"], status);
        assert!(problem["title"].is_string() && problem["detail"].is_string());
        assert_eq!(problem["type"], format!("urn:chargeonce:problem:{code}"));
    }
}

pub async fn send(request: reqwest::RequestBuilder) -> Answer {
    Answer::of(request.send().await.unwrap()).await
}

/// Sends raw bytes over TCP and returns the status line's code (for headers
/// no HTTP client would send).
pub async fn raw_status(base: &str, request: &[u8]) -> u16 {
    raw_answer(base, request).await.0
}

/// Sends raw bytes over TCP; returns the status code and the whole answer as text.
pub async fn raw_answer(base: &str, request: &[u8]) -> (u16, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = base.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream.write_all(request).await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), stream.read_to_end(&mut out)).await;
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, text)
}

/// Defines each listed test once per store.
#[macro_export]
macro_rules! on_both_stores {
    ($($name:ident),* $(,)?) => {
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    super::$name(super::common::Backend::Postgres).await;
                }
            )*
        }
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
                async fn $name() {
                    super::$name(super::common::Backend::Sqlite).await;
                }
            )*
        }
    };
}
