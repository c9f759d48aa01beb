//! The scenarios: what each worker sends and what each answer must be.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use clap::ValueEnum;

use crate::client::{Answer, Target, manual_payment_body, payment_body};
use crate::report::{LedgerReport, Tally};

/// A load shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Scenario {
    /// Every request a new key and a new order: the full durable path.
    Fresh,
    /// Repeats of completed keys: byte-identical replays, nothing executes.
    Replay,
    /// Many concurrent duplicates of one key at a time: one execution per key.
    Storm,
    /// 80 % fresh, 15 % replay, 5 % same key with another body (422).
    Mixed,
    /// Every turn a new authorization (`capture_method` `manual`) and its
    /// capture of everything, each under its own new key: the lifecycle's
    /// durable path, two requests a turn.
    AuthorizeCapture,
    /// Every turn a new payment and the refund of all of it, each under its
    /// own new key: the refund's durable path, two requests a turn.
    Refund,
    /// `POST /bench/ceiling` (needs `serve --bench-ceiling`): auth, no idempotency.
    Ceiling,
    /// `POST /bench/noop` (needs `serve --bench-ceiling`): no auth, no database.
    Noop,
}

impl Scenario {
    /// The scenario's name, as on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Self::Fresh => "fresh",
            Self::Replay => "replay",
            Self::Storm => "storm",
            Self::Mixed => "mixed",
            Self::AuthorizeCapture => "authorize-capture",
            Self::Refund => "refund",
            Self::Ceiling => "ceiling",
            Self::Noop => "noop",
        }
    }

    /// Whether the scenario creates payments (and so can be checked against the ledger).
    pub fn pays(self) -> bool {
        !matches!(self, Self::Ceiling | Self::Noop)
    }
}

/// A completed first request, kept to replay and to mismatch.
#[derive(Debug, Clone)]
pub struct Completed {
    key: String,
    reference: String,
    body: String,
    answer: Arc<[u8]>,
}

/// Names of this run's keys and orders (a run id keeps runs apart on one database).
#[derive(Debug, Clone)]
pub struct Names {
    run: String,
}

impl Names {
    /// Names under a fresh random run id.
    pub fn new() -> Self {
        let id = uuid::Uuid::new_v4().simple().to_string();
        Self {
            run: id[..12].to_owned(),
        }
    }

    /// The prefix every order reference of this run starts with.
    pub fn reference_prefix(&self) -> String {
        format!("order-{}-", self.run)
    }

    /// Key and order reference of a worker's n-th new payment.
    pub fn payment(&self, worker: usize, n: u64) -> (String, String) {
        let key = format!("{}-{worker}-{n}", self.run);
        (format!("{key}-pay"), format!("order-{key}"))
    }
}

impl Default for Names {
    fn default() -> Self {
        Self::new()
    }
}

/// Sends a new payment and checks it executed; keeps it for replays.
async fn fresh(
    target: &Target,
    key: String,
    reference: String,
    tally: &mut Tally,
    measured: bool,
) -> Option<Completed> {
    let body = payment_body(&reference, "10.00");
    match target.pay(&key, body.clone()).await {
        Ok(answer) => {
            if measured {
                tally.answer(answer.status, answer.replayed, answer.latency);
            }
            if answer.status == 201 && !answer.replayed {
                tally.executions += u64::from(measured);
                tally.executed_references.push(reference.clone());
                Some(Completed {
                    key,
                    reference,
                    body,
                    answer: answer.body,
                })
            } else {
                if answer.status < 500 {
                    tally.violation(format!(
                        "new key {key} answered {} (replayed: {}): {}",
                        answer.status,
                        answer.replayed,
                        String::from_utf8_lossy(&answer.body)
                    ));
                } else if !measured {
                    tally.server_errors += 1;
                }
                None
            }
        }
        Err(error) => {
            tally.transport_error(&error);
            None
        }
    }
}

/// Authorizes a new order and captures all of it under the capture's own
/// key; both must execute (201), the authorization `authorized`, the
/// capture `succeeded`.
async fn authorize_and_capture(target: &Target, key: String, reference: String, tally: &mut Tally) {
    let body = manual_payment_body(&reference, "10.00");
    let authorized = match target.pay(&key, body).await {
        Ok(answer) => answer,
        Err(error) => return tally.transport_error(&error),
    };
    tally.answer(authorized.status, authorized.replayed, authorized.latency);
    let shown: serde_json::Value = serde_json::from_slice(&authorized.body).unwrap_or_default();
    let id = match (
        authorized.status,
        shown["status"].as_str(),
        shown["id"].as_str(),
    ) {
        (201, Some("authorized"), Some(id)) if !authorized.replayed => id.to_owned(),
        (status, ..) if status >= 500 => return,
        (status, ..) => {
            return tally.violation(format!(
                "new authorization {key} answered {status}: {}",
                String::from_utf8_lossy(&authorized.body)
            ));
        }
    };
    tally.executions += 1;
    tally.executed_references.push(reference);
    let path = format!("/v1/payments/{id}/captures");
    match target
        .post_keyed(&path, &format!("{key}-capture"), "{}".to_owned())
        .await
    {
        Ok(answer) => {
            tally.answer(answer.status, answer.replayed, answer.latency);
            if answer.status < 500 && (answer.status != 201 || answer.replayed) {
                tally.violation(format!(
                    "the capture of {id} answered {}: {}",
                    answer.status,
                    String::from_utf8_lossy(&answer.body)
                ));
            }
        }
        Err(error) => tally.transport_error(&error),
    }
}

/// Pays a new order and refunds all of it under the refund's own key
/// (`{"amount": ...}` of the whole amount); both must execute (201), the
/// payment `succeeded`, the refund `succeeded`.
async fn pay_and_refund(target: &Target, key: String, reference: String, tally: &mut Tally) {
    const AMOUNT: &str = "10.00";
    let paid = match target.pay(&key, payment_body(&reference, AMOUNT)).await {
        Ok(answer) => answer,
        Err(error) => return tally.transport_error(&error),
    };
    tally.answer(paid.status, paid.replayed, paid.latency);
    let shown: serde_json::Value = serde_json::from_slice(&paid.body).unwrap_or_default();
    let id = match (paid.status, shown["status"].as_str(), shown["id"].as_str()) {
        (201, Some("succeeded"), Some(id)) if !paid.replayed => id.to_owned(),
        (status, ..) if status >= 500 => return,
        (status, ..) => {
            return tally.violation(format!(
                "new payment {key} answered {status}: {}",
                String::from_utf8_lossy(&paid.body)
            ));
        }
    };
    tally.executions += 1;
    tally.executed_references.push(reference);
    let path = format!("/v1/payments/{id}/refunds");
    let body = format!(r#"{{"amount":{{"value":"{AMOUNT}","currency":"RUB"}}}}"#);
    match target
        .post_keyed(&path, &format!("{key}-refund"), body)
        .await
    {
        Ok(answer) => {
            tally.answer(answer.status, answer.replayed, answer.latency);
            if answer.status >= 500 {
                return;
            }
            let shown: serde_json::Value = serde_json::from_slice(&answer.body).unwrap_or_default();
            if answer.status != 201 || answer.replayed || shown["status"] != "succeeded" {
                tally.violation(format!(
                    "the refund of {id} answered {} (replayed: {}): {}",
                    answer.status,
                    answer.replayed,
                    String::from_utf8_lossy(&answer.body)
                ));
            }
        }
        Err(error) => tally.transport_error(&error),
    }
}

/// Repeats a completed key: must be the first answer, byte for byte.
async fn replay(target: &Target, done: &Completed, tally: &mut Tally) {
    match target.pay(&done.key, done.body.clone()).await {
        Ok(answer) => {
            tally.answer(answer.status, answer.replayed, answer.latency);
            if answer.status >= 500 {
                return;
            }
            if answer.status != 201 || !answer.replayed || answer.body != done.answer {
                tally.violation(format!(
                    "replay of {} answered {} (replayed: {}, same bytes: {})",
                    done.key,
                    answer.status,
                    answer.replayed,
                    answer.body == done.answer
                ));
            }
        }
        Err(error) => tally.transport_error(&error),
    }
}

/// Reuses a completed key with another amount: must be 422, nothing executed.
async fn mismatch(target: &Target, done: &Completed, tally: &mut Tally) {
    let body = payment_body(&done.reference, "11.00");
    match target.pay(&done.key, body).await {
        Ok(answer) => {
            tally.answer(answer.status, answer.replayed, answer.latency);
            if answer.status >= 500 {
                return;
            }
            if answer.status != 422 || answer.replayed {
                tally.violation(format!(
                    "key {} reused with another body answered {} (replayed: {})",
                    done.key, answer.status, answer.replayed
                ));
            }
        }
        Err(error) => tally.transport_error(&error),
    }
}

/// One closed-loop worker's state before the clock starts.
#[derive(Debug, Default)]
pub struct Seeded {
    pool: Vec<Completed>,
    tally: Tally,
    next: u64,
}

/// Completed payments a replay or mixed worker starts from (not measured).
pub async fn seed(target: &Target, names: &Names, worker: usize, count: u64) -> Seeded {
    let mut seeded = Seeded::default();
    for n in 0..count {
        let (key, reference) = names.payment(worker, n);
        if let Some(done) = fresh(target, key, reference, &mut seeded.tally, false).await {
            seeded.pool.push(done);
        }
    }
    seeded.next = count;
    seeded
}

/// How many completed keys a mixed worker keeps to replay from.
const POOL: usize = 64;

/// A small deterministic mixer (xorshift) to pick which key to repeat.
fn mix(mut x: u64) -> u64 {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    x
}

/// One closed-loop worker: sends one request at a time until `deadline`.
pub async fn closed_loop(
    target: Target,
    scenario: Scenario,
    names: Names,
    worker: usize,
    mut seeded: Seeded,
    deadline: Instant,
    progress: Arc<AtomicU64>,
) -> Tally {
    let mut tally = std::mem::take(&mut seeded.tally);
    let mut pool = seeded.pool;
    let mut n = seeded.next;
    let mut turn: u64 = 0;
    while Instant::now() < deadline {
        turn += 1;
        let pick = || (mix(turn.wrapping_add(worker as u64 * 7919)) as usize) % pool.len().max(1);
        match scenario {
            Scenario::Fresh => {
                let (key, reference) = names.payment(worker, n);
                n += 1;
                fresh(&target, key, reference, &mut tally, true).await;
            }
            Scenario::Replay => {
                if pool.is_empty() {
                    break;
                }
                let done = pool[pick()].clone();
                replay(&target, &done, &mut tally).await;
            }
            Scenario::Mixed => {
                // Each connection starts at another point of the 20-request cycle.
                let slot = (turn + worker as u64 * 7) % 20;
                if slot < 16 || pool.is_empty() {
                    let (key, reference) = names.payment(worker, n);
                    n += 1;
                    if let Some(done) = fresh(&target, key, reference, &mut tally, true).await {
                        if pool.len() < POOL {
                            pool.push(done);
                        } else {
                            let i = pick();
                            pool[i] = done;
                        }
                    }
                } else if slot < 19 {
                    let done = pool[pick()].clone();
                    replay(&target, &done, &mut tally).await;
                } else {
                    let done = pool[pick()].clone();
                    mismatch(&target, &done, &mut tally).await;
                }
            }
            Scenario::AuthorizeCapture => {
                let (key, reference) = names.payment(worker, n);
                n += 1;
                authorize_and_capture(&target, key, reference, &mut tally).await;
            }
            Scenario::Refund => {
                let (key, reference) = names.payment(worker, n);
                n += 1;
                pay_and_refund(&target, key, reference, &mut tally).await;
            }
            Scenario::Ceiling | Scenario::Noop => {
                let path = if scenario == Scenario::Ceiling {
                    "/bench/ceiling"
                } else {
                    "/bench/noop"
                };
                match target.post_path(path, "{}".to_owned()).await {
                    Ok(answer) => {
                        tally.answer(answer.status, answer.replayed, answer.latency);
                        if answer.status != 200 && answer.status < 500 {
                            tally.violation(format!(
                                "{path} answered {} (is the server started with --bench-ceiling?)",
                                answer.status
                            ));
                        }
                    }
                    Err(error) => tally.transport_error(&error),
                }
            }
            Scenario::Storm => unreachable!("storm runs in waves, not in a closed loop"),
        }
        progress.fetch_add(1, Ordering::Relaxed);
        if tally.violations > 1000 {
            break;
        }
    }
    tally
}

/// Checks one storm wave: exactly one first execution; every other answer
/// is a byte-identical replay of it or a 409.
pub fn check_wave(
    key: &str,
    answers: &[Result<Answer, reqwest::Error>],
    tally: &mut Tally,
    measured: bool,
) {
    let mut first: Vec<&Answer> = Vec::new();
    let mut others: Vec<&Answer> = Vec::new();
    for answer in answers {
        match answer {
            Ok(answer) => {
                if measured {
                    tally.answer(answer.status, answer.replayed, answer.latency);
                }
                if answer.status == 201 && !answer.replayed {
                    first.push(answer);
                } else {
                    others.push(answer);
                }
            }
            Err(error) => tally.transport_error(error),
        }
    }
    let executions = first.len() as u64;
    if measured {
        tally.executions += executions;
        tally.storm_keys += 1;
        tally.storm_max_executions = tally.storm_max_executions.max(executions);
    }
    if executions != 1 {
        tally.violation(format!(
            "key {key} answered {executions} first executions (201 not replayed); want exactly 1"
        ));
    }
    let original = first.first().map(|a| a.body.clone());
    for answer in others {
        let fine = match answer.status {
            409 => !answer.replayed,
            201 => answer.replayed && original.as_ref().is_some_and(|o| *o == answer.body),
            _ => false,
        };
        if !fine && answer.status < 500 {
            tally.violation(format!(
                "key {key}: a duplicate answered {} (replayed: {}, same bytes as the first: {})",
                answer.status,
                answer.replayed,
                original.as_ref().is_some_and(|o| *o == answer.body)
            ));
        }
    }
}

/// Storms: waves of `duplicates` concurrent requests with one key each,
/// back to back until `deadline`. The first wave warms the connections and
/// is checked but not measured.
pub async fn storm(
    target: Target,
    names: Names,
    duplicates: usize,
    deadline: Instant,
    progress: Arc<AtomicU64>,
    warm_up: bool,
) -> Tally {
    let mut tally = Tally::default();
    let mut wave: u64 = 0;
    let mut measured = !warm_up;
    loop {
        if measured && Instant::now() >= deadline {
            break;
        }
        let (key, reference) = names.payment(0, wave);
        wave += 1;
        let body = payment_body(&reference, "10.00");
        let requests = (0..duplicates).map(|_| target.pay(&key, body.clone()));
        let answers = futures::future::join_all(requests).await;
        let executed = answers
            .iter()
            .any(|a| a.as_ref().is_ok_and(|a| a.status == 201 && !a.replayed));
        if executed {
            tally.executed_references.push(reference);
        }
        check_wave(&key, &answers, &mut tally, measured);
        if measured {
            progress.fetch_add(answers.len() as u64, Ordering::Relaxed);
        }
        measured = true;
        if tally.violations > 1000 {
            break;
        }
    }
    tally
}

/// Compares the acquirer ledger with the executions seen: one charge per
/// order of this run, none missing.
pub fn check_ledger(
    ledger: &serde_json::Value,
    prefix: &str,
    executed: &[String],
    tally: &mut Tally,
) -> LedgerReport {
    let mut charges: HashMap<&str, u64> = HashMap::new();
    if let Some(list) = ledger.get("charges").and_then(|c| c.as_array()) {
        for charge in list {
            if let Some(reference) = charge.get("reference").and_then(|r| r.as_str())
                && reference.starts_with(prefix)
            {
                *charges.entry(reference).or_default() += 1;
            }
        }
    }
    let executed: HashSet<&str> = executed.iter().map(String::as_str).collect();
    let mut report = LedgerReport {
        charges: charges.values().sum(),
        ..LedgerReport::default()
    };
    for (reference, count) in &charges {
        if *count > 1 {
            report.charged_twice += 1;
            tally.violation(format!(
                "order {reference} has {count} charges in the acquirer ledger"
            ));
        }
        if !executed.contains(reference) {
            report.unseen += 1;
        }
    }
    for reference in &executed {
        if !charges.contains_key(reference) {
            report.missing += 1;
            tally.violation(format!(
                "order {reference} was answered 201 but has no charge in the ledger"
            ));
        }
    }
    report
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn answer(status: u16, replayed: bool, body: &str) -> Result<Answer, reqwest::Error> {
        Ok(Answer {
            status,
            replayed,
            body: body.as_bytes().into(),
            latency: Duration::from_millis(1),
        })
    }

    #[test]
    fn a_wave_with_one_execution_and_identical_replays_passes() {
        let mut tally = Tally::default();
        let wave = [
            answer(201, false, "first"),
            answer(201, true, "first"),
            answer(409, false, "busy"),
        ];
        check_wave("k", &wave, &mut tally, true);
        assert_eq!(tally.violations, 0, "{:?}", tally.violation_samples);
        assert_eq!((tally.executions, tally.storm_keys), (1, 1));
        assert_eq!(tally.answers(), 3);
    }

    #[test]
    fn a_double_execution_or_another_replay_fails() {
        let mut tally = Tally::default();
        let wave = [answer(201, false, "first"), answer(201, false, "second")];
        check_wave("k", &wave, &mut tally, true);
        assert_eq!(tally.storm_max_executions, 2);
        assert!(tally.violations >= 1);

        let mut tally = Tally::default();
        let wave = [
            answer(201, false, "first"),
            answer(201, true, "other bytes"),
        ];
        check_wave("k", &wave, &mut tally, true);
        assert_eq!(tally.violations, 1, "{:?}", tally.violation_samples);

        let mut tally = Tally::default();
        check_wave("k", &[answer(409, false, "busy")], &mut tally, true);
        assert_eq!(tally.violations, 1, "no execution at all");
    }

    #[test]
    fn the_ledger_must_hold_one_charge_per_executed_order() {
        let ledger = serde_json::json!({"charges": [
            {"reference": "order-run-0-0"},
            {"reference": "order-run-0-1"},
            {"reference": "order-run-0-1"},
            {"reference": "order-other-0-0"},
        ]});
        let executed = vec![
            "order-run-0-0".to_owned(),
            "order-run-0-1".to_owned(),
            "order-run-0-2".to_owned(),
        ];
        let mut tally = Tally::default();
        let report = check_ledger(&ledger, "order-run-", &executed, &mut tally);
        assert_eq!(report.charges, 3);
        assert_eq!(
            (report.charged_twice, report.missing, report.unseen),
            (1, 1, 0)
        );
        assert_eq!(tally.violations, 2);
    }
}
