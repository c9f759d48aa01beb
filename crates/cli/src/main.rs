//! `chargeonce`: the idempotent payment API. This binary only parses flags and
//! wires the crates: the engine (`chargeonce-core`), a store
//! (`chargeonce-store`), the acquirer simulator (`chargeonce-acquirer`) and the
//! HTTP layer (`chargeonce-server`).

use anyhow::Context as _;
use clap::{Parser, Subcommand};

use crate::args::logs::LogFormat;

/// jemalloc instead of glibc's malloc: a request allocates and frees many
/// small buffers on a few threads (glibc's malloc and free were a third of
/// the HTTP threads' samples), and rows decoded on the SQLite threads are
/// freed on the HTTP threads, which left glibc's per-thread arenas (and
/// mimalloc's pages) holding tens of MB after a reconciler pass.
#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

mod acquirer;
mod api_keys;
mod args;
mod authorization;
mod demo;
mod findings;
mod lists;
mod pay;
mod reconcile;
mod serve;
mod shops;
mod upstream;
mod workers;

/// chargeonce: a payment API that charges once, whatever the network does.
#[derive(Debug, Parser)]
#[command(
    name = "chargeonce",
    version,
    about,
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// With no subcommand, `chargeonce` serves.
    #[command(flatten)]
    serve: serve::ServeArgs,
}

#[derive(Debug, Subcommand)]
#[allow(
    clippy::large_enum_variant,
    reason = "parsed once per process: the size of the serve arguments does not matter"
)]
enum Command {
    /// Serve the payment API (the default).
    Serve(serve::ServeArgs),
    /// Manage shops (the API's tenants).
    Shops {
        #[command(subcommand)]
        command: shops::ShopsCommand,
    },
    /// Load-test a running server and check exactly-once while doing it.
    Bench(chargeonce_bench::BenchArgs),
    /// Pay an order through the client: the key comes from the order, retries
    /// reuse it. Exit code 0 paid, 2 declined, 3 uncertain, 1 error.
    Pay(pay::PayArgs),
    /// Look up payments.
    Payment {
        #[command(subcommand)]
        command: pay::PaymentCommand,
    },
    /// List the shop's payments (one page, as JSON).
    Payments {
        #[command(subcommand)]
        command: lists::PaymentsCommand,
    },
    /// Look up the shop's idempotency keys (as JSON).
    Keys {
        #[command(subcommand)]
        command: lists::KeysCommand,
    },
    /// Play the seed's incident (double click, lost answer, changed amount,
    /// expired key) against an embedded service, and show the bank's ledger.
    Demo,
    /// Run the acquirer simulator as its own process (its own ledger, fault
    /// injection, webhooks), for `serve --acquirer-url`.
    Acquirer(acquirer::AcquirerArgs),
    /// Prove "charged once" under faults: several instances, fault proxies,
    /// kills, a frozen zombie, a PostgreSQL restart; then check the money
    /// invariants. Exit code 0 clean, 1 violations or error.
    Chaos(chargeonce_chaos::ChaosArgs),
    /// Reconcile once: settle pending payments from the acquirer's answers,
    /// compare the books, record the findings, print the report. Exit code 0
    /// clean, 2 findings, 1 error.
    Reconcile(reconcile::ReconcileArgs),
    /// The reconciler's persisted findings (every pass records what it
    /// found): list them, or resolve one by hand with a note.
    Findings {
        #[command(subcommand)]
        command: findings::FindingsCommand,
    },
    /// Print the API's OpenAPI 3.1 document (what `GET /v1/openapi.json`
    /// serves): `chargeonce openapi > docs/openapi.json` refreshes the
    /// committed copy.
    Openapi,
}

/// Logs to standard error, filtered by `RUST_LOG` (else `default`), in the
/// asked format; and, with `traces`, exports the service's spans to an OTLP
/// endpoint (whatever `RUST_LOG` says: the logs' filter is the logs' own).
fn init_tracing(
    default: &str,
    format: LogFormat,
    traces: Option<chargeonce_telemetry::Config>,
) -> anyhow::Result<Option<chargeonce_telemetry::Telemetry>> {
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;

    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let logs = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    let logs = match format {
        LogFormat::Text => logs.with_filter(filter).boxed(),
        LogFormat::Json => logs
            .json()
            .with_current_span(true)
            .with_span_list(true)
            .with_filter(filter)
            .boxed(),
    };
    let telemetry = traces
        .map(|config| {
            chargeonce_telemetry::Telemetry::start(&config)
                .with_context(|| format!("starting traces to {}", config.traces_url()))
        })
        .transpose()?;
    let exported = telemetry
        .as_ref()
        .map(chargeonce_telemetry::Telemetry::layer);
    tracing_subscriber::registry()
        .with(logs)
        .with(exported)
        .init();
    Ok(telemetry)
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    // The client commands print their own story; the service's logs would drown it.
    let client_side = matches!(
        cli.command,
        Some(
            Command::Pay(_)
                | Command::Payment { .. }
                | Command::Payments { .. }
                | Command::Keys { .. }
                | Command::Demo
                | Command::Chaos(_)
                | Command::Findings { .. }
                | Command::Openapi
        )
    );
    let format = match &cli.command {
        None => cli.serve.log_format(),
        Some(Command::Serve(args)) => args.log_format(),
        Some(_) => LogFormat::Text,
    };
    let traces = match &cli.command {
        None => cli.serve.traces(),
        Some(Command::Serve(args)) => args.traces(),
        Some(_) => None,
    };
    let telemetry = init_tracing(if client_side { "error" } else { "info" }, format, traces)?;
    let counters = telemetry
        .as_ref()
        .map(chargeonce_telemetry::Telemetry::counters);
    let result = run(cli, counters).await;
    if let Some(telemetry) = telemetry {
        // Exports what is still queued, within the export timeout.
        tokio::task::spawn_blocking(move || telemetry.shutdown())
            .await
            .ok();
    }
    result
}

/// Runs the command (traces, when on, count their spans in `counters`).
async fn run(cli: Cli, counters: Option<chargeonce_telemetry::SpanCounters>) -> anyhow::Result<()> {
    match cli.command {
        None => serve::run(cli.serve, counters).await,
        Some(Command::Serve(args)) => serve::run(args, counters).await,
        Some(Command::Shops { command }) => shops::run(command).await,
        Some(Command::Bench(args)) => chargeonce_bench::main(args)
            .await
            .map(drop)
            .map_err(Into::into),
        Some(Command::Pay(args)) => pay::pay(args).await,
        Some(Command::Payment { command }) => pay::payment(command).await,
        Some(Command::Payments { command }) => lists::payments(command).await,
        Some(Command::Keys { command }) => lists::keys(command).await,
        Some(Command::Demo) => demo::run().await,
        Some(Command::Openapi) => {
            use std::io::Write as _;
            std::io::stdout()
                .write_all(chargeonce_server::openapi::document_json().as_bytes())
                .map_err(Into::into)
        }
        Some(Command::Acquirer(args)) => acquirer::run(args).await,
        Some(Command::Chaos(args)) => {
            if !chargeonce_chaos::main(args).await? {
                std::process::exit(1);
            }
            Ok(())
        }
        Some(Command::Findings { command }) => findings::run(command).await,
        Some(Command::Reconcile(args)) => {
            if !reconcile::run(args).await? {
                std::process::exit(2);
            }
            Ok(())
        }
    }
}
