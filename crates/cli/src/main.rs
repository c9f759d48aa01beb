//! `chargeonce`: the idempotent payment API. This binary only parses flags and
//! wires the crates: the engine (`chargeonce-core`), a store
//! (`chargeonce-store`), the acquirer simulator (`chargeonce-acquirer`) and the
//! HTTP layer (`chargeonce-server`).

use clap::{Parser, Subcommand};

mod serve;
mod shops;

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
enum Command {
    /// Serve the payment API (the default).
    Serve(serve::ServeArgs),
    /// Manage shops (the API's tenants).
    Shops {
        #[command(subcommand)]
        command: shops::ShopsCommand,
    },
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    init_tracing();
    let cli = Cli::parse();
    match cli.command {
        None => serve::run(cli.serve).await,
        Some(Command::Serve(args)) => serve::run(args).await,
        Some(Command::Shops { command }) => shops::run(command).await,
    }
}
