//! Which acquirers the service talks to: for live mode the in-process
//! simulator or an acquirer over HTTP, as chosen by [`UpstreamArgs`]; for
//! test mode always an in-process simulator with a ledger of its own. Used
//! by `chargeonce serve` and `chargeonce reconcile`.

use std::sync::Arc;

use anyhow::Context;
use axum::Router;
use chargeonce_acquirer::{Simulator, SimulatorConfig};
use chargeonce_connector::{HttpAcquirer, HttpAcquirerConfig};
use chargeonce_core::api_key::Mode;
use chargeonce_core::{Acquirer, AcquirerLedger, Acquirers};

use crate::args::upstream::UpstreamArgs;

/// The acquirers in use: live mode's, and test mode's simulator.
pub struct Upstream {
    live: Live,
    test: Arc<Simulator>,
}

/// Live mode's acquirer.
enum Live {
    /// The in-process simulator.
    Embedded(Arc<Simulator>),
    /// An acquirer over HTTP.
    Remote(Arc<HttpAcquirer>, String),
}

impl Upstream {
    /// Connects live mode to `--acquirer-url`, or opens the in-process
    /// simulator's ledger (`--sim-ledger`, its `tok_slow` as long as
    /// `--sim-slow`); opens test mode's simulator (`--test-sim-ledger`).
    pub async fn connect(args: &UpstreamArgs) -> anyhow::Result<Self> {
        let test_ledger = args.test_ledger();
        anyhow::ensure!(
            args.acquirer_url.is_some() || args.sim_ledger != test_ledger,
            "--sim-ledger and --test-sim-ledger must be different files: test payments \
             never share live mode's books"
        );
        let test = Simulator::open(
            &test_ledger,
            SimulatorConfig {
                slow: args.sim_slow,
            },
        )
        .await
        .context("opening test mode's simulator ledger")?;
        Ok(Self {
            live: Live::connect(args).await?,
            test: Arc::new(test),
        })
    }

    /// The acquirers of both modes, for the engine.
    pub fn acquirers(&self) -> Acquirers {
        Acquirers::new(self.acquirer(Mode::Live), self.acquirer(Mode::Test))
    }

    /// The acquirer of `mode`, for charges and look-ups.
    pub fn acquirer(&self, mode: Mode) -> Arc<dyn Acquirer> {
        match (mode, &self.live) {
            (Mode::Test, _) => self.test.clone(),
            (Mode::Live, Live::Embedded(sim)) => sim.clone(),
            (Mode::Live, Live::Remote(http, _)) => http.clone(),
        }
    }

    /// The ledger of `mode`, for its reconciler.
    pub fn ledger(&self, mode: Mode) -> Arc<dyn AcquirerLedger> {
        match (mode, &self.live) {
            (Mode::Test, _) => self.test.clone(),
            (Mode::Live, Live::Embedded(sim)) => sim.clone(),
            (Mode::Live, Live::Remote(http, _)) => http.clone(),
        }
    }

    /// The embedded live simulator's ledger routes, to nest at `/sim`.
    pub fn sim_router(&self) -> Option<Router> {
        match &self.live {
            Live::Embedded(sim) => Some(chargeonce_acquirer::router(sim.clone())),
            Live::Remote(..) => None,
        }
    }

    /// Test mode's simulator's ledger routes, to nest at `/sim-test`.
    pub fn test_sim_router(&self) -> Router {
        chargeonce_acquirer::router(self.test.clone())
    }

    /// For the listening line.
    pub fn describe(&self, args: &UpstreamArgs) -> String {
        let live = match &self.live {
            Live::Embedded(_) => format!(
                "acquirer: in-process simulator, ledger: {}",
                args.sim_ledger.display()
            ),
            // The URL may carry credentials or tokens: never printed whole.
            Live::Remote(_, url) => {
                format!("acquirer: {}", chargeonce_connector::redact_url(url))
            }
        };
        format!(
            "{live}, test mode: in-process simulator, ledger: {}",
            args.test_ledger().display()
        )
    }
}

impl Live {
    async fn connect(args: &UpstreamArgs) -> anyhow::Result<Self> {
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
}
