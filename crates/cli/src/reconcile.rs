//! `chargeonce reconcile`: one reconciler pass, and its report. Its
//! findings are recorded in the store like the background worker's (see
//! `chargeonce findings list`).
//!
//! Exit status: 0 when the books agree, 2 when there are findings (or
//! questions the acquirer did not answer), 1 on an error.

use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use chargeonce_core::NoObserver;
use chargeonce_workers::reconciler::{Reconciler, ReconcilerConfig};
use clap::Args;

use crate::args::store::DatabaseArgs;
use crate::args::upstream::UpstreamArgs;
use crate::upstream::Upstream;

/// Flags of `chargeonce reconcile`.
#[derive(Debug, Clone, Args)]
#[command(mut_arg("sim_ledger", |arg| arg.help(
    "The in-process simulator's ledger (when no --acquirer-url is given)"
)))]
pub struct ReconcileArgs {
    #[command(flatten)]
    store: DatabaseArgs,
    // --acquirer-url, --sim-ledger (its help worded above) and the acquirer's flags.
    #[command(flatten)]
    upstream: UpstreamArgs,
    /// How far back to compare our payments with the acquirer's ledger.
    #[arg(long, default_value = "24h", value_parser = humantime::parse_duration)]
    window: Duration,
    /// How old a pending payment must be before the acquirer is asked about it.
    #[arg(long, default_value = "0s", value_parser = humantime::parse_duration)]
    pending_after: Duration,
    /// Refund duplicate charges at the acquirer (keeping the one our payment names).
    #[arg(long)]
    refund_duplicates: bool,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
    /// Which mode's payments to compare with that mode's acquirer: `live`
    /// (the acquirer) or `test` (test mode's simulator).
    #[arg(long, value_enum, default_value = "live")]
    mode: crate::api_keys::ModeArg,
}

/// Runs one pass, prints its report; `Ok(true)` when clean.
pub async fn run(args: ReconcileArgs) -> anyhow::Result<bool> {
    let store = args.store.connect().await?;
    let mode = args.mode.into();
    // Only the mode reconciled: the other's acquirer is not opened.
    let (acquirer, ledger) = Upstream::connect_mode(&args.upstream, mode).await?;
    let reconciler = Reconciler {
        mode,
        store,
        acquirer,
        ledger,
        observer: Arc::new(NoObserver),
    };
    let config = ReconcilerConfig {
        pending_after: args.pending_after,
        window: args.window,
        refund_duplicates: args.refund_duplicates,
        ..ReconcilerConfig::default()
    };
    let report = reconciler
        .reconcile_once(&config)
        .await
        .context("reconciling")?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!("{report}");
    }
    Ok(report.is_clean())
}
