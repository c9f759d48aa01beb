//! `example-merchant`: the reference merchant as a binary.
//!
//! ```text
//! chargeonce shops set-webhook --shop demo --url http://127.0.0.1:8090/webhooks/chargeonce
//! MERCHANT_WEBHOOK_SECRET=whsec_... example-merchant --listen 127.0.0.1:8090
//! curl -X POST http://127.0.0.1:8090/orders/order-1      # then pay for order-1
//! ```

use std::net::SocketAddr;

use anyhow::Context;
use chargeonce_core::webhook::WebhookSecret;
use chargeonce_example_merchant::{Merchant, router};
use clap::Parser;

/// Receives chargeonce events and fulfils each order exactly once.
#[derive(Debug, Parser)]
struct Args {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8090")]
    listen: SocketAddr,
    /// The merchant's own database.
    #[arg(long, default_value = "sqlite://merchant.db")]
    database_url: String,
    /// The signing secret `chargeonce shops set-webhook` printed. Never logged.
    #[arg(long, env = "MERCHANT_WEBHOOK_SECRET", hide_env_values = true)]
    secret: String,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt().init();
    let args = Args::parse();
    let merchant = Merchant::open(&args.database_url, WebhookSecret::new(args.secret))
        .await
        .context("opening the merchant database")?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("binding {}", args.listen))?;
    println!("example merchant on http://{}", listener.local_addr()?);
    axum::serve(listener, router(merchant))
        .await
        .context("serving")
}
