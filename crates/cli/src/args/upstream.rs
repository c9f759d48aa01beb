//! Which acquirer the service talks to, and how: the in-process simulator
//! (its ledger) or an acquirer over HTTP (`--acquirer-url`), its timeouts,
//! and whether the acquirer is idempotent. Shared by `chargeonce serve` and
//! `chargeonce reconcile`, so each flag is declared once.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

/// `--acquirer-credentials`: `user:password` (the error never repeats it).
fn parse_credentials(text: &str) -> Result<chargeonce_connector::AcquirerCredentials, String> {
    chargeonce_connector::AcquirerCredentials::parse(text)
        .ok_or_else(|| "expected user:password".to_owned())
}

/// How to reach the acquirer.
#[derive(Debug, Clone, Args)]
pub struct UpstreamArgs {
    /// The acquirer's base URL (e.g. a `chargeonce acquirer` at
    /// `http://127.0.0.1:9000`). Without it, the in-process simulator is used.
    #[arg(long, env = "CHARGEONCE_ACQUIRER_URL")]
    pub acquirer_url: Option<String>,
    /// HTTP Basic credentials for the acquirer, `user:password`, sent with
    /// every request (they replace any in `--acquirer-url`, whose userinfo
    /// is otherwise taken as the credentials). Never logged or printed.
    #[arg(long, env = "CHARGEONCE_ACQUIRER_CREDENTIALS", hide_env_values = true, value_parser = parse_credentials)]
    pub acquirer_credentials: Option<chargeonce_connector::AcquirerCredentials>,
    /// The in-process acquirer simulator's ledger (an SQLite file). Server
    /// processes given the same path share one ledger, as they would one acquirer.
    #[arg(
        long,
        env = "CHARGEONCE_SIM_LEDGER",
        default_value = "chargeonce-sim.db"
    )]
    pub sim_ledger: PathBuf,
    /// Test mode's simulator ledger (an SQLite file): every payment made
    /// with a `test` key goes to this in-process simulator, whatever
    /// acquirer live mode uses, and never to the live one. By default the
    /// file beside `--sim-ledger` named `{its stem}-test.{its extension}`
    /// (`chargeonce-sim-test.db`). Server processes given the same path
    /// share it.
    #[arg(long, env = "CHARGEONCE_TEST_SIM_LEDGER")]
    pub test_sim_ledger: Option<PathBuf>,
    /// Test mode's acquirer over HTTP instead: a `chargeonce acquirer`
    /// simulator that every instance shares (instances on several hosts
    /// need one; each in-process test simulator keeps its own ledger).
    /// Never live mode's: the same URL as `--acquirer-url` is refused.
    /// `--acquirer-credentials` are sent to it too.
    #[arg(long, env = "CHARGEONCE_TEST_ACQUIRER_URL")]
    pub test_acquirer_url: Option<String>,
    /// The longest a TCP connect to the acquirer may take (past it, nothing
    /// was sent: 503 acquirer_unavailable, safe to retry).
    #[arg(long, default_value = "1s", value_parser = humantime::parse_duration)]
    pub acquirer_connect_timeout: Duration,
    /// The longest an acquirer call may take before its outcome counts as
    /// unknown (202 pending; a retry with the same key resolves it).
    #[arg(long, env = "CHARGEONCE_ACQUIRER_TIMEOUT", default_value = "10s", value_parser = humantime::parse_duration)]
    pub acquirer_timeout: Duration,
    /// How long the in-process simulator's `tok_slow` takes to answer.
    #[arg(long, default_value = "3s", value_parser = humantime::parse_duration)]
    pub sim_slow: Duration,
    /// The acquirer ignores idempotency keys (like some real providers): a
    /// take-over, retry or completer run looks the charge (or refund) up by
    /// our reference before sending it again, and only once
    /// `--acquirer-settle-window` has passed since the last attempt.
    #[arg(long)]
    pub acquirer_no_idempotency: bool,
    /// With `--acquirer-no-idempotency`: how long after an attempt whose
    /// answer was lost nobody looks it up or sends it again (the provider may
    /// still record it late). Keep it well above `--acquirer-timeout`.
    #[arg(long, env = "CHARGEONCE_ACQUIRER_SETTLE_WINDOW", default_value = "2m", value_parser = humantime::parse_duration)]
    pub acquirer_settle_window: Duration,
}

impl UpstreamArgs {
    /// Test mode's ledger: `--test-sim-ledger`, or the file beside
    /// `--sim-ledger` with `-test` after its stem.
    pub fn test_ledger(&self) -> PathBuf {
        if let Some(path) = &self.test_sim_ledger {
            return path.clone();
        }
        let stem = self
            .sim_ledger
            .file_stem()
            .map_or_else(|| "chargeonce-sim".into(), |s| s.to_string_lossy());
        let name = match self.sim_ledger.extension() {
            Some(ext) => format!("{stem}-test.{}", ext.to_string_lossy()),
            None => format!("{stem}-test"),
        };
        self.sim_ledger.with_file_name(name)
    }
}
