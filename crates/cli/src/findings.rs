//! `chargeonce findings list` and `chargeonce findings resolve`: the
//! reconciler's persisted findings, read and resolved straight from the
//! store (the same `--database-url` as `chargeonce reconcile`), for an
//! operator without the console.

use std::time::SystemTime;

use anyhow::Context;
use chargeonce_core::findings::{Finding, FindingId, FindingQuery, Resolution};
use clap::{Args, Subcommand, ValueEnum};
use serde_json::{Value, json};

use crate::args::store::DatabaseArgs;

/// Who resolves a finding from the command line, as its resolution says.
const RESOLVED_BY: &str = "cli";

/// `chargeonce findings ...`.
#[derive(Debug, Subcommand)]
pub enum FindingsCommand {
    /// List the reconciler's findings, newest last sighting first: the open
    /// ones by default. Each pass that sees one again updates a finding's last sighting
    /// and count instead of adding a row.
    List(ListArgs),
    /// Mark a finding resolved by hand, with a note saying why (what was
    /// done about it). Resolving a resolved finding changes nothing.
    Resolve(ResolveArgs),
}

/// Which findings `findings list` shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum State {
    /// Not resolved yet.
    Open,
    /// Resolved (refunded by the reconciler, or by hand).
    Resolved,
    /// Both.
    All,
}

/// Flags of `chargeonce findings list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    #[command(flatten)]
    store: DatabaseArgs,
    /// Which findings.
    #[arg(long, value_enum, default_value = "open")]
    state: State,
    /// At most this many.
    #[arg(long, default_value_t = 100)]
    limit: u32,
    /// Print them as JSON (an array).
    #[arg(long)]
    json: bool,
}

/// Flags of `chargeonce findings resolve`.
#[derive(Debug, Args)]
pub struct ResolveArgs {
    #[command(flatten)]
    store: DatabaseArgs,
    /// The finding's id (as `findings list` shows it).
    id: i64,
    /// Why it is resolved: what was done about it.
    #[arg(long)]
    note: String,
    /// Print the finding as JSON.
    #[arg(long)]
    json: bool,
}

/// Runs `chargeonce findings ...`.
pub async fn run(command: FindingsCommand) -> anyhow::Result<()> {
    match command {
        FindingsCommand::List(args) => list(args).await,
        FindingsCommand::Resolve(args) => resolve(args).await,
    }
}

async fn list(args: ListArgs) -> anyhow::Result<()> {
    let store = args.store.connect().await?;
    let query = FindingQuery {
        resolved: match args.state {
            State::Open => Some(false),
            State::Resolved => Some(true),
            State::All => None,
        },
        limit: args.limit,
        ..FindingQuery::default()
    };
    let found = store
        .findings(&query)
        .await
        .context("reading the findings")?;
    if args.json {
        let all: Vec<Value> = found.iter().map(to_json).collect();
        println!("{}", serde_json::to_string_pretty(&all)?);
        return Ok(());
    }
    if found.is_empty() {
        println!("no findings");
    }
    for finding in &found {
        println!("{}", line(finding));
    }
    Ok(())
}

async fn resolve(args: ResolveArgs) -> anyhow::Result<()> {
    anyhow::ensure!(
        !args.note.trim().is_empty(),
        "--note must say why the finding is resolved"
    );
    let store = args.store.connect().await?;
    let resolution = Resolution::Manual {
        by: RESOLVED_BY.to_owned(),
        note: args.note,
    };
    let resolved = store
        .resolve_finding(FindingId(args.id), &resolution)
        .await
        .context("resolving the finding")?
        .with_context(|| format!("there is no finding {}", args.id))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&to_json(&resolved))?);
    } else {
        println!("{}", line(&resolved));
    }
    Ok(())
}

/// A time as RFC 3339, to the second (generic: the binary does not depend
/// on the `time` crate the findings' times are of).
fn rfc3339(at: impl Into<SystemTime>) -> String {
    humantime::format_rfc3339_seconds(at.into()).to_string()
}

/// One finding on one line.
fn line(finding: &Finding) -> String {
    let mut text = format!(
        "#{} {:<16} shop={} reference={} payment={} charges=[{}]",
        finding.id,
        finding.kind.as_str(),
        finding.shop_id,
        finding.reference.as_str(),
        finding
            .payment_id
            .as_ref()
            .map_or_else(|| "-".to_owned(), ToString::to_string),
        finding.charge_ids.join(","),
    );
    if let Some(amount) = finding.amount {
        text.push_str(&format!(
            " amount={} {}",
            amount.to_decimal_string(),
            amount.currency()
        ));
    }
    text.push_str(&format!(
        " seen={} last={}: {}",
        finding.seen,
        rfc3339(finding.last_seen),
        finding.detail
    ));
    match &finding.resolved {
        None => {}
        Some((Resolution::Refunded { charge_ids }, at)) => text.push_str(&format!(
            " [resolved {}: refunded {}]",
            rfc3339(*at),
            charge_ids.join(",")
        )),
        Some((Resolution::Manual { by, note }, at)) => {
            text.push_str(&format!(" [resolved {} by {by}: {note}]", rfc3339(*at)))
        }
    }
    text
}

/// A finding as JSON.
fn to_json(finding: &Finding) -> Value {
    let resolution = finding.resolved.as_ref().map(|(how, at)| {
        let mut resolution = json!({ "how": how.as_str(), "at": rfc3339(*at) });
        match how {
            Resolution::Refunded { charge_ids } => resolution["charge_ids"] = json!(charge_ids),
            Resolution::Manual { by, note } => {
                resolution["by"] = json!(by);
                resolution["note"] = json!(note);
            }
        }
        resolution
    });
    json!({
        "id": finding.id.0,
        "kind": finding.kind.as_str(),
        "shop_id": finding.shop_id.to_string(),
        "reference": finding.reference.as_str(),
        "payment_id": finding.payment_id.as_ref().map(ToString::to_string),
        "charge_ids": finding.charge_ids,
        "amount": finding.amount.map(|a| json!({
            "value": a.to_decimal_string(),
            "currency": a.currency().to_string(),
        })),
        "detail": finding.detail,
        "first_seen": rfc3339(finding.first_seen),
        "last_seen": rfc3339(finding.last_seen),
        "seen": finding.seen,
        "resolved": resolution,
    })
}
