//! `chargeonce shops keys ...`: a shop's API keys, managed by the operator
//! (the shop manages them itself with a full key, through `/v1/api-keys`).
//! A new secret is printed once; only its SHA-256 is stored.

use std::time::Duration;

use anyhow::Context;
use chargeonce_core::ShopId;
use chargeonce_core::api_key::{ApiKey, ApiKeyId, KeyRefusal, Mode, Scope};
use chargeonce_core::keyring::{self, KeyRequest, MAX_DESCRIPTION, MadeKey};
use clap::{Subcommand, ValueEnum};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

use crate::args::store::DatabaseArgs;

/// A key's scope on the command line.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ScopeArg {
    /// Everything, keys included.
    Full,
    /// Every read, no write.
    ReadOnly,
    /// Payments, captures, voids, cancels and refunds, and reading those
    /// back by id; no lists, events or keys.
    Payments,
}

/// A key's mode, as the CLI names it.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ModeArg {
    /// Real money, through the acquirer.
    Live,
    /// The simulator only, never the acquirer.
    Test,
}

impl From<ModeArg> for Mode {
    fn from(mode: ModeArg) -> Self {
        match mode {
            ModeArg::Live => Mode::Live,
            ModeArg::Test => Mode::Test,
        }
    }
}

impl From<ScopeArg> for Scope {
    fn from(scope: ScopeArg) -> Self {
        match scope {
            ScopeArg::Full => Scope::Full,
            ScopeArg::ReadOnly => Scope::ReadOnly,
            ScopeArg::Payments => Scope::Payments,
        }
    }
}

/// API key management.
#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Make a key. Prints its secret once.
    Add {
        /// The shop id.
        #[arg(long)]
        shop: String,
        /// What the key may do.
        #[arg(long, value_enum, default_value = "full")]
        scope: ScopeArg,
        /// Live (real money, the acquirer) or test (the simulator only;
        /// its requests see only the shop's test-mode objects).
        #[arg(long, value_enum, default_value = "live")]
        mode: ModeArg,
        /// What it is for (at most 200 characters), shown in lists.
        #[arg(long)]
        description: Option<String>,
        /// Make it stop working after this long (`90d`); by default it does not expire.
        #[arg(long, value_parser = humantime::parse_duration)]
        expires_in: Option<Duration>,
        #[command(flatten)]
        store: DatabaseArgs,
    },
    /// List a shop's keys (never their secrets), oldest first.
    List {
        /// The shop id.
        #[arg(long)]
        shop: String,
        #[command(flatten)]
        store: DatabaseArgs,
    },
    /// Roll a key: make its successor (same scope; its secret printed once,
    /// working at once) and let the old key expire after an overlap (every
    /// instance refuses it within the auth cache's TTL after that).
    Roll {
        /// The shop id.
        #[arg(long)]
        shop: String,
        /// The key to replace (`key_...`).
        #[arg(long)]
        key: String,
        /// How long the old key keeps working (`0s`: it stops at once).
        #[arg(long, value_parser = humantime::parse_duration, default_value = "24h")]
        expire_old_in: Duration,
        #[command(flatten)]
        store: DatabaseArgs,
    },
    /// Revoke a key: refused on every instance within the auth cache's TTL
    /// (`serve --auth-cache-ttl`, 30 s by default).
    Revoke {
        /// The shop id.
        #[arg(long)]
        shop: String,
        /// The key (`key_...`).
        #[arg(long)]
        key: String,
        #[command(flatten)]
        store: DatabaseArgs,
    },
}

/// Runs a keys subcommand.
pub async fn run(command: KeysCommand) -> anyhow::Result<()> {
    match command {
        KeysCommand::Add {
            shop,
            scope,
            mode,
            description,
            expires_in,
            store,
        } => {
            let shop = ShopId::new(shop)?;
            if let Some(description) = &description {
                anyhow::ensure!(
                    description.chars().count() <= MAX_DESCRIPTION
                        && !description.chars().any(char::is_control),
                    "--description: at most {MAX_DESCRIPTION} characters, no control characters"
                );
            }
            let request = KeyRequest {
                mode: mode.into(),
                scope: scope.into(),
                description,
                expires_at: expires_in.map(|after| OffsetDateTime::now_utc() + after),
            };
            let store = store.connect().await?;
            let made = keyring::make(store.as_ref(), &shop, request)
                .await
                .context("making the key")?;
            print_made(made.map_err(refusal)?);
            Ok(())
        }
        KeysCommand::List { shop, store } => {
            let shop = ShopId::new(shop)?;
            let store = store.connect().await?;
            let keys = keyring::list(store.as_ref(), &shop)
                .await
                .context("reading the keys")?
                .ok_or_else(|| anyhow::anyhow!("no shop `{shop}`"))?;
            let now = OffsetDateTime::now_utc();
            println!("id\tmode\tscope\tprefix\tstate\tcreated\texpires\tlast used\tdescription");
            for key in &keys {
                println!("{}", row(key, now));
            }
            Ok(())
        }
        KeysCommand::Roll {
            shop,
            key,
            expire_old_in,
            store,
        } => {
            let shop = ShopId::new(shop)?;
            let id = ApiKeyId::parse(&key).map_err(|e| anyhow::anyhow!("--key: {e}"))?;
            let store = store.connect().await?;
            let made = keyring::roll(store.as_ref(), &shop, &id, expire_old_in)
                .await
                .context("rolling the key")?
                .map_err(refusal)?;
            println!(
                "key {id} stops working at {}",
                stamp(Some(OffsetDateTime::now_utc() + expire_old_in))
            );
            print_made(made);
            Ok(())
        }
        KeysCommand::Revoke { shop, key, store } => {
            let shop = ShopId::new(shop)?;
            let id = ApiKeyId::parse(&key).map_err(|e| anyhow::anyhow!("--key: {e}"))?;
            let store = store.connect().await?;
            let revoked = store
                .revoke_api_key(&shop, &id)
                .await
                .context("revoking the key")?
                .map_err(refusal)?;
            println!(
                "key {} revoked at {}",
                revoked.id,
                stamp(revoked.revoked_at)
            );
            Ok(())
        }
    }
}

fn print_made(made: MadeKey) {
    println!(
        "key {} ({}, {}) made",
        made.key.id,
        made.key.mode.as_str(),
        made.key.scope.as_str()
    );
    println!(
        "secret key (shown once, store it now): {}",
        made.secret.expose()
    );
}

fn refusal(refusal: KeyRefusal) -> anyhow::Error {
    anyhow::anyhow!("{refusal}")
}

/// One key as a tab-separated line of `keys list`.
fn row(key: &ApiKey, now: OffsetDateTime) -> String {
    format!(
        "{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
        key.id,
        key.mode.as_str(),
        key.scope.as_str(),
        key.prefix
            .as_deref()
            .map_or("-".to_owned(), |p| format!("{p}…")),
        key.state_at(now).as_str(),
        stamp(Some(key.created_at)),
        stamp(key.expires_at),
        stamp(key.last_used_at),
        key.description.as_deref().unwrap_or("-"),
    )
}

fn stamp(at: Option<OffsetDateTime>) -> String {
    at.and_then(|at| at.format(&Rfc3339).ok())
        .unwrap_or_else(|| "-".to_owned())
}
