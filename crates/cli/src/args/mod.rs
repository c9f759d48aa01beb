//! The flags, in groups by job. Each group is a `clap::Args` struct that the
//! subcommands using it flatten (`#[command(flatten)]`), so a flag is
//! declared once: its name, env var, default, parser and help live here.
//!
//! - [`store`]: where the data lives (`--database-url`, the pool).
//! - [`upstream`]: which acquirer to talk to, and how.
//! - [`engine`]: the engine's timings (lease, key TTL, acquirer timeout).
//! - [`workers`]: the background workers (sweeper, completer, reconciler,
//!   outbox relay).
//! - [`egress`]: where webhooks may be delivered (`--webhook-allow-*`).
//! - [`limits`]: the HTTP layer's timeouts, connection caps and rate limits.
//! - [`logs`]: the shape of the log lines (`--log-format`).
//! - [`traces`]: where OpenTelemetry traces go (`--otlp-endpoint`).
//!
//! Where a subcommand words a shared flag's help its own way, it says so
//! with `#[command(mut_arg(...))]` next to the flatten.

use chargeonce_core::webhook::WebhookSecret;

pub mod egress;
pub mod engine;
pub mod limits;
pub mod logs;
pub mod store;
pub mod traces;
pub mod upstream;
pub mod workers;

/// Parses a webhook secret straight into its redacting type, so no `Debug`
/// of the flags can show it.
/// Empty or short ones (under [`WebhookSecret::MIN_LEN`]) are refused.
pub fn secret(value: &str) -> Result<WebhookSecret, String> {
    WebhookSecret::chosen(value).map_err(|e| e.to_string())
}

/// Parses the operator's console secret (`serve --operator-secret`): 16 to
/// 256 visible ASCII characters, kept in a type whose `Debug` hides it.
pub fn operator_secret(value: &str) -> Result<chargeonce_core::ShopSecret, String> {
    chargeonce_core::ShopSecret::new(value).map_err(|e| {
        e.to_string()
            .replace("a shop secret", "the operator secret")
    })
}
