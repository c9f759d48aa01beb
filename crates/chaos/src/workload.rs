//! The intents of a run and the clients that work through them with the
//! client SDK: double clicks, late repeats, changed bodies, refunds.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use chargeonce_client::{Client, CreatePayment, IdempotencyKey, Money, RetryPolicy};
use chargeonce_core::Currency;
use futures::future::join_all;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::sync::Mutex;

use crate::args::ChaosArgs;
use crate::calls::{cancel_soon, pay_call, pay_until_known, refund_until_known};
use crate::error::ChaosError;
use crate::history::{CallKind, CallRecord, CallResult};

/// The currency of every intent.
pub const CURRENCY: &str = "RUB";

/// A refund the intent makes once paid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RefundPlan {
    /// The first refund, in minor units.
    pub first_minor: i64,
    /// A second refund sent at the same time under another key, when set.
    pub second_minor: Option<i64>,
}

/// One payment intent: an order of one shop, and what the client will do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Intent {
    /// Its number.
    pub index: usize,
    /// The shop's index.
    pub shop: usize,
    /// The order reference (the same references exist in every shop).
    pub reference: String,
    /// The key: `for_operation(reference, "pay")`.
    pub key: IdempotencyKey,
    /// In minor units.
    pub amount_minor: i64,
    /// The card token (`tok_ok` or `tok_declined`).
    pub token: &'static str,
    /// Sent twice at once.
    pub double_click: bool,
    /// Repeated much later.
    pub late_retry: bool,
    /// Repeated with another amount under the same key.
    pub changed_body: bool,
    /// Refunded once paid.
    pub refund: Option<RefundPlan>,
    /// Canceled a moment after it is sent.
    pub cancel: bool,
}

/// SplitMix64: a seed per intent, so an intent's choices do not depend on
/// the order in which clients pick intents up.
pub fn mix(seed: u64, n: u64) -> u64 {
    let mut z = seed.wrapping_add(n.wrapping_add(1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Intent {
    /// Intent `index` of a run with `seed`.
    pub fn generate(seed: u64, index: usize, args: &ChaosArgs) -> Result<Self, ChaosError> {
        let mut rng = StdRng::seed_from_u64(mix(seed, index as u64));
        let shops = args.shops.max(1);
        let shop = index % shops;
        let reference = format!("order-{}", index / shops);
        let key = IdempotencyKey::for_operation(&reference, "pay")
            .map_err(|e| ChaosError::Setup(format!("intent key: {e}")))?;
        let amount_minor = rng.random_range(100..=500_000_i64);
        let token = if rng.random_bool(args.decline_rate.clamp(0.0, 1.0)) {
            "tok_declined"
        } else {
            "tok_ok"
        };
        let double_click = rng.random_bool(args.double_click_rate.clamp(0.0, 1.0));
        let late_retry = rng.random_bool(args.late_retry_rate.clamp(0.0, 1.0));
        let changed_body = rng.random_bool(args.changed_body_rate.clamp(0.0, 1.0));
        let refund = rng.random_bool(args.refund_rate.clamp(0.0, 1.0)).then(|| {
            let first_minor = rng.random_range(1..=amount_minor);
            let second_minor = rng
                .random_bool(0.3)
                .then(|| rng.random_range(1..=amount_minor));
            RefundPlan {
                first_minor,
                second_minor,
            }
        });
        // Drawn last: the earlier draws (and so every run before the
        // flag) stay as they were for a seed.
        let cancel = rng.random_bool(args.cancel_rate.clamp(0.0, 1.0));
        Ok(Self {
            index,
            shop,
            reference,
            key,
            amount_minor,
            token,
            double_click,
            late_retry,
            changed_body,
            refund,
            cancel,
        })
    }

    /// The payment request.
    pub fn request(&self) -> Result<CreatePayment, ChaosError> {
        Ok(CreatePayment::new(
            money(self.amount_minor)?,
            self.reference.clone(),
            self.token,
        ))
    }
}

pub(crate) fn money(minor: i64) -> Result<Money, ChaosError> {
    let currency = Currency::from_code(CURRENCY).map_err(|e| ChaosError::Setup(e.to_string()))?;
    Money::from_minor(minor, currency).map_err(|e| ChaosError::Setup(e.to_string()))
}

/// The clients of a run: one SDK client per shop and instance proxy.
#[derive(Debug)]
pub struct Clients {
    /// `by_shop[shop][instance]`.
    by_shop: Vec<Vec<Client>>,
}

impl Clients {
    /// Clients of `shops` (id, secret) through every proxy base URL.
    pub fn new(
        shops: &[(String, String)],
        proxies: &[String],
        args: &ChaosArgs,
    ) -> Result<Self, ChaosError> {
        let policy = RetryPolicy::default()
            .budget(args.call_budget)
            .attempt_timeout(args.attempt_timeout)
            .backoff(Duration::from_millis(50), Duration::from_secs(1))
            .max_attempts(50)
            .prefer_wait(Some(
                args.attempt_timeout.saturating_sub(Duration::from_secs(1)),
            ));
        let by_shop = shops
            .iter()
            .map(|(shop, secret)| {
                proxies
                    .iter()
                    .map(|base| {
                        Client::builder(base.clone(), shop.clone(), secret.clone())
                            .retry_policy(policy)
                            .reuse_connections(false)
                            .connect_timeout(Duration::from_secs(1))
                            .build()
                            .map_err(|e| ChaosError::Setup(format!("client: {e}")))
                    })
                    .collect::<Result<Vec<_>, _>>()
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Self { by_shop })
    }

    pub(crate) fn get(&self, shop: usize, instance: usize) -> &Client {
        let row = &self.by_shop[shop % self.by_shop.len()];
        &row[instance % row.len()]
    }

    pub(crate) fn instances(&self) -> usize {
        self.by_shop.first().map_or(1, Vec::len).max(1)
    }
}

/// Everything an intent does, in order: pay (maybe twice at once, maybe
/// canceled meanwhile), repeat with a changed body, refund.
pub async fn run_intent(
    clients: &Clients,
    intent: &Intent,
    seed: u64,
) -> Result<Vec<CallRecord>, ChaosError> {
    let mut rng = StdRng::seed_from_u64(mix(seed ^ 0xC4A0_5EED, intent.index as u64));
    let instances = clients.instances();
    let request = intent.request()?;
    let first = rng.random_range(0..instances);
    // Drawn only for a cancel: other intents draw as they always did.
    let (cancel_delay, cancel_instance) = if intent.cancel {
        (
            Duration::from_millis(rng.random_range(0..400)),
            rng.random_range(0..instances),
        )
    } else {
        (Duration::ZERO, 0)
    };
    let paying = async {
        if intent.double_click {
            let second = (first + 1 + rng.random_range(0..instances.max(2) - 1)) % instances;
            let (a, b) = tokio::join!(
                pay_until_known(clients, intent, CallKind::Pay, first, &request),
                pay_until_known(clients, intent, CallKind::DoubleClick, second, &request),
            );
            a.into_iter().chain(b).collect::<Vec<_>>()
        } else {
            pay_until_known(clients, intent, CallKind::Pay, first, &request).await
        }
    };
    let mut calls = if intent.cancel {
        let (mut paid, canceled) = tokio::join!(
            paying,
            cancel_soon(clients, intent, cancel_delay, cancel_instance)
        );
        paid.extend(canceled?);
        paid
    } else {
        paying.await
    };
    if intent.changed_body {
        let changed = CreatePayment::new(
            money(intent.amount_minor + 1)?,
            intent.reference.clone(),
            intent.token,
        );
        let instance = rng.random_range(0..instances);
        calls.push(pay_call(clients, intent, CallKind::ChangedBody, instance, &changed).await);
    }
    let paid = calls.iter().find_map(|c| match &c.result {
        CallResult::Paid(p) if c.kind.is_payment() => Some(p.id.clone()),
        _ => None,
    });
    if let (Some(plan), Some(payment_id)) = (intent.refund, paid) {
        let one = rng.random_range(0..instances);
        let two = rng.random_range(0..instances);
        match plan.second_minor {
            Some(second) => {
                let (a, b) = tokio::join!(
                    refund_until_known(clients, intent, 1, &payment_id, plan.first_minor, one),
                    refund_until_known(clients, intent, 2, &payment_id, second, two),
                );
                calls.extend(a?);
                calls.extend(b?);
            }
            None => calls.extend(
                refund_until_known(clients, intent, 1, &payment_id, plan.first_minor, one).await?,
            ),
        }
    }
    Ok(calls)
}

/// The late repeat of an intent's payment.
pub async fn run_late_retry(
    clients: &Clients,
    intent: &Intent,
    seed: u64,
) -> Result<Vec<CallRecord>, ChaosError> {
    let mut rng = StdRng::seed_from_u64(mix(seed ^ 0x1A7E, intent.index as u64));
    let request = intent.request()?;
    let instance = rng.random_range(0..clients.instances());
    Ok(pay_until_known(clients, intent, CallKind::LateRetry, instance, &request).await)
}

/// Work shared by the client tasks: the intents, a cursor, the history.
#[derive(Debug)]
pub struct Work {
    /// Every intent.
    pub intents: Vec<Intent>,
    /// The intents repeated late, in the order they run.
    pub late: Vec<usize>,
    /// Units of work done (intents, then late repeats).
    pub done: AtomicUsize,
    next: AtomicUsize,
    /// Every call, as it ended.
    pub history: Mutex<Vec<CallRecord>>,
}

impl Work {
    /// The work of a run.
    pub fn new(intents: Vec<Intent>) -> Self {
        let late = intents
            .iter()
            .filter(|i| i.late_retry)
            .map(|i| i.index)
            .collect();
        Self {
            intents,
            late,
            done: AtomicUsize::new(0),
            next: AtomicUsize::new(0),
            history: Mutex::new(Vec::new()),
        }
    }

    /// Intents plus late repeats.
    pub fn total(&self) -> usize {
        self.intents.len() + self.late.len()
    }

    /// Runs `clients` tasks until every unit is done.
    pub async fn run(self: &Arc<Self>, clients: Arc<Clients>, tasks: usize, seed: u64) {
        let workers = (0..tasks.max(1)).map(|_| {
            let work = self.clone();
            let clients = clients.clone();
            tokio::spawn(async move { work.worker(&clients, seed).await })
        });
        for result in join_all(workers).await {
            if let Err(error) = result {
                tracing::error!(%error, "a chaos client task failed");
            }
        }
    }

    async fn worker(&self, clients: &Clients, seed: u64) {
        loop {
            let unit = self.next.fetch_add(1, Ordering::Relaxed);
            let calls = if let Some(intent) = self.intents.get(unit) {
                run_intent(clients, intent, seed).await
            } else if let Some(intent) = self
                .late
                .get(unit - self.intents.len())
                .and_then(|&i| self.intents.get(i))
            {
                run_late_retry(clients, intent, seed).await
            } else {
                return;
            };
            match calls {
                Ok(calls) => self.history.lock().await.extend(calls),
                Err(error) => tracing::error!(%error, "intent {unit} could not run"),
            }
            self.done.fetch_add(1, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::nemesis::Plan;

    #[test]
    fn one_seed_makes_one_run() {
        let args = ChaosArgs::small(50, 4);
        let a: Vec<_> = (0..50)
            .map(|i| Intent::generate(42, i, &args).unwrap())
            .collect();
        let b: Vec<_> = (0..50)
            .map(|i| Intent::generate(42, i, &args).unwrap())
            .collect();
        assert_eq!(a, b);
        let c: Vec<_> = (0..50)
            .map(|i| Intent::generate(43, i, &args).unwrap())
            .collect();
        assert_ne!(a, c);
        assert_eq!(
            Plan::generate(42, 3, 20, 2, 2, 1, 1),
            Plan::generate(42, 3, 20, 2, 2, 1, 1)
        );
        assert_ne!(
            Plan::generate(42, 3, 20, 2, 2, 1, 1),
            Plan::generate(43, 3, 20, 2, 2, 1, 1)
        );
    }

    #[test]
    fn shops_share_keys_and_references_on_purpose() {
        let args = ChaosArgs::small(4, 1);
        let a = Intent::generate(1, 0, &args).unwrap();
        let b = Intent::generate(1, 1, &args).unwrap();
        assert_ne!(a.shop, b.shop);
        assert_eq!(a.key, b.key);
        assert_eq!(a.reference, b.reference);
    }

    #[test]
    fn the_plan_holds_every_fault_asked_for_in_order() {
        let plan = Plan::generate(7, 3, 20, 2, 3, 1, 1);
        assert_eq!(plan.steps.len(), 27);
        assert_eq!(
            plan.steps
                .iter()
                .filter(|(_, a)| *a == crate::nemesis::Action::PgFailover)
                .count(),
            1
        );
        assert!(plan.steps.windows(2).all(|w| w[0].0 <= w[1].0));
        assert!(plan.steps.iter().all(|(at, _)| (0.05..0.95).contains(at)));
        assert!(
            plan.steps
                .iter()
                .filter(|(_, a)| matches!(a, crate::nemesis::Action::CommitWindowKill(_)))
                .all(|(at, _)| *at < 0.5),
            "a commit-window kill comes while intents are still being charged"
        );
    }
}
