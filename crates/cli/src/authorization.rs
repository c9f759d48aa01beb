//! `chargeonce payment capture` and `chargeonce payment void`: an
//! authorization's moves from the command line, each under its own key.

use std::io::Write;

use anyhow::Context;
use chargeonce_client::{CaptureOutcome, CreateCapture, IdempotencyKey, Money, VoidOutcome};
use clap::Args;

use crate::pay::{ConnectArgs, EXIT_DECLINED, EXIT_UNCERTAIN, describe, describe_attempt};

/// Flags of `chargeonce payment capture`.
#[derive(Debug, Clone, Args)]
pub struct CaptureArgs {
    /// The authorized payment's id (`pay_...`).
    id: String,
    /// The capture's idempotency key, named after the shipment
    /// (`order-123-capture-1`): running the command again with it resumes
    /// the same capture, never a second one.
    #[arg(long)]
    idempotency_key: String,
    /// How much, as a decimal string (`1000.00`); absent: all that is
    /// capturable, as the final capture.
    #[arg(long, requires = "currency")]
    amount: Option<String>,
    /// ISO 4217 currency code of `--amount` (the payment's).
    #[arg(long, requires = "amount")]
    currency: Option<String>,
    /// The last capture: the rest of the authorization is released once it
    /// succeeds.
    #[arg(long = "final")]
    last: bool,
    #[command(flatten)]
    connect: ConnectArgs,
}

/// Flags of `chargeonce payment void`.
#[derive(Debug, Clone, Args)]
pub struct VoidArgs {
    /// The authorized payment's id (`pay_...`).
    id: String,
    /// The void's idempotency key (default: `void-<payment id>`; the same
    /// key on every run resumes the same void).
    #[arg(long)]
    idempotency_key: Option<String>,
    #[command(flatten)]
    connect: ConnectArgs,
}

/// `chargeonce payment capture`.
pub async fn capture(args: CaptureArgs) -> anyhow::Result<()> {
    let key = IdempotencyKey::new(args.idempotency_key.clone()).context("--idempotency-key")?;
    let mut request = match (&args.amount, &args.currency) {
        (Some(amount), Some(currency)) => {
            CreateCapture::part(Money::parse(amount, currency).context("--amount")?)
        }
        _ => CreateCapture::rest(),
    };
    if args.last && request.amount.is_some() {
        request = request.last();
    }
    let client = args.connect.client()?;
    println!("capturing {} with key {}", args.id, key.as_str());
    let result = client.capture(&args.id, &key, &request).await?;
    for attempt in &result.attempts {
        println!("  {}", describe_attempt(attempt));
    }
    let code = match &result.outcome {
        CaptureOutcome::Captured(c) => {
            println!(
                "captured {} {} ({}, acquirer capture {})",
                c.amount.to_decimal_string(),
                c.amount.currency(),
                c.id,
                c.provider_capture_id.as_deref().unwrap_or("?")
            );
            0
        }
        CaptureOutcome::Failed(c) => {
            println!(
                "the acquirer refused the capture ({}): nothing taken, the amount is capturable again",
                c.failure_code.as_deref().unwrap_or("refused")
            );
            EXIT_DECLINED
        }
        CaptureOutcome::Uncertain { capture_id } => {
            println!(
                "not known yet (capture {}, its amount reserved); run the same command again, \
                 the service also ends it on its own",
                capture_id.as_deref().unwrap_or("not named yet")
            );
            EXIT_UNCERTAIN
        }
    };
    exit_with(code)
}

/// `chargeonce payment void`.
pub async fn void(args: VoidArgs) -> anyhow::Result<()> {
    let key = IdempotencyKey::new(
        args.idempotency_key
            .clone()
            .unwrap_or_else(|| format!("void-{}", args.id)),
    )
    .context("--idempotency-key")?;
    let client = args.connect.client()?;
    println!("voiding {} with key {}", args.id, key.as_str());
    let result = client.void(&args.id, &key).await?;
    for attempt in &result.attempts {
        println!("  {}", describe_attempt(attempt));
    }
    let code = match &result.outcome {
        VoidOutcome::Voided(p) => {
            println!("released: {}", describe(p));
            0
        }
        VoidOutcome::Failed {
            payment,
            failure_code,
        } => {
            println!(
                "the acquirer refused the void ({}); the authorization stands: {}",
                failure_code.as_deref().unwrap_or("refused"),
                describe(payment)
            );
            EXIT_DECLINED
        }
        VoidOutcome::Uncertain { .. } => {
            println!(
                "not known yet; run the same command again, the service also ends it on its own"
            );
            EXIT_UNCERTAIN
        }
    };
    exit_with(code)
}

fn exit_with(code: i32) -> anyhow::Result<()> {
    if code != 0 {
        std::io::stdout().flush().ok();
        std::process::exit(code);
    }
    Ok(())
}
