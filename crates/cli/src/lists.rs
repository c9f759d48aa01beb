//! `chargeonce payments list` and `chargeonce keys get`: a page of the
//! shop's payments and one of its idempotency keys, printed as JSON.

use chargeonce_client::{ListParams, PaymentListParams};
use clap::{Args, Subcommand};
use serde_json::json;

use crate::pay::ConnectArgs;

/// `chargeonce payments ...`.
#[derive(Debug, Subcommand)]
pub enum PaymentsCommand {
    /// Print one page of the shop's payments, newest first, as JSON
    /// (`{"object": "list", "data": [...], "has_more": ...}`).
    List(ListArgs),
}

/// Flags of `chargeonce payments list`.
#[derive(Debug, Args)]
pub struct ListArgs {
    /// Only payments in this status: pending, succeeded or declined.
    #[arg(long)]
    status: Option<String>,
    /// Only the payments of this order.
    #[arg(long)]
    reference: Option<String>,
    /// How many payments, 1 to 100 (the server's default: 10).
    #[arg(long)]
    limit: Option<u32>,
    /// The page after (older than) this payment id.
    #[arg(long, conflicts_with = "ending_before")]
    starting_after: Option<String>,
    /// The page before (newer than) this payment id.
    #[arg(long)]
    ending_before: Option<String>,
    /// Only payments created at or after this RFC 3339 time.
    #[arg(long)]
    created_gte: Option<String>,
    /// Only payments created before this RFC 3339 time.
    #[arg(long)]
    created_lt: Option<String>,
    #[command(flatten)]
    connect: ConnectArgs,
}

/// `chargeonce keys ...`.
#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Print what the service knows of one of the shop's idempotency keys
    /// as JSON: its state, first request, repeats, lease holder.
    Get {
        /// The idempotency key.
        key: String,
        #[command(flatten)]
        connect: ConnectArgs,
    },
}

/// Runs `chargeonce payments ...`.
pub async fn payments(command: PaymentsCommand) -> anyhow::Result<()> {
    match command {
        PaymentsCommand::List(args) => {
            let client = args.connect.client()?;
            let params = PaymentListParams {
                page: ListParams {
                    limit: args.limit,
                    starting_after: args.starting_after,
                    ending_before: args.ending_before,
                },
                status: args.status,
                reference: args.reference,
                created_gte: args.created_gte,
                created_lt: args.created_lt,
            };
            let page = client.list_payments_json(&params).await?;
            let list = json!({"object": "list", "data": page.data, "has_more": page.has_more});
            println!("{}", serde_json::to_string_pretty(&list)?);
            Ok(())
        }
    }
}

/// Runs `chargeonce keys ...`.
pub async fn keys(command: KeysCommand) -> anyhow::Result<()> {
    match command {
        KeysCommand::Get { key, connect } => {
            let client = connect.client()?;
            let info = client.idempotency_key(&key).await?;
            let mut value = serde_json::to_value(&info)?;
            if let Some(object) = value.as_object_mut() {
                object.insert("object".into(), "idempotency_key".into());
            }
            println!("{}", serde_json::to_string_pretty(&value)?);
            Ok(())
        }
    }
}
