//! What the clients do with the intents: each intent's calls in order, the
//! late repeats, and the work they share.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use chargeonce_client::CreatePayment;
use futures::future::join_all;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::sync::Mutex;

use crate::calls::{
    cancel_soon, capture_until_known, pay_call, pay_until_known, refund_until_known,
    void_until_known,
};
use crate::clients::Clients;
use crate::error::ChaosError;
use crate::history::{CallKind, CallRecord, CallResult};
use crate::intent::{AuthorizePlan, Intent, VoidPlan, mix, money};

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
    if let (Some(plan), Some(payment_id)) = (&intent.authorize, &paid) {
        calls.extend(run_authorization(clients, intent, plan, payment_id, &mut rng).await?);
    }
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

/// What an authorizing intent does once authorized: its captures (one
/// after the other, or at once through several instances) and its void
/// (after them, or racing them).
async fn run_authorization(
    clients: &Clients,
    intent: &Intent,
    plan: &AuthorizePlan,
    payment_id: &str,
    rng: &mut StdRng,
) -> Result<Vec<CallRecord>, ChaosError> {
    let instances = clients.instances();
    let count = plan.parts.len();
    let captures: Vec<_> = plan
        .parts
        .iter()
        .enumerate()
        .map(|(i, &minor)| {
            let number = u8::try_from(i + 1).unwrap_or(u8::MAX);
            let last = plan.last_final && i + 1 == count;
            let instance = rng.random_range(0..instances);
            capture_until_known(clients, intent, number, payment_id, (minor, last), instance)
        })
        .collect();
    let void_instance = rng.random_range(0..instances);
    let voiding = void_until_known(clients, intent, payment_id, void_instance);
    let mut calls = Vec::new();
    let captured = async {
        let mut done = Vec::new();
        if plan.concurrent {
            for result in join_all(captures).await {
                done.extend(result?);
            }
        } else {
            for capture in captures {
                done.extend(capture.await?);
            }
        }
        Ok::<_, ChaosError>(done)
    };
    match plan.void {
        Some(VoidPlan::Racing) => {
            let (captured, voided) = tokio::join!(captured, voiding);
            calls.extend(captured?);
            calls.extend(voided?);
        }
        Some(VoidPlan::After) => {
            calls.extend(captured.await?);
            calls.extend(voiding.await?);
        }
        None => calls.extend(captured.await?),
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
    use crate::args::ChaosArgs;
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
