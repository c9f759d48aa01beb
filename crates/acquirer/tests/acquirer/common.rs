//! Helpers shared by the tests.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use chargeonce_acquirer::api_router;
use chargeonce_connector::{HttpAcquirer, HttpAcquirerConfig};

use chargeonce_acquirer::{Simulator, SimulatorConfig};
use chargeonce_core::{
    AcquirerKey, CaptureId, CaptureRequest, CardToken, ChargeRequest, Money, PaymentId, Reference,
    ShopId, VoidRequest,
};

/// A unique directory under the system's temp dir, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new() -> Self {
        let dir = std::env::temp_dir().join(format!(
            "chargeonce-acquirer-test-{}",
            uuid::Uuid::new_v4().simple()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    /// The ledger file inside it (not created yet).
    pub fn ledger(&self) -> PathBuf {
        self.0.join("ledger.sqlite3")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A short `slow`, so `tok_slow` tests stay fast.
pub fn config() -> SimulatorConfig {
    SimulatorConfig {
        slow: Duration::from_secs(1),
    }
}

pub async fn memory_sim() -> Simulator {
    Simulator::in_memory(config()).await.unwrap()
}

pub async fn file_sim(path: &Path) -> Simulator {
    Simulator::open(path, config()).await.unwrap()
}

/// A charge of 1500.00 RUB for a new payment of `demo-shop`.
pub fn request(token: &str) -> ChargeRequest {
    request_for(PaymentId::generate(), token)
}

/// A charge of 1500.00 RUB for a given payment of `demo-shop`.
pub fn request_for(payment_id: PaymentId, token: &str) -> ChargeRequest {
    ChargeRequest {
        acquirer_key: AcquirerKey::for_payment(&payment_id),
        shop_id: ShopId::new("demo-shop").unwrap(),
        reference: Reference::new(format!("order-{}", payment_id.as_str())).unwrap(),
        payment_id,
        amount: Money::parse("1500.00", "RUB").unwrap(),
        token: CardToken::new(token).unwrap(),
        capture_method: chargeonce_core::CaptureMethod::Automatic,
    }
}

/// The standalone API served on a free port over a ledger of its own.
pub struct Standalone {
    pub base: String,
    pub sim: Arc<Simulator>,
    server: tokio::task::JoinHandle<()>,
    _dir: TempDir,
}

impl Drop for Standalone {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// The standalone API over a simulator `build` makes.
pub async fn start_with(build: impl FnOnce(Simulator) -> Simulator) -> Standalone {
    let dir = TempDir::new();
    let sim = Arc::new(build(
        Simulator::open(&dir.ledger(), config()).await.unwrap(),
    ));
    let app = api_router(Arc::clone(&sim));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let server = tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    Standalone {
        base,
        sim,
        server,
        _dir: dir,
    }
}

/// The standalone API over a plain simulator.
pub async fn start() -> Standalone {
    start_with(|sim| sim).await
}

/// The service's adapter to `base`, giving up after `timeout`.
pub fn adapter(base: &str, timeout: Duration) -> HttpAcquirer {
    HttpAcquirer::new(
        base,
        HttpAcquirerConfig {
            connect_timeout: Duration::from_millis(500),
            request_timeout: timeout,
            idempotent: true,
            credentials: None,
        },
    )
    .unwrap()
}

/// A capture of `value` RUB of the authorization `charge` made by `req`,
/// under a fresh capture id.
pub fn capture(req: &ChargeRequest, charge: &str, value: &str, last: bool) -> CaptureRequest {
    let id = CaptureId::generate();
    CaptureRequest {
        acquirer_key: id.acquirer_key(),
        shop_id: req.shop_id.clone(),
        payment_id: req.payment_id.clone(),
        capture_id: id,
        charge_id: charge.to_owned(),
        amount: Money::parse(value, "RUB").unwrap(),
        last,
        token: req.token.clone(),
    }
}

/// The void of the authorization `charge` made by `req`.
pub fn void(req: &ChargeRequest, charge: &str) -> VoidRequest {
    VoidRequest {
        acquirer_key: AcquirerKey::for_void(&req.payment_id),
        shop_id: req.shop_id.clone(),
        payment_id: req.payment_id.clone(),
        charge_id: charge.to_owned(),
        token: req.token.clone(),
    }
}
