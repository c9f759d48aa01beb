//! `chargeonce demo`: the seed's incident, played against a real, embedded
//! chargeonce with the client crate.
//!
//! The service is the one `chargeonce serve` runs (same flags, same wiring):
//! SQLite in a temporary folder, the in-process acquirer simulator, on a free
//! local port, with a slow bank (charges at once, answers after 2 s), an
//! acquirer timeout of 1 s and a key TTL of 2 s, so the whole story takes a
//! few seconds.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context;
use chargeonce_client::{
    AttemptAnswer, Client, CreatePayment, Error, IdempotencyKey, Money, Outcome, PayResult,
    RetryPolicy,
};
use chargeonce_core::{ShopId, ShopSecret, Shops};
use clap::Parser;

use crate::pay::describe;
use crate::serve::{self, ServeArgs};

const SHOP: &str = "demo";
const ORDER: &str = "order-123";
const PREFER_WAIT: Duration = Duration::from_secs(10);

/// `chargeonce serve`'s flags, parsed from the demo's own argument list.
#[derive(Debug, Parser)]
struct Embedded {
    #[command(flatten)]
    serve: ServeArgs,
}

/// A scratch folder, removed at the end.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> anyhow::Result<Self> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        let dir =
            std::env::temp_dir().join(format!("chargeonce-demo-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        Ok(Self(dir))
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The embedded service: its base URL, its operator listener's URL (the
/// simulator's ledger is there) and the shop's secret.
struct Service {
    base: String,
    operator: String,
    secret: String,
}

/// A free port of 127.0.0.1.
fn free_port() -> anyhow::Result<std::net::SocketAddr> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .context("finding a free port")
}

/// Starts the embedded service.
async fn start_service(scratch: &Scratch) -> anyhow::Result<Service> {
    let database_url = format!("sqlite://{}", scratch.0.join("chargeonce.db").display());
    let ledger = scratch.0.join("acquirer-ledger.db");

    // The shop, registered before the service starts (its secret is ours to know).
    let secret = ShopSecret::generate();
    let store = chargeonce_store::SqliteStore::connect(&database_url, &Default::default())
        .await
        .context("creating the demo database")?;
    store
        .add_shop(&ShopId::new(SHOP)?, &secret.hash())
        .await
        .context("adding the demo shop")?;
    store.close().await;

    let addr = free_port()?;
    let listen = addr.to_string();
    let operator_addr = free_port()?;
    let operator = operator_addr.to_string();
    let ledger = ledger.display().to_string();
    let embedded = Embedded::try_parse_from([
        "chargeonce-demo",
        "--listen",
        listen.as_str(),
        "--operator-listen",
        operator.as_str(),
        "--database-url",
        database_url.as_str(),
        "--sim-ledger",
        ledger.as_str(),
        "--sim-slow",
        "2s",
        "--acquirer-timeout",
        "1s",
        "--key-ttl",
        "2s",
        "--no-demo-shop",
    ])
    .context("the embedded service's flags")?;
    let service = tokio::spawn(serve::run(embedded.serve, None));

    let ready_by = Instant::now() + Duration::from_secs(15);
    while tokio::net::TcpStream::connect(addr).await.is_err() {
        if service.is_finished() {
            service.await??;
            anyhow::bail!("the embedded service stopped");
        }
        anyhow::ensure!(
            Instant::now() < ready_by,
            "the embedded service did not start"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(Service {
        base: format!("http://{addr}"),
        operator: format!("http://{operator_addr}"),
        secret: secret.expose().to_owned(),
    })
}

/// One line of a timeline.
struct Event {
    at: Duration,
    line: String,
}

/// The sends and answers of one click, relative to `start`.
fn events(start: Instant, label: &str, result: &PayResult, key: &IdempotencyKey) -> Vec<Event> {
    let mut out = Vec::new();
    for attempt in &result.attempts {
        let sent = attempt.sent_at.saturating_duration_since(start);
        let what = if attempt.number == 1 {
            format!(
                "POST /v1/payments  Idempotency-Key: {}  Prefer: wait={}",
                key.as_str(),
                PREFER_WAIT.as_secs()
            )
        } else {
            "retry: the same key, the same body".to_owned()
        };
        out.push(Event {
            at: sent,
            line: format!("{label} -> {what}"),
        });
        let mut answer = attempt.answer.to_string();
        if let AttemptAnswer::Http { status: 202, .. } = attempt.answer {
            answer.push_str(": the bank's answer did not come in time");
        }
        if let Some(wait) = attempt.retry_in {
            answer.push_str(&format!("; retry in {:.1} s", wait.as_secs_f64()));
        }
        out.push(Event {
            at: sent + attempt.took,
            line: format!("{label} <- {answer}"),
        });
    }
    out
}

fn paid_id(result: &PayResult) -> anyhow::Result<&str> {
    match &result.outcome {
        Outcome::Paid(p) => Ok(&p.id),
        other => anyhow::bail!("expected a paid outcome, got {other:?}"),
    }
}

/// What the demo's steps share: the client, the order's key and request,
/// and the operator listener's URL.
struct Demo {
    client: Client,
    operator: String,
    key: IdempotencyKey,
    request: CreatePayment,
}

/// Runs the demo.
pub async fn run() -> anyhow::Result<()> {
    let started = Instant::now();
    let scratch = Scratch::new()?;
    let demo = setup(&scratch).await?;
    let (first, second) = double_click(&demo).await?;
    let id = paid_id(&first)?.to_owned();
    anyhow::ensure!(paid_id(&second)? == id, "the clicks got different payments");
    lost_answer(&demo, &first, &second, &id).await?;
    changed_amount(&demo).await?;
    let again = after_expiry(&demo, &id).await?;
    let requests = first.attempt_count() + second.attempt_count() + 1 + again.attempt_count();
    ledger(&demo, requests).await?;
    println!();
    println!("Done in {:.1} s.", started.elapsed().as_secs_f64());
    Ok(())
}

/// Starts the service and introduces the order and its key (step 1).
async fn setup(scratch: &Scratch) -> anyhow::Result<Demo> {
    println!("chargeonce demo: the incident from the seed article, against a real chargeonce.");
    println!(
        "Starting an embedded service: SQLite in {}, the in-process acquirer simulator.",
        scratch.0.display()
    );
    let Service {
        base,
        operator,
        secret,
    } = start_service(scratch).await?;
    println!(
        "The simulated bank charges at once but answers after 2 s; chargeonce waits for it 1 s \
         (--acquirer-timeout). Keys are kept 2 s (--key-ttl; 24 h by default)."
    );
    let policy = RetryPolicy::default()
        .budget(Duration::from_secs(20))
        .prefer_wait(Some(PREFER_WAIT));
    let client = Client::builder(&base, SHOP, &secret)
        .retry_policy(policy)
        .build()?;
    let amount = Money::parse("1500.00", "RUB")?;
    let key = IdempotencyKey::for_operation(ORDER, "pay")?;
    let request = CreatePayment::new(amount, ORDER, "tok_slow");

    println!();
    println!("1. An order: {ORDER}, 1500.00 RUB. The key names the intent, not the attempt:");
    println!(
        "   IdempotencyKey::for_operation(\"{ORDER}\", \"pay\") = \"{}\". Every click, retry",
        key.as_str()
    );
    println!("   or restart that means \"pay {ORDER}\" sends this same key.");
    Ok(Demo {
        client,
        operator,
        key,
        request,
    })
}

/// Step 2: two concurrent clicks with one key, and their timeline.
async fn double_click(demo: &Demo) -> anyhow::Result<(PayResult, PayResult)> {
    println!();
    println!(
        "2. The customer clicks \"Pay\", sees a spinner, and clicks again: two concurrent\n   \
         requests with one key, 0.3 s apart."
    );
    let step = Instant::now();
    let first = {
        let (client, key, request) = (demo.client.clone(), demo.key.clone(), demo.request.clone());
        tokio::spawn(async move { client.pay(&key, &request).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let second = demo.client.pay(&demo.key, &demo.request).await?;
    let first = first.await??;
    let mut timeline = events(step, "click 1", &first, &demo.key);
    timeline.extend(events(step, "click 2", &second, &demo.key));
    timeline.sort_by_key(|e| e.at);
    for event in &timeline {
        println!("   +{:.2} s  {}", event.at.as_secs_f64(), event.line);
    }
    println!(
        "   Click 2 did not get 409: it waited on the server (Prefer: wait) for click 1's attempt."
    );
    Ok((first, second))
}

/// Step 3: what happened to the answer the bank gave late.
async fn lost_answer(
    demo: &Demo,
    first: &PayResult,
    second: &PayResult,
    id: &str,
) -> anyhow::Result<()> {
    println!();
    println!("3. The lost answer: during click 1 the bank charged, but its answer came after");
    println!(
        "   chargeonce stopped waiting (a timeout after the charge). chargeonce did not guess:"
    );
    println!(
        "   it answered 202 pending. Click 2, still waiting, resumed the payment, and the bank,"
    );
    println!(
        "   idempotent on its own key, answered with the charge it had made. Click 1's client"
    );
    println!("   retried with the same key and body after Retry-After and got the stored answer.");
    println!(
        "   click 1: paid after {} attempts; click 2: paid after {} attempt(s).\n   \
         Both: {id}.",
        first.attempt_count(),
        second.attempt_count()
    );
    let ledger = demo.client.acquirer_ledger(&demo.operator).await?;
    println!(
        "   The bank's ledger so far: {} charge(s) for {ORDER}.",
        ledger
            .charges
            .iter()
            .filter(|c| c.reference == ORDER)
            .count()
    );
    Ok(())
}

/// Step 4: another body under the same key is refused, not retried.
async fn changed_amount(demo: &Demo) -> anyhow::Result<()> {
    println!();
    println!("4. The shop's frontend applies a coupon and sends 1350.00 RUB under the same key.");
    let changed = CreatePayment::new(Money::parse("1350.00", "RUB")?, ORDER, "tok_slow");
    match demo.client.pay(&demo.key, &changed).await {
        Err(Error::KeyReused { problem, attempts }) => {
            println!(
                "   <- {} {}: {}",
                problem.status, problem.code, problem.detail
            );
            println!(
                "   The client reports Error::KeyReused after {attempts} attempt and does not retry:"
            );
            println!(
                "   another request under an old key is a bug to fix, not a retry. Nothing was charged."
            );
            Ok(())
        }
        other => anyhow::bail!("expected 422 idempotency_key_reused, got {other:?}"),
    }
}

/// Step 5: after the key expired, the order still has one payment.
async fn after_expiry(demo: &Demo, id: &str) -> anyhow::Result<PayResult> {
    println!();
    println!("5. The key expires (2 s here). The customer comes back and pays {ORDER} again,");
    println!("   with the same key.");
    tokio::time::sleep(Duration::from_millis(2200)).await;
    let again = demo.client.pay(&demo.key, &demo.request).await?;
    for attempt in &again.attempts {
        println!("   <- {}", attempt.answer);
    }
    anyhow::ensure!(paid_id(&again)? == id, "the order got another payment");
    println!("   The key was new again, but the order already has a succeeded payment: that");
    println!("   payment is the answer ({id}), and nothing is charged.");
    let checked = demo.client.pay_order(&demo.key, &demo.request).await?;
    if let (true, Outcome::Paid(payment)) = (checked.found_before_paying, &checked.outcome) {
        println!("   The client's own check before paying (GET /v1/payments?reference={ORDER})");
        println!("   finds it too, without sending a payment:");
        println!("     {}", describe(payment));
    }
    Ok(again)
}

/// Step 6: the acquirer's ledger holds one charge after `requests` requests.
async fn ledger(demo: &Demo, requests: usize) -> anyhow::Result<()> {
    println!();
    println!("6. The acquirer's ledger, the ground truth of what moved (GET /sim/ledger):");
    let ledger = demo.client.acquirer_ledger(&demo.operator).await?;
    for charge in &ledger.charges {
        println!(
            "   {}  {}  {} {}  {}  payment {}",
            charge.id,
            charge.reference,
            charge.amount.to_decimal_string(),
            charge.amount.currency(),
            charge.status,
            charge.payment_id
        );
    }
    for total in &ledger.total_succeeded {
        println!(
            "   total: {} {} in {} charge(s).",
            total.amount, total.currency, total.count
        );
    }
    let charged = ledger
        .charges
        .iter()
        .filter(|c| c.status == "succeeded")
        .count();
    anyhow::ensure!(
        charged == 1,
        "expected one charge, the ledger has {charged}"
    );
    println!(
        "   1500.00 RUB charged once, not 3000.00: {requests} payment requests for {ORDER} (two clicks,"
    );
    println!("   a retry, a changed amount, a payment after the key expired), one charge.");
    Ok(())
}
