//! `chargeonce pay` and `chargeonce payment get`: the client crate
//! (`chargeonce-client`) from the command line.
//!
//! Exit codes of `pay`: 0 paid, 2 declined, 3 uncertain (maybe charged: run
//! the same command again, never with a new key), 1 error.

use std::io::Write;
use std::time::Duration;

use anyhow::Context;
use chargeonce_client::{
    Attempt, CancelOutcome, Client, CreatePayment, Error, IdempotencyKey, Money, Outcome,
    PayResult, Payment, RetryPolicy,
};
use clap::{Args, Subcommand};

/// Exit code: the payment is declined.
pub const EXIT_DECLINED: i32 = 2;
/// Exit code: the outcome is not known yet.
pub const EXIT_UNCERTAIN: i32 = 3;

/// Where the service is and who we are.
#[derive(Debug, Clone, Args)]
pub struct ConnectArgs {
    /// The service's base URL.
    #[arg(long, env = "CHARGEONCE_URL", default_value = "http://127.0.0.1:8080")]
    url: String,
    /// The shop id (HTTP Basic user).
    #[arg(long, env = "CHARGEONCE_SHOP", default_value = "demo")]
    shop: String,
    /// The shop's secret key (HTTP Basic password).
    #[arg(long, env = "CHARGEONCE_SECRET", hide_env_values = true)]
    secret: chargeonce_core::ShopSecret,
    /// The total time the call may take, retries included. When it runs out
    /// before a definite answer, the result is "uncertain" (exit code 3).
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration)]
    budget: Duration,
}

impl ConnectArgs {
    /// A client with these settings.
    pub fn client(&self) -> anyhow::Result<Client> {
        Ok(Client::builder(&self.url, &self.shop, self.secret.expose())
            .retry_policy(RetryPolicy::default().budget(self.budget))
            .build()?)
    }
}

/// Flags of `chargeonce pay`.
#[derive(Debug, Clone, Args)]
pub struct PayArgs {
    /// The shop's order. The idempotency key is derived from it
    /// (`{reference}-pay`), so running the command again is a retry, not a
    /// second payment.
    #[arg(long)]
    reference: String,
    /// The amount as a decimal string, e.g. `1500.00`.
    #[arg(long)]
    amount: String,
    /// ISO 4217 currency code, e.g. `RUB`.
    #[arg(long)]
    currency: String,
    /// The payment method token (simulator: tok_ok, tok_declined,
    /// tok_insufficient_funds, tok_timeout, tok_slow).
    #[arg(long, default_value = "tok_ok")]
    token: String,
    /// Use this key instead of `{reference}-pay` (another attempt at paying
    /// the same order after a decline needs its own, e.g. `order-123-pay-2`).
    #[arg(long)]
    idempotency_key: Option<String>,
    /// Do not look the order up before paying (the server still never charges
    /// one order twice).
    #[arg(long)]
    no_check: bool,
    /// A metadata pair, `key=value` (repeatable; at most 50): the shop's own
    /// data kept on the payment. Part of the request: running the command
    /// again with other pairs under the same key is refused.
    #[arg(long = "metadata", value_name = "KEY=VALUE", value_parser = metadata_pair)]
    metadata: Vec<(String, String)>,
    /// Only authorize: the amount is held, nothing taken; take it with
    /// `chargeonce payment capture`, release it with `chargeonce payment
    /// void` (else it expires).
    #[arg(long)]
    manual_capture: bool,
    #[command(flatten)]
    connect: ConnectArgs,
}

/// One `--metadata` pair: split at the first `=`.
fn metadata_pair(text: &str) -> Result<(String, String), String> {
    text.split_once('=')
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .ok_or_else(|| format!("`{text}` is not KEY=VALUE"))
}

/// `chargeonce payment ...`.
#[derive(Debug, Subcommand)]
pub enum PaymentCommand {
    /// Show one payment.
    Get {
        /// The payment id (`pay_...`).
        id: String,
        #[command(flatten)]
        connect: ConnectArgs,
    },
    /// Cancel a pending payment: its charge is looked up once the settle
    /// window has passed and never sent again; found, it is refunded in
    /// full. Waits (retrying with the same key) until the cancel ends or
    /// the budget does. Exit 0 when the customer holds no charge, 2 when a
    /// charge is kept, 3 when not known yet.
    Cancel {
        /// The payment id (`pay_...`).
        id: String,
        /// The cancel's idempotency key (default: `cancel-<payment id>`;
        /// the same key on every run resumes the same cancel).
        #[arg(long)]
        idempotency_key: Option<String>,
        #[command(flatten)]
        connect: ConnectArgs,
    },
    /// Capture (part of) an authorized payment under the capture's own key
    /// (one key per shipment: `order-123-capture-1`, `-2`, ...). Retries
    /// with the same key until the capture ends or the budget does. Exit 0
    /// captured, 2 refused by the acquirer, 3 not known yet.
    Capture(crate::authorization::CaptureArgs),
    /// Void what is left of an authorized payment (the captures are kept).
    /// Exit 0 released, 2 refused by the acquirer, 3 not known yet.
    Void(crate::authorization::VoidArgs),
}

/// One line about a payment.
pub fn describe(payment: &Payment) -> String {
    let status = payment
        .authorization_status
        .map_or_else(|| payment.status.as_str(), |s| s.as_str());
    let mut line = format!(
        "{} {} {} {}, order {}",
        payment.id,
        status,
        payment.amount.to_decimal_string(),
        payment.amount.currency(),
        payment.reference
    );
    if let Some(charge) = &payment.provider_payment_id {
        line.push_str(&format!(", acquirer charge {charge}"));
    }
    if !payment.metadata.is_empty() {
        let pairs: Vec<String> = payment
            .metadata
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        line.push_str(&format!(", metadata {}", pairs.join(" ")));
    }
    if let Some(code) = &payment.decline_code {
        line.push_str(&format!(", decline code {code}"));
    }
    line
}

/// One line about an attempt.
pub fn describe_attempt(attempt: &Attempt) -> String {
    let mut line = format!(
        "attempt {}: {}, {:.2} s",
        attempt.number,
        attempt.answer,
        attempt.took.as_secs_f64()
    );
    if let Some(wait) = attempt.retry_in {
        line.push_str(&format!(
            "; retrying with the same key in {:.2} s",
            wait.as_secs_f64()
        ));
    }
    line
}

fn print_result(result: &PayResult) {
    for attempt in &result.attempts {
        println!("  {}", describe_attempt(attempt));
    }
    match &result.outcome {
        Outcome::Paid(payment) if result.found_before_paying => {
            println!("paid (already: found by the check before paying, nothing sent)");
            println!("  {}", describe(payment));
        }
        Outcome::Paid(payment) => println!("paid: {}", describe(payment)),
        Outcome::Declined(payment) => println!("declined: {}", describe(payment)),
        Outcome::Canceled(payment) => println!(
            "canceled (nothing taken; the order may be paid again under a new key): {}",
            describe(payment)
        ),
        Outcome::Uncertain { payment_id } => {
            let id = payment_id.as_deref().unwrap_or("not known");
            println!("UNCERTAIN: no definite answer within the budget (payment: {id}).");
            println!(
                "  It may have been charged. Do not pay again with a new key: run the same \
                 command again (it reuses key {}), or look the order up.",
                result.key.as_str()
            );
        }
    }
    println!("attempts: {}", result.attempt_count());
}

/// `chargeonce pay`: prints the result and exits 0, 2 or 3 (1 on errors).
pub async fn pay(args: PayArgs) -> anyhow::Result<()> {
    let amount = Money::parse(&args.amount, &args.currency).context("--amount/--currency")?;
    let (key, origin) = match &args.idempotency_key {
        Some(key) => (
            IdempotencyKey::new(key.clone()).context("--idempotency-key")?,
            "given",
        ),
        None => (
            IdempotencyKey::for_operation(&args.reference, "pay").context("--reference")?,
            "from the reference",
        ),
    };
    let client = args.connect.client()?;
    let mut request = args.metadata.iter().fold(
        CreatePayment::new(amount, &args.reference, &args.token),
        |request, (k, v)| request.with_metadata(k, v),
    );
    if args.manual_capture {
        request = request.manual_capture();
    }
    println!(
        "paying {} {} for order {} with key {} ({origin})",
        amount.to_decimal_string(),
        amount.currency(),
        args.reference,
        key.as_str()
    );
    let result = if args.no_check {
        client.pay(&key, &request).await
    } else {
        client.pay_order(&key, &request).await
    };
    let result = match result {
        Ok(result) => result,
        Err(Error::KeyReused { problem, attempts }) => {
            anyhow::bail!(
                "key {} was first used for a different request ({} {}): nothing was executed, \
                 and it is not retried ({attempts} attempt). One key names one operation: if \
                 this is the same payment, send the same amount, currency and token; if it is \
                 a new one, give it its own --idempotency-key",
                key.as_str(),
                problem.status,
                problem.code
            )
        }
        Err(error) => {
            let attempts = error.attempts();
            return Err(anyhow::Error::new(error)
                .context(format!("the payment failed after {attempts} attempt(s)")));
        }
    };
    print_result(&result);
    let code = match result.outcome {
        Outcome::Paid(_) => 0,
        Outcome::Declined(_) | Outcome::Canceled(_) => EXIT_DECLINED,
        Outcome::Uncertain { .. } => EXIT_UNCERTAIN,
    };
    if code != 0 {
        std::io::stdout().flush().ok();
        std::process::exit(code);
    }
    Ok(())
}

/// `chargeonce payment ...`.
pub async fn payment(command: PaymentCommand) -> anyhow::Result<()> {
    match command {
        PaymentCommand::Get { id, connect } => {
            let client = connect.client()?;
            let (payment, attempts) = client.payment_with_attempts(&id).await?;
            println!("{}", describe(&payment));
            println!("created at {}", payment.created_at);
            println!("attempts: {attempts}");
            Ok(())
        }
        PaymentCommand::Cancel {
            id,
            idempotency_key,
            connect,
        } => cancel(&id, idempotency_key, &connect).await,
        PaymentCommand::Capture(args) => crate::authorization::capture(args).await,
        PaymentCommand::Void(args) => crate::authorization::void(args).await,
    }
}

/// `chargeonce payment cancel`.
async fn cancel(id: &str, key: Option<String>, connect: &ConnectArgs) -> anyhow::Result<()> {
    let key = IdempotencyKey::new(key.unwrap_or_else(|| format!("cancel-{id}")))
        .context("--idempotency-key")?;
    let client = connect.client()?;
    println!("canceling {id} with key {}", key.as_str());
    let result = client.cancel(id, &key).await?;
    for attempt in &result.attempts {
        println!("  {}", describe_attempt(attempt));
    }
    let code = match &result.outcome {
        CancelOutcome::Canceled(p) => {
            println!("canceled: nothing taken: {}", describe(p));
            0
        }
        CancelOutcome::Refunded(p) => {
            println!("the charge was found and refunded in full: {}", describe(p));
            0
        }
        CancelOutcome::Declined(p) => {
            println!("declined by the acquirer: nothing taken: {}", describe(p));
            0
        }
        CancelOutcome::Charged(p) => {
            println!(
                "the charge was found and is KEPT ({} minor units refunded): {}",
                p.refunded_minor,
                describe(p)
            );
            EXIT_DECLINED
        }
        CancelOutcome::Uncertain { .. } => {
            println!(
                "not ended yet (the charge is looked up once the settle window has passed); \
                 run the same command again, the service also ends it on its own"
            );
            EXIT_UNCERTAIN
        }
    };
    if code != 0 {
        std::io::stdout().flush().ok();
        std::process::exit(code);
    }
    Ok(())
}
