//! Which acquirer the service talks to: the in-process simulator, or an
//! acquirer over HTTP, as chosen by [`UpstreamArgs`]. Used by `chargeonce
//! serve` and `chargeonce reconcile`.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use axum::Router;
use chargeonce_acquirer::{Simulator, SimulatorConfig};
use chargeonce_connector::{HttpAcquirer, HttpAcquirerConfig};
use chargeonce_core::{Acquirer, AcquirerLedger};

use crate::args::upstream::UpstreamArgs;

/// The acquirer in use.
pub enum Upstream {
    /// The in-process simulator.
    Embedded(Arc<Simulator>),
    /// An acquirer over HTTP.
    Remote(Arc<HttpAcquirer>, String),
}

impl Upstream {
    /// Connects to `--acquirer-url`, or opens the in-process simulator's
    /// ledger (`--sim-ledger`, its `tok_slow` as long as `--sim-slow`).
    pub async fn connect(args: &UpstreamArgs) -> anyhow::Result<Self> {
        match &args.acquirer_url {
            Some(url) => {
                let acquirer = HttpAcquirer::new(
                    url,
                    HttpAcquirerConfig {
                        connect_timeout: args.acquirer_connect_timeout,
                        request_timeout: args.acquirer_timeout,
                        idempotent: !args.acquirer_no_idempotency,
                        credentials: args.acquirer_credentials.clone(),
                    },
                )
                .context("--acquirer-url")?;
                Ok(Self::Remote(Arc::new(acquirer), url.clone()))
            }
            None => {
                let sim = Simulator::open(
                    &args.sim_ledger,
                    SimulatorConfig {
                        slow: args.sim_slow,
                    },
                )
                .await
                .context("opening the simulator ledger")?
                .with_idempotency(!args.acquirer_no_idempotency);
                Ok(Self::Embedded(Arc::new(sim)))
            }
        }
    }

    /// For charges and look-ups.
    pub fn acquirer(&self) -> Arc<dyn Acquirer> {
        match self {
            Self::Embedded(sim) => sim.clone(),
            Self::Remote(http, _) => http.clone(),
        }
    }

    /// For the reconciler.
    pub fn ledger(&self) -> Arc<dyn AcquirerLedger> {
        match self {
            Self::Embedded(sim) => sim.clone(),
            Self::Remote(http, _) => http.clone(),
        }
    }

    /// The embedded simulator's ledger routes, to nest at `/sim`.
    pub fn sim_router(&self) -> Option<Router> {
        match self {
            Self::Embedded(sim) => Some(chargeonce_acquirer::router(sim.clone())),
            Self::Remote(..) => None,
        }
    }

    /// For the listening line.
    pub fn describe(&self, sim_ledger: &Path) -> String {
        match self {
            Self::Embedded(_) => format!(
                "acquirer: in-process simulator, ledger: {}",
                sim_ledger.display()
            ),
            // The URL may carry credentials or tokens: never printed whole.
            Self::Remote(_, url) => format!("acquirer: {}", chargeonce_connector::redact_url(url)),
        }
    }
}
