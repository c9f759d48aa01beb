//! The service in one process, as the tests run it: a store on a fresh
//! database, the in-process acquirer simulator, the engine, the server's
//! public router and its operator router (with the console) each on a free
//! port of `127.0.0.1`, and two shops with known secrets.
//! Dropping the [`TestService`] stops the server and removes the database.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use chargeonce_acquirer::{LedgerEntry, Simulator, SimulatorConfig};
use chargeonce_console::{Console, ConsoleSettings};
use chargeonce_core::api_key::Mode;
use chargeonce_core::webhook::WebhookSecret;
use chargeonce_core::{
    Acquirer, Acquirers, Engine, EngineConfig, KeyTiming, ShopId, ShopSecret, Store,
};
use chargeonce_server::conn::ConnectionLimits;
use chargeonce_server::{AppState, HttpRender, Metrics};
use chargeonce_store::{PgStore, PoolConfig, SqliteStore, SqliteWriterStats};
use chargeonce_workers::egress::{Egress, EgressPolicy};
use chargeonce_workers::reconciler::Reconciler;
use serde_json::{Value, json};

use crate::backend::Backend;
use crate::db::TestDb;

/// The shop every service has: its id.
pub const SHOP: &str = "shop-a";
/// The secret key of [`SHOP`].
pub const SECRET: &str = "sk_test_shop_a_0123456789";
/// A second shop, for tests that keep shops apart: its id.
pub const OTHER_SHOP: &str = "shop-b";
/// The secret key of [`OTHER_SHOP`].
pub const OTHER_SECRET: &str = "sk_test_shop_b_0123456789";
/// The secret the acquirer's webhooks to the service are signed with.
pub const WEBHOOK_SECRET: &str = "whsec_test_server_0123456789";

/// How slow the simulator's `tok_slow` is unless [`ServiceBuilder::slow`] says otherwise.
const SLOW: Duration = Duration::from_millis(1500);

/// A change to the server's state (its limits, say).
type StateTweak = Box<dyn FnOnce(AppState) -> AppState + Send>;
/// More routes, merged into the server's router.
type Routes = Box<dyn FnOnce(AppState) -> axum::Router + Send>;
/// What the engine calls instead of the simulator itself (a wrapper that
/// misbehaves on purpose, say).
type AcquirerWrap = Box<dyn FnOnce(Arc<Simulator>) -> Arc<dyn Acquirer> + Send>;

/// The options tests vary, for [`TestService::builder`]. Unless changed:
/// leases of 30 s, keys kept an hour, the acquirer timeout of
/// [`EngineConfig::default`], a `tok_slow` of 1.5 s, the default pool, state
/// and connection limits (fitted to the file limit, as `chargeonce serve`
/// does), acquirer webhooks signed with [`WEBHOOK_SECRET`], and only the
/// service's own routes.
#[must_use = "a builder does nothing until `start`"]
pub struct ServiceBuilder {
    backend: Backend,
    engine: EngineConfig,
    slow: Duration,
    pool: PoolConfig,
    state: StateTweak,
    connection: Option<ConnectionLimits>,
    webhook_secret: Option<WebhookSecret>,
    sim_routes: bool,
    routes: Vec<Routes>,
    acquirer_ignores_keys: bool,
    acquirer: AcquirerWrap,
    console: ConsoleSettings,
}

impl ServiceBuilder {
    fn new(backend: Backend) -> Self {
        Self {
            backend,
            engine: EngineConfig {
                timing: KeyTiming {
                    lease: Duration::from_secs(30),
                    ttl: Duration::from_secs(3600),
                },
                ..EngineConfig::default()
            },
            slow: SLOW,
            pool: PoolConfig::default(),
            state: Box::new(|state| state),
            connection: None,
            webhook_secret: Some(WebhookSecret::new(WEBHOOK_SECRET)),
            sim_routes: false,
            routes: Vec::new(),
            acquirer_ignores_keys: false,
            acquirer: Box::new(|sim| sim),
            console: ConsoleSettings::default(),
        }
    }

    /// Changes the engine's configuration.
    pub fn engine(mut self, tune: impl FnOnce(EngineConfig) -> EngineConfig) -> Self {
        self.engine = tune(self.engine);
        self
    }

    /// The keys' lease and time to live.
    pub fn timing(mut self, timing: KeyTiming) -> Self {
        self.engine.timing = timing;
        self
    }

    /// How long the engine waits for the acquirer before the outcome is unknown.
    pub fn acquirer_timeout(mut self, timeout: Duration) -> Self {
        self.engine.acquirer_timeout = timeout;
        self
    }

    /// How long the simulator takes over `tok_slow`.
    pub fn slow(mut self, slow: Duration) -> Self {
        self.slow = slow;
        self
    }

    /// A simulator that ignores acquirer keys (a provider without
    /// idempotency): the engine parks a key for the settle window after an
    /// unknown outcome instead of sending again.
    pub fn acquirer_ignores_keys(mut self) -> Self {
        self.acquirer_ignores_keys = true;
        self
    }

    /// What the engine calls: `wrap` of the simulator (which the tests
    /// still read and steer through [`TestService::sim`]).
    pub fn acquirer(
        mut self,
        wrap: impl FnOnce(Arc<Simulator>) -> Arc<dyn Acquirer> + Send + 'static,
    ) -> Self {
        self.acquirer = Box::new(wrap);
        self
    }

    /// The store's pool (and on SQLite its writer queue).
    pub fn pool(mut self, pool: PoolConfig) -> Self {
        self.pool = pool;
        self
    }

    /// Changes the server's state before it serves (after earlier changes).
    pub fn state(mut self, tweak: impl FnOnce(AppState) -> AppState + Send + 'static) -> Self {
        let earlier = self.state;
        self.state = Box::new(move |state| tweak(earlier(state)));
        self
    }

    /// Changes the operator console's settings (its login limits, its
    /// cookie, the operator secret it checks while the store has none).
    pub fn console(mut self, tune: impl FnOnce(ConsoleSettings) -> ConsoleSettings) -> Self {
        self.console = tune(self.console);
        self
    }

    /// Connection limits taken as they are (not fitted to the file limit).
    pub fn connection_limits(mut self, limits: ConnectionLimits) -> Self {
        self.connection = Some(limits);
        self
    }

    /// No secret for the acquirer's webhooks: the service refuses them.
    pub fn without_webhook_secret(mut self) -> Self {
        self.webhook_secret = None;
        self
    }

    /// Serves the simulator's own API (its ledger, its faults) under `/sim`
    /// on the operator listener, as `chargeonce serve` does with the
    /// in-process simulator.
    pub fn sim_routes(mut self) -> Self {
        self.sim_routes = true;
        self
    }

    /// Merges more routes, made from the server's final state, into its router.
    pub fn routes(
        mut self,
        routes: impl FnOnce(AppState) -> axum::Router + Send + 'static,
    ) -> Self {
        self.routes.push(Box::new(routes));
        self
    }

    /// Creates the database, the store with both shops, the simulator (its
    /// ledger in the database's scratch folder) and the engine, and serves
    /// on a free port.
    ///
    /// # Panics
    /// When any of them cannot be made (PostgreSQL down, say).
    #[allow(clippy::unwrap_used)]
    pub async fn start(self) -> TestService {
        let db = self.backend.db().await;
        let (store, concrete): (Arc<dyn Store>, Concrete) = match self.backend {
            Backend::Postgres => {
                let s = Arc::new(PgStore::connect(db.url(), &self.pool).await.unwrap());
                (s.clone(), Concrete::Pg(s))
            }
            Backend::Sqlite => {
                let s = Arc::new(SqliteStore::connect(db.url(), &self.pool).await.unwrap());
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
        let config = SimulatorConfig { slow: self.slow };
        let sim = Arc::new(
            Simulator::open(&db.dir().join("ledger.db"), config)
                .await
                .unwrap()
                .with_idempotency(!self.acquirer_ignores_keys),
        );
        // Test mode's simulator: a ledger of its own, always idempotent.
        let test_sim = Arc::new(
            Simulator::open(
                &db.dir().join("test-ledger.db"),
                SimulatorConfig { slow: self.slow },
            )
            .await
            .unwrap(),
        );
        let metrics = Arc::new(Metrics::new());
        let acquirer = (self.acquirer)(sim.clone());
        let acquirers = Acquirers::new(acquirer, test_sim.clone());
        let engine = Arc::new(
            Engine::new(store.clone(), acquirers, Arc::new(HttpRender), self.engine)
                .unwrap()
                .with_observer(metrics.clone()),
        );
        // Endpoints on this machine are registered (tests receive on
        // loopback over http); a test of the guard brings its own judge.
        let mut state = AppState::new(engine.clone())
            .with_metrics(metrics.clone())
            .with_url_check(Arc::new(Egress::new(EgressPolicy::loopback())));
        if let Some(secret) = self.webhook_secret {
            state = state.with_webhook_secret(secret);
        }
        let state = (self.state)(state);
        let operator_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let operator_addr = operator_listener.local_addr().unwrap();
        let state = state.with_operator_listen(Some(operator_addr));
        let mut app = chargeonce_server::router(state.clone());
        for routes in self.routes {
            app = app.merge(routes(state.clone()));
        }
        let extra = if self.sim_routes {
            axum::Router::new()
                .nest_service("/sim", chargeonce_acquirer::router(sim.clone()))
                .nest_service("/sim-test", chargeonce_acquirer::router(test_sim.clone()))
        } else {
            axum::Router::new()
        };
        let console = chargeonce_console::router(Console::new(state.clone(), self.console));
        let operator_app = chargeonce_server::operator_router(state.clone(), console.merge(extra));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let limits = self.connection.unwrap_or_else(|| {
            ConnectionLimits::default().fit_fd_limit(chargeonce_server::conn::FD_RESERVE)
        });
        let closed = Metrics::close_observer(&metrics);
        let server = tokio::spawn(async move {
            let public = chargeonce_server::conn::serve_observed(
                listener,
                app,
                limits,
                closed.clone(),
                std::future::pending(),
            );
            let operator = chargeonce_server::conn::serve_observed(
                operator_listener,
                operator_app,
                limits,
                closed,
                std::future::pending(),
            );
            let (public, operator) = tokio::join!(public, operator);
            public.unwrap();
            operator.unwrap();
        });
        TestService {
            addr,
            base: format!("http://{addr}"),
            operator_base: format!("http://{operator_addr}"),
            http: reqwest::Client::new(),
            store,
            sim,
            test_sim,
            engine,
            metrics,
            state,
            concrete,
            server,
            db,
        }
    }
}

/// The store behind the service's `dyn Store`, for what only it can do.
enum Concrete {
    Pg(Arc<PgStore>),
    Lite(Arc<SqliteStore>),
}

/// A running service on a free port; see the [module docs](self).
pub struct TestService {
    /// Where it listens.
    pub addr: SocketAddr,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    /// The operator listener (the console, `/metrics`, `/sim`):
    /// `http://127.0.0.1:PORT`.
    pub operator_base: String,
    /// An HTTP client for the tests' requests.
    pub http: reqwest::Client,
    /// The store the engine and the routes use.
    pub store: Arc<dyn Store>,
    /// The in-process acquirer simulator (live mode's acquirer).
    pub sim: Arc<Simulator>,
    /// Test mode's simulator, with a ledger of its own.
    pub test_sim: Arc<Simulator>,
    /// The engine behind the routes.
    pub engine: Arc<Engine>,
    /// The metrics the engine and the server count in.
    pub metrics: Arc<Metrics>,
    /// A clone of the server's state (its caches, waiters and metrics).
    pub state: AppState,
    concrete: Concrete,
    server: tokio::task::JoinHandle<()>,
    db: TestDb,
}

impl TestService {
    /// A service on `backend` with every option as [`ServiceBuilder`] has it.
    pub async fn start(backend: Backend) -> Self {
        Self::builder(backend).start().await
    }

    /// A service on `backend`, its options to be chosen.
    pub fn builder(backend: Backend) -> ServiceBuilder {
        ServiceBuilder::new(backend)
    }

    /// The URL of `path` on this service.
    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// The URL of `path` on the operator listener (the console, `/metrics`,
    /// the simulator's `/sim`).
    pub fn operator_url(&self, path: &str) -> String {
        format!("{}{}", self.operator_base, path)
    }

    /// A `POST /v1/payments` as [`SHOP`] with a key and a JSON body.
    pub fn pay(&self, key: &str, body: &Value) -> reqwest::RequestBuilder {
        self.http
            .post(self.url("/v1/payments"))
            .basic_auth(SHOP, Some(SECRET))
            .header("idempotency-key", key)
            .json(body)
    }

    /// A `GET` of `path` as [`SHOP`].
    pub fn get(&self, path: &str) -> reqwest::RequestBuilder {
        self.http.get(self.url(path)).basic_auth(SHOP, Some(SECRET))
    }

    /// The database the store is on.
    pub fn db(&self) -> &TestDb {
        &self.db
    }

    /// The database URL.
    pub fn db_url(&self) -> &str {
        self.db.url()
    }

    /// Closes the store's connections: the database is now out of reach.
    pub async fn break_store(&self) {
        match &self.concrete {
            Concrete::Pg(s) => s.close().await,
            Concrete::Lite(s) => s.close().await,
        }
    }

    /// The SQLite writer's counters (`None` on PostgreSQL).
    pub fn sqlite_stats(&self) -> Option<SqliteWriterStats> {
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

    /// The simulator's ledger, every charge.
    ///
    /// # Panics
    /// When the ledger cannot be read.
    #[allow(clippy::unwrap_used)]
    pub async fn ledger(&self) -> Vec<LedgerEntry> {
        self.sim.ledger().await.unwrap()
    }

    /// The charges in the simulator's ledger for one order reference.
    pub async fn charges(&self, reference: &str) -> Vec<LedgerEntry> {
        let mut charges = self.ledger().await;
        charges.retain(|c| c.reference.as_str() == reference);
        charges
    }

    /// How many charges the simulator's ledger holds.
    pub async fn ledger_len(&self) -> usize {
        self.ledger().await.len()
    }

    /// A reconciler of live mode over this service's store and simulator,
    /// counting in its metrics.
    pub fn reconciler(&self) -> Reconciler {
        Reconciler {
            mode: Mode::Live,
            store: self.store.clone(),
            acquirer: self.sim.clone(),
            ledger: self.sim.clone(),
            observer: self.metrics.clone(),
        }
    }
}

impl Drop for TestService {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// The body of a `POST /v1/payments` in RUB: an order, an amount (`"1500.00"`)
/// and a simulator token (`tok_ok`, `tok_declined`, `tok_slow`, ...).
pub fn body(reference: &str, value: &str, token: &str) -> Value {
    json!({
        "amount": {"value": value, "currency": "RUB"},
        "reference": reference,
        "payment_method": {"token": token},
    })
}
