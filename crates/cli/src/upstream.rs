//! Which acquirers the service talks to, as chosen by [`UpstreamArgs`]: for
//! live mode the in-process simulator (`--sim-ledger`) or an acquirer over
//! HTTP (`--acquirer-url`); for test mode always a simulator, in process
//! with a ledger of its own (`--test-sim-ledger`) or a `chargeonce acquirer`
//! over HTTP that every instance shares (`--test-acquirer-url`), never the
//! live one. Used by `chargeonce serve` and `chargeonce reconcile`.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use axum::Router;
use chargeonce_acquirer::{Simulator, SimulatorConfig};
use chargeonce_connector::{HttpAcquirer, HttpAcquirerConfig};
use chargeonce_core::api_key::Mode;
use chargeonce_core::{Acquirer, AcquirerLedger, Acquirers};

use crate::args::upstream::UpstreamArgs;

/// The acquirers in use: live mode's and test mode's.
pub struct Upstream {
    live: Side,
    test: Side,
}

/// One mode's acquirer.
enum Side {
    /// An in-process simulator, and its ledger file.
    Embedded(Arc<Simulator>, std::path::PathBuf),
    /// An acquirer over HTTP, and its URL.
    Remote(Arc<HttpAcquirer>, String),
}

impl Upstream {
    /// Connects live mode to `--acquirer-url` or opens the in-process
    /// simulator's ledger (`--sim-ledger`, its `tok_slow` as long as
    /// `--sim-slow`); test mode to `--test-acquirer-url` or its own
    /// simulator's ledger (`--test-sim-ledger`). The two are never one.
    pub async fn connect(args: &UpstreamArgs) -> anyhow::Result<Self> {
        Ok(Self {
            live: Side::connect(args, Mode::Live).await?,
            test: Side::connect(args, Mode::Test).await?,
        })
    }

    /// One mode's acquirer alone, the other not opened (`chargeonce
    /// reconcile --mode`): for charges and look-ups, and its ledger.
    pub async fn connect_mode(
        args: &UpstreamArgs,
        mode: Mode,
    ) -> anyhow::Result<(Arc<dyn Acquirer>, Arc<dyn AcquirerLedger>)> {
        Ok(match Side::connect(args, mode).await? {
            Side::Embedded(sim, _) => (sim.clone(), sim),
            Side::Remote(http, _) => (http.clone(), http),
        })
    }

    /// The acquirers of both modes, for the engine.
    pub fn acquirers(&self) -> Acquirers {
        Acquirers::new(self.acquirer(Mode::Live), self.acquirer(Mode::Test))
    }

    fn side(&self, mode: Mode) -> &Side {
        match mode {
            Mode::Live => &self.live,
            Mode::Test => &self.test,
        }
    }

    /// The acquirer of `mode`, for charges and look-ups.
    pub fn acquirer(&self, mode: Mode) -> Arc<dyn Acquirer> {
        match self.side(mode) {
            Side::Embedded(sim, _) => sim.clone(),
            Side::Remote(http, _) => http.clone(),
        }
    }

    /// The ledger of `mode`, for its reconciler.
    pub fn ledger(&self, mode: Mode) -> Arc<dyn AcquirerLedger> {
        match self.side(mode) {
            Side::Embedded(sim, _) => sim.clone(),
            Side::Remote(http, _) => http.clone(),
        }
    }

    /// The ledger routes of `mode`'s in-process simulator, if it has one:
    /// live mode's nest at `/sim`, test mode's at `/sim-test`.
    pub fn sim_router(&self, mode: Mode) -> Option<Router> {
        match self.side(mode) {
            Side::Embedded(sim, _) => Some(chargeonce_acquirer::router(sim.clone())),
            Side::Remote(..) => None,
        }
    }

    /// For the listening line.
    pub fn describe(&self) -> String {
        format!(
            "{}, test mode: {}",
            self.live.describe(),
            self.test.describe()
        )
    }
}

/// Whether the flags name one acquirer for both modes (refused).
fn one_for_both(args: &UpstreamArgs) -> bool {
    match (&args.acquirer_url, &args.test_acquirer_url) {
        (Some(live), Some(test)) => live.trim_end_matches('/') == test.trim_end_matches('/'),
        (None, None) => args.sim_ledger == args.test_ledger(),
        _ => false,
    }
}

impl Side {
    /// `mode`'s acquirer as the flags choose it: live mode's
    /// `--acquirer-url` or simulator (`--sim-ledger`), test mode's
    /// `--test-acquirer-url` or simulator (`--test-sim-ledger`, always
    /// deduplicating on keys, as the simulator does). Never one for both.
    async fn connect(args: &UpstreamArgs, mode: Mode) -> anyhow::Result<Self> {
        anyhow::ensure!(
            !one_for_both(args),
            "test mode's acquirer must not be live mode's: give --test-sim-ledger another file \
             than --sim-ledger, or --test-acquirer-url another URL than --acquirer-url"
        );
        match (mode, &args.acquirer_url, &args.test_acquirer_url) {
            (Mode::Live, Some(url), _) => {
                Self::remote(args, url, !args.acquirer_no_idempotency).context("--acquirer-url")
            }
            (Mode::Live, None, _) => {
                Self::embedded(args, &args.sim_ledger, !args.acquirer_no_idempotency)
                    .await
                    .context("opening the simulator ledger")
            }
            (Mode::Test, _, Some(url)) => {
                Self::remote(args, url, true).context("--test-acquirer-url")
            }
            (Mode::Test, _, None) => Self::embedded(args, &args.test_ledger(), true)
                .await
                .context("opening test mode's simulator ledger"),
        }
    }

    fn remote(args: &UpstreamArgs, url: &str, idempotent: bool) -> anyhow::Result<Self> {
        let acquirer = HttpAcquirer::new(
            url,
            HttpAcquirerConfig {
                connect_timeout: args.acquirer_connect_timeout,
                request_timeout: args.acquirer_timeout,
                idempotent,
                credentials: args.acquirer_credentials.clone(),
            },
        )?;
        Ok(Self::Remote(Arc::new(acquirer), url.to_owned()))
    }

    async fn embedded(
        args: &UpstreamArgs,
        ledger: &Path,
        idempotent: bool,
    ) -> anyhow::Result<Self> {
        let sim = Simulator::open(
            ledger,
            SimulatorConfig {
                slow: args.sim_slow,
            },
        )
        .await?
        .with_idempotency(idempotent);
        Ok(Self::Embedded(Arc::new(sim), ledger.to_owned()))
    }

    fn describe(&self) -> String {
        match self {
            Self::Embedded(_, ledger) => format!(
                "acquirer: in-process simulator, ledger: {}",
                ledger.display()
            ),
            // The URL may carry credentials or tokens: never printed whole.
            Self::Remote(_, url) => format!("acquirer: {}", chargeonce_connector::redact_url(url)),
        }
    }
}
