//! `chargeonce shops ...`: register the API's tenants.

use anyhow::Context;
use chargeonce_core::events::WebhookEndpoint;
use chargeonce_core::webhook::WebhookSecret;
use chargeonce_core::{ShopId, ShopSecret, StoreError};
use clap::Subcommand;

use crate::args::egress::EgressArgs;
use crate::args::store::DatabaseArgs;

/// Shop management.
#[derive(Debug, Subcommand)]
pub enum ShopsCommand {
    /// Register a shop. Prints its secret key once (its first API key: live,
    /// full); only its SHA-256 is stored.
    Add {
        /// The shop id (1 to 64 of A-Z a-z 0-9 _ -): the user name of HTTP Basic auth.
        id: String,
        /// The secret key: 16 to 256 visible ASCII characters; by default 32
        /// random bytes are generated (and printed once).
        #[arg(long)]
        secret: Option<String>,
        #[command(flatten)]
        store: DatabaseArgs,
    },
    /// Set where the shop's merchant events are POSTed, and the secret they
    /// are signed with. Prints a generated secret once; never logs it.
    SetWebhook {
        /// The shop id.
        #[arg(long)]
        shop: String,
        /// The webhook URL: `https://` (or `http://` with
        /// `--webhook-allow-http`), its host resolving only to public
        /// addresses (or allowed networks).
        #[arg(long)]
        url: String,
        /// The signing secret, at least 16 characters; by default 32 random
        /// bytes are generated.
        #[arg(long, env = "CHARGEONCE_SHOP_WEBHOOK_SECRET", hide_env_values = true)]
        secret: Option<String>,
        #[command(flatten)]
        store: DatabaseArgs,
        #[command(flatten)]
        egress: EgressArgs,
    },
    /// Roll the shop's webhook signing secret: the new one signs from now
    /// on, and the old one keeps signing too (a second signature on every
    /// delivery) until the overlap ends, so the receiver can switch secrets
    /// without refusing an event. Prints a generated secret once.
    RollWebhookSecret {
        /// The shop id.
        #[arg(long)]
        shop: String,
        /// How long the old secret keeps signing (`0s`: it stops at once; at
        /// most 30 days).
        #[arg(long, default_value = "24h", value_parser = overlap)]
        expire_old_in: std::time::Duration,
        /// The new signing secret, at least 16 characters, not the current
        /// one; by default 32 random bytes are generated. (No environment
        /// variable: the one `set-webhook` reads would roll to the same
        /// secret.)
        #[arg(long)]
        secret: Option<String>,
        #[command(flatten)]
        store: DatabaseArgs,
    },
    /// List a shop's webhook endpoints (never their secrets): the
    /// operator's (`set-webhook`) and those the shop made through
    /// `/v1/webhook-endpoints`, with the event types each receives.
    WebhookEndpoints {
        /// The shop id.
        #[arg(long)]
        shop: String,
        #[command(flatten)]
        store: DatabaseArgs,
    },
    /// Manage a shop's API keys: add, list, roll, revoke.
    Keys {
        #[command(subcommand)]
        command: crate::api_keys::KeysCommand,
    },
}

/// Runs a shops subcommand.
pub async fn run(command: ShopsCommand) -> anyhow::Result<()> {
    match command {
        ShopsCommand::Keys { command } => crate::api_keys::run(command).await,
        ShopsCommand::WebhookEndpoints { shop, store } => webhook_endpoints(shop, store).await,
        ShopsCommand::RollWebhookSecret {
            shop,
            expire_old_in,
            secret,
            store,
        } => roll_webhook_secret(shop, expire_old_in, secret, store).await,
        ShopsCommand::Add { id, secret, store } => {
            let id = ShopId::new(id)?;
            // `{shop}.test` is the id of a shop's test mode, made with it.
            anyhow::ensure!(
                id.is_live(),
                "a shop id may not end in `.test`: that names a shop's test mode"
            );
            // Checked before the store is opened (or created).
            let (secret, generated) = match secret {
                Some(secret) => (
                    ShopSecret::new(secret).map_err(|e| anyhow::anyhow!("--secret: {e}"))?,
                    false,
                ),
                None => (ShopSecret::generate(), true),
            };
            let store = store.connect().await?;
            match store.add_shop(&id, &secret.hash()).await {
                Ok(()) => {}
                Err(StoreError::ShopExists(_)) => anyhow::bail!("shop `{id}` already exists"),
                Err(error) => return Err(error).context("adding the shop"),
            }
            println!("shop added: {id}");
            if generated {
                println!("secret key (shown once, store it now): {}", secret.expose());
            }
            Ok(())
        }
        ShopsCommand::SetWebhook {
            shop,
            url,
            secret,
            store,
            egress,
        } => {
            let id = operator_endpoint_shop(shop)?;
            let (secret, generated) = signing_secret(secret)?;
            // The same judgement the relay makes at every connection.
            egress
                .egress()
                .check_url(&url)
                .await
                .map_err(|refusal| anyhow::anyhow!("--url: {refusal}"))?;
            let store = store.connect().await?;
            let endpoint = WebhookEndpoint { url, secret };
            if !store
                .set_webhook(&id, Some(&endpoint))
                .await
                .context("setting the webhook")?
            {
                anyhow::bail!("no shop `{id}`");
            }
            println!("webhook of shop {id}: {}", endpoint.url);
            if generated {
                println!(
                    "signing secret (shown once, give it to the shop's receiver): {}",
                    endpoint.secret.expose()
                );
            }
            Ok(())
        }
    }
}

/// The shop of an operator endpoint command: its own id (the operator's
/// endpoint is live mode's; a test mode's endpoints are the shop's own).
fn operator_endpoint_shop(shop: String) -> anyhow::Result<ShopId> {
    let id = ShopId::new(shop)?;
    anyhow::ensure!(
        id.is_live(),
        "the operator's webhook endpoint is live mode's: name the shop by its own id"
    );
    Ok(id)
}

/// `shops webhook-endpoints`: one line per endpoint, oldest first (of
/// `{shop}.test`: its test mode's).
async fn webhook_endpoints(shop: String, store: DatabaseArgs) -> anyhow::Result<()> {
    let id = ShopId::new(shop)?;
    let store = store.connect().await?;
    let known = store
        .shops()
        .await
        .context("reading the shops")?
        .iter()
        .any(|s| s.shop_id == id.shop());
    if !known {
        anyhow::bail!("no shop `{id}`");
    }
    let endpoints = store
        .endpoints(&id)
        .await
        .context("reading the endpoints")?;
    if endpoints.is_empty() {
        println!("shop {id} has no webhook endpoint: its events go nowhere");
    }
    for endpoint in endpoints {
        println!(
            "{} {} {} events={} by={}{}",
            endpoint.id,
            if endpoint.enabled {
                "enabled"
            } else {
                "disabled"
            },
            endpoint.url,
            endpoint.filter.names().join(","),
            endpoint.origin.as_str(),
            endpoint
                .description
                .map(|d| format!(" ({d})"))
                .unwrap_or_default()
        );
    }
    Ok(())
}

/// `shops roll-webhook-secret`.
async fn roll_webhook_secret(
    shop: String,
    expire_old_in: std::time::Duration,
    secret: Option<String>,
    store: DatabaseArgs,
) -> anyhow::Result<()> {
    let id = operator_endpoint_shop(shop)?;
    let (secret, generated) = signing_secret(secret)?;
    let store = store.connect().await?;
    let Some(old_valid_until) = store
        .roll_webhook_secret(&id, &secret, expire_old_in)
        .await
        .context("rolling the webhook secret")?
    else {
        anyhow::bail!(
            "no shop `{id}` with a webhook (set one with `shops set-webhook`), \
             or --secret is the one it signs with already"
        );
    };
    println!(
        "webhook secret of shop {id} rolled; the old one signs too until {}",
        old_valid_until
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap_or_default()
    );
    if generated {
        println!(
            "signing secret (shown once, give it to the shop's receiver): {}",
            secret.expose()
        );
    }
    Ok(())
}

/// The longest overlap of a webhook secret roll.
const MAX_ROLL_OVERLAP: std::time::Duration = std::time::Duration::from_secs(30 * 24 * 3600);

/// Parses `--expire-old-in`: a duration of at most [`MAX_ROLL_OVERLAP`].
fn overlap(value: &str) -> Result<std::time::Duration, String> {
    let overlap = humantime::parse_duration(value).map_err(|e| e.to_string())?;
    if overlap > MAX_ROLL_OVERLAP {
        return Err("at most 30 days".to_owned());
    }
    Ok(overlap)
}

/// A webhook signing secret: `--secret` checked, or generated (then `true`:
/// print it once).
fn signing_secret(chosen: Option<String>) -> anyhow::Result<(WebhookSecret, bool)> {
    Ok(match chosen {
        Some(secret) => (
            WebhookSecret::chosen(secret).map_err(|e| anyhow::anyhow!("--secret: {e}"))?,
            false,
        ),
        None => (WebhookSecret::generate(), true),
    })
}
