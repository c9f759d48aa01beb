//! The shared client conformance scenarios (`sdks/scenarios/*.json`, format in
//! `sdks/scenarios/README.md`) run with the Rust client against a real
//! `chargeonce serve`, one test per file. Every member of a file is known
//! here: an unknown one fails the scenario, so a new expectation cannot be
//! silently ignored.
#![allow(missing_docs)]

mod common;
mod lose_proxy;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use chargeonce_client::{
    Attempt, AttemptAnswer, CancelOutcome, CaptureMethod, CaptureOutcome, Client, CreateCapture,
    CreatePayment, CreateRefund, Error, IdempotencyKey, ListParams, Money, Outcome,
    PaymentListParams, RefundOutcome, RetryPolicy, VoidOutcome,
};
use serde_json::{Map, Value};

use common::{Process, SECRET, SHOP};
use lose_proxy::{LoseProxy, Recorded, Rule};

macro_rules! scenarios {
    ($($test:ident => $file:literal,)*) => {
        $(
            #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
            async fn $test() {
                run_file($file).await;
            }
        )*

        /// Every file a test above runs.
        const LISTED: &[&str] = &[$($file),*];
    };
}

scenarios! {
    s01_replay => "01_replay.json",
    s02_key_reused => "02_key_reused.json",
    s03_acquirer_timeout => "03_acquirer_timeout.json",
    s04_slow_prefer_wait => "04_slow_prefer_wait.json",
    s05_slow_without_prefer => "05_slow_without_prefer.json",
    s06_lost_answers => "06_lost_answers.json",
    s07_declined => "07_declined.json",
    s08_refund => "08_refund.json",
    s09_budget_exhausted => "09_budget_exhausted.json",
    s10_pay_order => "10_pay_order.json",
    s11_orders_are_separate => "11_orders_are_separate.json",
    s12_order_already_paid => "12_order_already_paid.json",
    s13_cancel => "13_cancel.json",
    s14_authorize_capture => "14_authorize_capture.json",
    s15_void => "15_void.json",
}

fn scenario_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../sdks/scenarios")
}

#[test]
fn every_scenario_file_has_a_test() {
    let on_disk: BTreeSet<String> = std::fs::read_dir(scenario_dir())
        .expect("read sdks/scenarios")
        .map(|e| {
            e.expect("a directory entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .filter(|name| name.ends_with(".json"))
        .collect();
    let listed: BTreeSet<String> = LISTED.iter().map(|s| (*s).to_owned()).collect();
    assert_eq!(
        on_disk, listed,
        "every sdks/scenarios/*.json needs a line in the scenarios! macro of crates/cli/tests/scenarios.rs"
    );
}

// -- the format ---------------------------------------------------------------

const TOP: &[&str] = &[
    "name",
    "description",
    "server",
    "faults",
    "client",
    "steps",
    "ledger",
];
const CLIENT: &[&str] = &[
    "budget_ms",
    "attempt_timeout_ms",
    "base_delay_ms",
    "max_delay_ms",
    "max_attempts",
    "prefer_wait_s",
];
const EXPECT: &[&str] = &[
    "outcome",
    "error_code",
    "status",
    "attempts",
    "min_attempts",
    "first_status",
    "replayed",
    "waited",
    "found_before_paying",
    "payment_id",
    "same_payment_as",
    "same_refund_as",
    "same_capture_as",
    "count",
    "fields",
];

/// The members a step of kind `do` may have (besides `do`, `id`, `expect`).
fn step_members(what: &str) -> Option<&'static [&'static str]> {
    Some(match what {
        "pay" | "pay_order" | "raw_pay" | "authorize" => &["order", "amount", "token", "operation"],
        "capture" => &["order", "operation", "payment_of", "amount", "final"],
        "void" => &["order", "operation", "payment_of"],
        "list_captures" => &["payment_of", "limit"],
        "refund" => &["order", "operation", "payment_of", "amount"],
        "cancel" => &["order", "operation", "payment_of"],
        "get_key" => &["order", "operation"],
        "list_payments" => &["order", "limit"],
        "list_refunds" => &["payment_of", "limit"],
        "concurrently" => &["calls", "stagger_ms"],
        _ => return None,
    })
}

fn only_known(what: &str, object: &Value, known: &[&str]) {
    let object = object
        .as_object()
        .unwrap_or_else(|| panic!("{what}: not an object"));
    for member in object.keys() {
        assert!(
            known.contains(&member.as_str()),
            "{what}: unknown member `{member}` (known: {known:?})"
        );
    }
}

fn validate_step(file: &str, where_: &str, step: &Value, nested: bool) {
    let what = step["do"]
        .as_str()
        .unwrap_or_else(|| panic!("{file} step {where_}: `do` missing"));
    let members = step_members(what)
        .unwrap_or_else(|| panic!("{file} step {where_}: unknown step kind `{what}`"));
    assert!(
        !(nested && what == "concurrently"),
        "{file} step {where_}: concurrently inside concurrently"
    );
    let mut known = vec!["do", "id", "expect"];
    known.extend_from_slice(members);
    only_known(&format!("{file} step {where_}"), step, &known);
    if let Some(expect) = step.get("expect") {
        only_known(&format!("{file} step {where_} expect"), expect, EXPECT);
    }
    if what == "concurrently" {
        let calls = step["calls"]
            .as_array()
            .unwrap_or_else(|| panic!("{file} step {where_}: `calls` is not a list"));
        for (n, call) in calls.iter().enumerate() {
            validate_step(file, &format!("{where_}.{n}"), call, true);
        }
    }
}

fn load(file: &str) -> Value {
    let path = scenario_dir().join(file);
    let text =
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    let spec: Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{file}: not JSON: {e}"));
    only_known(file, &spec, TOP);
    for required in ["name", "description", "server", "steps", "ledger"] {
        assert!(spec.get(required).is_some(), "{file}: `{required}` missing");
    }
    let name = file
        .split_once('_')
        .map(|(_, rest)| rest.trim_end_matches(".json"))
        .unwrap_or_default();
    assert_eq!(spec["name"], name, "{file}: `name` must be the file name");
    only_known(&format!("{file} server"), &spec["server"], &["args"]);
    only_known(
        &format!("{file} ledger"),
        &spec["ledger"],
        &["succeeded_charges"],
    );
    if let Some(client) = spec.get("client") {
        only_known(&format!("{file} client"), client, CLIENT);
    }
    if let Some(faults) = spec.get("faults") {
        only_known(&format!("{file} faults"), faults, &["lose_answers"]);
        for rule in faults["lose_answers"].as_array().into_iter().flatten() {
            only_known(
                &format!("{file} faults rule"),
                rule,
                &["method", "path", "order", "operation", "count"],
            );
        }
    }
    let steps = spec["steps"]
        .as_array()
        .unwrap_or_else(|| panic!("{file}: `steps` is not a list"));
    for (index, step) in steps.iter().enumerate() {
        validate_step(file, &index.to_string(), step, false);
    }
    spec
}

fn policy_of(spec: &Value) -> RetryPolicy {
    let mut policy = RetryPolicy::default();
    let Some(client) = spec.get("client") else {
        return policy;
    };
    let ms = |name: &str| {
        client
            .get(name)
            .map(|v| Duration::from_millis(v.as_u64().expect(name)))
    };
    if let Some(d) = ms("budget_ms") {
        policy.budget = d;
    }
    if let Some(d) = ms("attempt_timeout_ms") {
        policy.attempt_timeout = d;
    }
    if let Some(d) = ms("base_delay_ms") {
        policy.base_delay = d;
    }
    if let Some(d) = ms("max_delay_ms") {
        policy.max_delay = d;
    }
    if let Some(n) = client.get("max_attempts") {
        policy = policy.max_attempts(
            u32::try_from(n.as_u64().expect("max_attempts")).expect("max_attempts fits"),
        );
    }
    if let Some(wait) = client.get("prefer_wait_s") {
        policy.prefer_wait = wait.as_u64().map(Duration::from_secs);
    }
    policy
}

// -- the server -----------------------------------------------------------------

/// `chargeonce serve` exactly as the README says, on a fresh SQLite
/// database with the shop added first. One per scenario file: nextest runs
/// every test in a process of its own, so there is nothing to share.
async fn start_server(dir: &Path, args: &[String]) -> Process {
    let db = format!("sqlite://{}", dir.join("db").display());
    common::add_shop(&db).await;
    let mut command = Command::new(common::bin());
    command
        .arg("serve")
        .args(["--database-url", &db])
        .arg("--sim-ledger")
        .arg(dir.join("sim.db"))
        .args(["--listen", "127.0.0.1:0"])
        .args(["--operator-listen", "127.0.0.1:0"])
        .args(["--sim-slow", "2s"])
        .args(["--rate-limit", "0"])
        .arg("--no-demo-shop")
        .args(args)
        .env("RUST_LOG", "info");
    Process::spawn(command, "serve").await
}

// -- one run ----------------------------------------------------------------------

/// What a step did, as the expectations read it.
#[derive(Debug, Default)]
struct Done {
    /// `paid`, `authorized`, `declined`, `uncertain`, `refunded`,
    /// `refund_failed`, `captured`, `voided`, `refused`, ...
    outcome: Option<&'static str>,
    /// The id an `Uncertain` outcome carries.
    uncertain_id: Option<String>,
    attempts: Vec<Attempt>,
    attempt_count: Option<usize>,
    found_before_paying: Option<bool>,
    payment_id: Option<String>,
    refund_id: Option<String>,
    capture_id: Option<String>,
    /// The resource as JSON, for `fields`.
    resource: Option<Value>,
    count: Option<usize>,
    /// A raised error, described.
    error: Option<Raised>,
    /// `raw_pay`: the answer.
    raw_status: Option<u16>,
    raw_code: Option<String>,
    raw_replayed: Option<bool>,
}

#[derive(Debug)]
struct Raised {
    code: Option<String>,
    status: Option<u16>,
    key_reused: bool,
    text: String,
}

impl Raised {
    fn of(error: &Error) -> Self {
        Self {
            code: error.code().map(|code| code.as_str().to_owned()),
            status: error.problem().map(|p| p.status).or(matches!(
                error,
                Error::OrderAlreadyPaid { .. }
            )
            .then_some(409)),
            key_reused: matches!(error, Error::KeyReused { .. }),
            text: error.to_string(),
        }
    }
}

struct Run {
    file: &'static str,
    spec: Value,
    server: String,
    /// The server's operator listener (its `/sim/ledger`).
    operator: String,
    client: Client,
    run_id: String,
    orders: Mutex<BTreeSet<String>>,
    results: HashMap<String, Done>,
}

fn amount_of(step: &Value) -> Option<Money> {
    let amount = step.get("amount")?;
    Some(
        Money::parse(
            amount["value"].as_str().expect("amount.value is a string"),
            amount["currency"].as_str().expect("amount.currency"),
        )
        .expect("a valid amount"),
    )
}

fn text<'a>(step: &'a Value, member: &str) -> &'a str {
    step[member]
        .as_str()
        .unwrap_or_else(|| panic!("`{member}` missing or not a string in {step}"))
}

/// The resource in a keyed call's last answer: the body, or its problem's
/// `member` (a decline carries the payment).
fn resource_of(attempts: &[Attempt], member: &str) -> Option<Value> {
    let body: Value = serde_json::from_slice(attempts.last()?.body.as_deref()?).ok()?;
    match body.get(member) {
        Some(inner) if body.get("code").is_some() => Some(inner.clone()),
        _ => Some(body),
    }
}

/// `expected` is `actual`, or (objects) a subset of it, recursively.
fn subset(expected: &Value, actual: &Value) -> bool {
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => e
            .iter()
            .all(|(k, v)| a.get(k).is_some_and(|got| subset(v, got))),
        _ => expected == actual,
    }
}

fn describe(attempts: &[Attempt]) -> Vec<String> {
    attempts.iter().map(|a| a.answer.to_string()).collect()
}

impl Run {
    fn reference(&self, order: &str) -> String {
        self.orders
            .lock()
            .expect("the orders lock")
            .insert(order.to_owned());
        format!("{order}-{}", self.run_id)
    }

    fn key(&self, order: &str, operation: &str) -> IdempotencyKey {
        IdempotencyKey::for_operation(&self.reference(order), operation).expect("a valid key")
    }

    fn payment_of(&self, step: &Value) -> String {
        let of = text(step, "payment_of");
        self.results
            .get(of)
            .and_then(|d| d.payment_id.clone())
            .unwrap_or_else(|| panic!("{}: step `{of}` has no payment", self.file))
    }

    async fn step(&self, step: &Value) -> Done {
        let mut done = Done::default();
        let operation = step
            .get("operation")
            .and_then(Value::as_str)
            .unwrap_or("pay");
        match text(step, "do") {
            what @ ("pay" | "pay_order" | "authorize") => {
                let order = text(step, "order");
                let mut request = CreatePayment::new(
                    amount_of(step).expect("an amount"),
                    self.reference(order),
                    text(step, "token"),
                );
                if what == "authorize" {
                    request = request.manual_capture();
                }
                let key = self.key(order, operation);
                let result = if what != "pay_order" {
                    self.client.pay(&key, &request).await
                } else {
                    self.client.pay_order(&key, &request).await
                };
                match result {
                    Ok(result) => {
                        done.outcome = Some(match &result.outcome {
                            Outcome::Paid(p) if p.capture_method == CaptureMethod::Manual => {
                                "authorized"
                            }
                            Outcome::Paid(_) => "paid",
                            Outcome::Declined(_) => "declined",
                            Outcome::Canceled(_) => "canceled",
                            Outcome::Uncertain { .. } => "uncertain",
                        });
                        if let Outcome::Uncertain { payment_id } = &result.outcome {
                            done.uncertain_id = payment_id.clone();
                        }
                        if let Some(payment) = result.outcome.payment() {
                            done.payment_id = Some(payment.id.clone());
                            done.resource = if result.found_before_paying {
                                // Nothing was sent: the look-up's payment.
                                self.find_payment(&payment.id, &request.reference).await
                            } else {
                                resource_of(&result.attempts, "payment")
                            };
                        }
                        done.attempt_count = Some(result.attempt_count());
                        done.found_before_paying = Some(result.found_before_paying);
                        done.attempts = result.attempts;
                    }
                    Err(error) => {
                        done.attempt_count = Some(error.attempts() as usize);
                        done.error = Some(Raised::of(&error));
                    }
                }
            }
            "refund" => {
                let payment_id = self.payment_of(step);
                let key = self.key(text(step, "order"), text(step, "operation"));
                let request = match amount_of(step) {
                    Some(amount) => CreateRefund::partial(amount),
                    None => CreateRefund::full(),
                };
                match self.client.refund(&payment_id, &key, &request).await {
                    Ok(result) => {
                        done.outcome = Some(match &result.outcome {
                            RefundOutcome::Refunded(_) => "refunded",
                            RefundOutcome::Failed(_) => "refund_failed",
                            RefundOutcome::Uncertain { .. } => "uncertain",
                        });
                        match &result.outcome {
                            RefundOutcome::Refunded(r) | RefundOutcome::Failed(r) => {
                                done.refund_id = Some(r.id.clone());
                                done.payment_id = Some(r.payment_id.clone());
                                done.resource = resource_of(&result.attempts, "refund");
                            }
                            RefundOutcome::Uncertain { refund_id } => {
                                done.uncertain_id = refund_id.clone();
                            }
                        }
                        done.attempt_count = Some(result.attempts.len());
                        done.attempts = result.attempts;
                    }
                    Err(error) => {
                        done.attempt_count = Some(error.attempts() as usize);
                        done.error = Some(Raised::of(&error));
                    }
                }
            }
            "cancel" => {
                let payment_id = self.payment_of(step);
                let key = self.key(text(step, "order"), text(step, "operation"));
                match self.client.cancel(&payment_id, &key).await {
                    Ok(result) => {
                        done.outcome = Some(match &result.outcome {
                            CancelOutcome::Canceled(_) => "canceled",
                            CancelOutcome::Refunded(_) => "refunded",
                            CancelOutcome::Charged(_) => "charged",
                            CancelOutcome::Declined(_) => "declined",
                            CancelOutcome::Uncertain { .. } => "uncertain",
                        });
                        match &result.outcome {
                            CancelOutcome::Uncertain { payment_id } => {
                                done.uncertain_id = payment_id.clone();
                            }
                            definite => {
                                done.payment_id = definite.payment().map(|p| p.id.clone());
                                done.resource = resource_of(&result.attempts, "payment");
                            }
                        }
                        done.attempt_count = Some(result.attempts.len());
                        done.attempts = result.attempts;
                    }
                    Err(error) => {
                        done.attempt_count = Some(error.attempts() as usize);
                        done.error = Some(Raised::of(&error));
                    }
                }
            }
            "capture" => self.capture(step, &mut done).await,
            "void" => self.void(step, &mut done).await,
            "list_captures" => {
                let payment_id = self.payment_of(step);
                match self.all_captures(&payment_id, limit_of(step)).await {
                    Ok(items) => done.listed(items, "capture"),
                    Err(error) => done.error = Some(Raised::of(&error)),
                }
            }
            "raw_pay" => {
                let order = text(step, "order");
                let amount = &step["amount"];
                let body = serde_json::json!({
                    "amount": {"value": amount["value"], "currency": amount["currency"]},
                    "reference": self.reference(order),
                    "payment_method": {"token": text(step, "token")},
                });
                let answer = common::client()
                    .post(format!("{}/v1/payments", self.server))
                    .basic_auth(SHOP, Some(SECRET))
                    .header("idempotency-key", self.key(order, operation).as_str())
                    .header("content-type", "application/json")
                    .body(body.to_string())
                    .send()
                    .await
                    .expect("raw_pay: an answer");
                let status = answer.status().as_u16();
                done.raw_status = Some(status);
                done.raw_replayed = Some(
                    answer
                        .headers()
                        .get("idempotent-replayed")
                        .is_some_and(|v| v == "true"),
                );
                let body: Value = answer.json().await.expect("raw_pay: a JSON body");
                let payment = if status >= 400 {
                    done.raw_code = body["code"].as_str().map(str::to_owned);
                    body.get("payment").cloned()
                } else {
                    Some(body)
                };
                if let Some(payment) = payment.filter(Value::is_object) {
                    done.payment_id = payment["id"].as_str().map(str::to_owned);
                    done.resource = Some(payment);
                }
            }
            "get_key" => {
                let key = self.key(text(step, "order"), operation);
                match self.client.idempotency_key(key.as_str()).await {
                    Ok(info) => {
                        done.payment_id = info.payment_id.clone();
                        done.refund_id = info.refund_id.clone();
                        done.resource = Some(serde_json::to_value(&info).expect("key as JSON"));
                    }
                    Err(error) => done.error = Some(Raised::of(&error)),
                }
            }
            "list_payments" => {
                let reference = self.reference(text(step, "order"));
                match self.all_payments(&reference, limit_of(step)).await {
                    Ok(items) => done.listed(items, "payment"),
                    Err(error) => done.error = Some(Raised::of(&error)),
                }
            }
            "list_refunds" => {
                let payment_id = self.payment_of(step);
                match self.all_refunds(&payment_id, limit_of(step)).await {
                    Ok(items) => done.listed(items, "refund"),
                    Err(error) => done.error = Some(Raised::of(&error)),
                }
            }
            other => panic!("{}: unknown step kind `{other}`", self.file),
        }
        done
    }

    async fn all_payments(&self, reference: &str, limit: Option<u32>) -> Result<Vec<Value>, Error> {
        all_pages(limit, |page| async move {
            let params = PaymentListParams {
                reference: Some(reference.to_owned()),
                page,
                ..PaymentListParams::default()
            };
            self.client.list_payments_json(&params).await
        })
        .await
    }

    /// A `capture` step: captured, refused by the acquirer, uncertain, or
    /// refused before anything executed (`refused`, with its problem as
    /// the resource for `fields`).
    async fn capture(&self, step: &Value, done: &mut Done) {
        let payment_id = self.payment_of(step);
        let key = self.key(text(step, "order"), text(step, "operation"));
        let mut request = match amount_of(step) {
            Some(amount) => CreateCapture::part(amount),
            None => CreateCapture::rest(),
        };
        if step.get("final").and_then(Value::as_bool) == Some(true) {
            request = request.last();
        }
        match self.client.capture(&payment_id, &key, &request).await {
            Ok(result) => {
                done.outcome = Some(match &result.outcome {
                    CaptureOutcome::Captured(_) => "captured",
                    CaptureOutcome::Failed(_) => "capture_failed",
                    CaptureOutcome::Uncertain { .. } => "uncertain",
                });
                match &result.outcome {
                    CaptureOutcome::Captured(c) | CaptureOutcome::Failed(c) => {
                        done.capture_id = Some(c.id.clone());
                        done.payment_id = Some(c.payment_id.clone());
                        done.resource = resource_of(&result.attempts, "capture");
                    }
                    CaptureOutcome::Uncertain { capture_id } => {
                        done.uncertain_id = capture_id.clone();
                    }
                }
                done.attempt_count = Some(result.attempts.len());
                done.attempts = result.attempts;
            }
            Err(error) => done.refused(&error),
        }
    }

    /// A `void` step, as [`Run::capture`].
    async fn void(&self, step: &Value, done: &mut Done) {
        let payment_id = self.payment_of(step);
        let key = self.key(text(step, "order"), text(step, "operation"));
        match self.client.void(&payment_id, &key).await {
            Ok(result) => {
                done.outcome = Some(match &result.outcome {
                    // Part captured: the rest released, the payment succeeded.
                    VoidOutcome::Voided(p) if p.captured_minor > 0 => "released",
                    VoidOutcome::Voided(_) => "voided",
                    VoidOutcome::Failed { .. } => "void_failed",
                    VoidOutcome::Uncertain { .. } => "uncertain",
                });
                match &result.outcome {
                    VoidOutcome::Voided(p) | VoidOutcome::Failed { payment: p, .. } => {
                        done.payment_id = Some(p.id.clone());
                        done.resource = resource_of(&result.attempts, "payment");
                    }
                    VoidOutcome::Uncertain { payment_id } => {
                        done.uncertain_id = payment_id.clone();
                    }
                }
                done.attempt_count = Some(result.attempts.len());
                done.attempts = result.attempts;
            }
            Err(error) => done.refused(&error),
        }
    }

    async fn all_captures(
        &self,
        payment_id: &str,
        limit: Option<u32>,
    ) -> Result<Vec<Value>, Error> {
        all_pages(limit, |params| async move {
            self.client.payment_captures_json(payment_id, &params).await
        })
        .await
    }

    async fn all_refunds(&self, payment_id: &str, limit: Option<u32>) -> Result<Vec<Value>, Error> {
        all_pages(limit, |params| async move {
            self.client.payment_refunds_json(payment_id, &params).await
        })
        .await
    }

    /// The order's payment `id` as JSON (for `fields` of a payment found
    /// before paying).
    async fn find_payment(&self, id: &str, reference: &str) -> Option<Value> {
        let items = self.all_payments(reference, None).await.ok()?;
        items.into_iter().find(|p| p["id"] == id)
    }

    fn fail(&self, where_: &str, member: &str, message: String) -> ! {
        panic!("{} step {where_}: {member}: {message}", self.file)
    }

    fn check(&self, where_: &str, step: &Value, done: &Done) {
        let empty = Map::new();
        let expect = step
            .get("expect")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let what = text(step, "do");
        let got_attempts = describe(&done.attempts);
        if what == "raw_pay" {
            if let Some(want) = expect.get("status")
                && done.raw_status.map(u64::from) != want.as_u64()
            {
                self.fail(
                    where_,
                    "status",
                    format!("expected {want}, got {:?}", done.raw_status),
                );
            }
            if let Some(want) = expect.get("error_code")
                && done.raw_code.as_deref() != want.as_str()
            {
                self.fail(
                    where_,
                    "error_code",
                    format!("expected {want}, got {:?}", done.raw_code),
                );
            }
        } else if let Some(want) = expect.get("error_code") {
            let Some(error) = &done.error else {
                self.fail(
                    where_,
                    "error_code",
                    format!("expected {want}, got the outcome {:?}", done.outcome),
                );
            };
            if error.code.as_deref() != want.as_str() {
                self.fail(
                    where_,
                    "error_code",
                    format!("expected {want}, got {}", error.text),
                );
            }
            if want == "idempotency_key_reused" && !error.key_reused {
                self.fail(
                    where_,
                    "error_code",
                    format!("not raised as KeyReused: {}", error.text),
                );
            }
            if let Some(status) = expect.get("status")
                && error.status.map(u64::from) != status.as_u64()
            {
                self.fail(
                    where_,
                    "status",
                    format!("expected {status}, got {:?}", error.status),
                );
            }
        } else if let Some(error) = &done.error {
            self.fail(where_, "error", format!("unexpected error: {}", error.text));
        } else if expect.contains_key("status") {
            self.fail(
                where_,
                "status",
                "only with error_code or on raw_pay".into(),
            );
        }
        if let Some(want) = expect.get("outcome")
            && done.outcome != want.as_str()
        {
            self.fail(
                where_,
                "outcome",
                format!("expected {want}, got {:?} {got_attempts:?}", done.outcome),
            );
        }
        if let Some(want) = expect.get("attempts")
            && done.attempt_count.map(|n| n as u64) != want.as_u64()
        {
            self.fail(
                where_,
                "attempts",
                format!(
                    "expected {want}, got {:?}: {got_attempts:?}",
                    done.attempt_count
                ),
            );
        }
        if let Some(want) = expect.get("min_attempts")
            && (done.attempt_count.unwrap_or(0) as u64) < want.as_u64().unwrap_or(u64::MAX)
        {
            self.fail(
                where_,
                "min_attempts",
                format!(
                    "expected at least {want}, got {:?}: {got_attempts:?}",
                    done.attempt_count
                ),
            );
        }
        if let Some(want) = expect.get("first_status") {
            let first = match done.attempts.first().map(|a| &a.answer) {
                Some(AttemptAnswer::Http { status, .. }) => Some(u64::from(*status)),
                _ => None,
            };
            if first != want.as_u64() {
                self.fail(
                    where_,
                    "first_status",
                    format!("expected {want}: {got_attempts:?}"),
                );
            }
        }
        if let Some(want) = expect.get("replayed") {
            let got = if what == "raw_pay" {
                done.raw_replayed.unwrap_or(false)
            } else {
                matches!(
                    done.attempts.last().map(|a| &a.answer),
                    Some(AttemptAnswer::Http { replayed: true, .. })
                )
            };
            if Some(got) != want.as_bool() {
                self.fail(
                    where_,
                    "replayed",
                    format!("expected {want}: {got_attempts:?}"),
                );
            }
        }
        if let Some(want) = expect.get("waited") {
            let got = done
                .attempts
                .iter()
                .any(|a| matches!(a.answer, AttemptAnswer::Http { waited: true, .. }));
            if Some(got) != want.as_bool() {
                self.fail(
                    where_,
                    "waited",
                    format!("expected {want}: {got_attempts:?}"),
                );
            }
        }
        if let Some(want) = expect.get("found_before_paying")
            && done.found_before_paying != want.as_bool()
        {
            self.fail(
                where_,
                "found_before_paying",
                format!("expected {want}, got {:?}", done.found_before_paying),
            );
        }
        if let Some(want) = expect.get("payment_id") {
            if done.outcome != Some("uncertain") {
                self.fail(
                    where_,
                    "payment_id",
                    format!("applies to uncertain outcomes, got {:?}", done.outcome),
                );
            }
            let ok = match want {
                Value::Null => done.uncertain_id.is_none(),
                Value::String(s) if s == "present" => done.uncertain_id.is_some(),
                _ => self.fail(
                    where_,
                    "payment_id",
                    format!("`{want}` is neither null nor \"present\""),
                ),
            };
            if !ok {
                self.fail(
                    where_,
                    "payment_id",
                    format!("expected {want}, got {:?}", done.uncertain_id),
                );
            }
        }
        for (member, id_of) in [
            (
                "same_payment_as",
                (|d: &Done| d.payment_id.clone()) as fn(&Done) -> Option<String>,
            ),
            ("same_refund_as", |d: &Done| d.refund_id.clone()),
            ("same_capture_as", |d: &Done| d.capture_id.clone()),
        ] {
            if let Some(other) = expect.get(member) {
                let other = other.as_str().unwrap_or_default();
                let theirs = self.results.get(other).and_then(id_of);
                let mine = id_of(done);
                if theirs.is_none() || mine != theirs {
                    self.fail(
                        where_,
                        member,
                        format!("{mine:?} is not {theirs:?} of step `{other}`"),
                    );
                }
            }
        }
        if let Some(want) = expect.get("count")
            && done.count.map(|n| n as u64) != want.as_u64()
        {
            self.fail(
                where_,
                "count",
                format!("expected {want}, got {:?}", done.count),
            );
        }
        if let Some(want) = expect.get("fields") {
            let ok = done.resource.as_ref().is_some_and(|r| subset(want, r));
            if !ok {
                self.fail(
                    where_,
                    "fields",
                    format!("expected {want} within {:?}", done.resource),
                );
            }
        }
    }

    async fn run_steps(&mut self) {
        let steps = self.spec["steps"].as_array().cloned().unwrap_or_default();
        for (index, step) in steps.iter().enumerate() {
            if step["do"] == "concurrently" {
                let stagger = Duration::from_millis(step["stagger_ms"].as_u64().unwrap_or(0));
                let calls = step["calls"].as_array().cloned().unwrap_or_default();
                let this = &*self;
                let done = futures::future::join_all(calls.iter().enumerate().map(
                    |(n, call)| async move {
                        // The scenario's own stagger: start call n at n * stagger.
                        tokio::time::sleep(stagger * u32::try_from(n).unwrap_or(0)).await;
                        this.step(call).await
                    },
                ))
                .await;
                let key = |n: usize, call: &Value| {
                    call.get("id")
                        .and_then(Value::as_str)
                        .map_or_else(|| format!("#{index}.{n}"), str::to_owned)
                };
                for (n, (call, done)) in calls.iter().zip(done).enumerate() {
                    self.results.insert(key(n, call), done);
                }
                // Expectations only once every call has finished.
                for (n, call) in calls.iter().enumerate() {
                    let done = &self.results[&key(n, call)];
                    self.check(&format!("{index}.{n}"), call, done);
                }
            } else {
                let done = self.step(step).await;
                self.check(&index.to_string(), step, &done);
                if let Some(id) = step.get("id").and_then(Value::as_str) {
                    self.results.insert(id.to_owned(), done);
                }
            }
        }
    }

    async fn check_ledger(&self) {
        let ledger: Value = common::client()
            .get(format!("{}/sim/ledger", self.operator))
            .send()
            .await
            .expect("GET /sim/ledger")
            .json()
            .await
            .expect("the ledger as JSON");
        let mut counts: BTreeMap<String, u64> = BTreeMap::new();
        for charge in ledger["charges"].as_array().expect("charges") {
            if charge["status"] == "succeeded" {
                let reference = charge["reference"].as_str().unwrap_or_default().to_owned();
                *counts.entry(reference).or_default() += 1;
            }
        }
        let wanted = self.spec["ledger"]["succeeded_charges"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        for (order, want) in &wanted {
            let got = counts.get(&self.reference(order)).copied().unwrap_or(0);
            if Some(got) != want.as_u64() {
                self.fail(
                    "ledger",
                    order,
                    format!("expected {want} succeeded charges, got {got}"),
                );
            }
        }
        let orders = self.orders.lock().expect("the orders lock").clone();
        for order in orders {
            let got = counts.get(&self.reference(&order)).copied().unwrap_or(0);
            if got > 1 {
                self.fail("ledger", &order, format!("charged {got} times"));
            }
        }
    }
}

/// Every item of a list, page after page (`limit` a page).
async fn all_pages<F, Fut>(limit: Option<u32>, fetch: F) -> Result<Vec<Value>, Error>
where
    F: Fn(ListParams) -> Fut,
    Fut: std::future::Future<Output = Result<chargeonce_client::Page<Value>, Error>>,
{
    let mut params = ListParams {
        limit,
        ..ListParams::default()
    };
    let mut items = Vec::new();
    loop {
        let page = fetch(params.clone()).await?;
        let last = page
            .data
            .last()
            .and_then(|p| p["id"].as_str())
            .map(str::to_owned);
        items.extend(page.data);
        match last {
            Some(id) if page.has_more => params.starting_after = Some(id),
            _ => return Ok(items),
        }
    }
}

fn limit_of(step: &Value) -> Option<u32> {
    step.get("limit")
        .map(|l| u32::try_from(l.as_u64().expect("limit is a number")).expect("limit fits"))
}

impl Done {
    fn listed(&mut self, items: Vec<Value>, kind: &str) {
        self.count = Some(items.len());
        if let [only] = items.as_slice() {
            let id = only["id"].as_str().map(str::to_owned);
            match kind {
                "payment" => self.payment_id = id,
                "capture" => self.capture_id = id,
                _ => self.refund_id = id,
            }
            self.resource = Some(only.clone());
        }
    }

    /// An error of an authorization's move: a refusal before anything
    /// executed is the outcome `refused`, its problem the resource (for
    /// `fields`); every error is also raised (for `error_code`).
    fn refused(&mut self, error: &Error) {
        self.attempt_count = Some(error.attempts() as usize);
        if let Error::Rejected { problem, .. } = error {
            self.outcome = Some("refused");
            self.resource = Some(Value::Object(problem.raw.clone()));
        }
        self.error = Some(Raised::of(error));
    }
}

async fn run_file(file: &'static str) {
    let spec = load(file);
    let dir = tempfile::tempdir().expect("a scratch folder");
    let args: Vec<String> = spec["server"]["args"]
        .as_array()
        .expect("server.args is a list")
        .iter()
        .map(|a| a.as_str().expect("server.args are strings").to_owned())
        .collect();
    let server = start_server(dir.path(), &args).await;
    let name = spec["name"].as_str().unwrap_or_default();
    let run_id = format!(
        "{}-rs-{}",
        name.replace('_', "-"),
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    );
    let policy = policy_of(&spec);

    let mut run = Run {
        file,
        spec: spec.clone(),
        server: server.base.clone(),
        operator: server.operator.clone(),
        // Replaced below, once the proxy (whose rules need the run's keys) is up.
        client: Client::new(&server.base, SHOP, SECRET).expect("a client"),
        run_id,
        orders: Mutex::new(BTreeSet::new()),
        results: HashMap::new(),
    };
    let mut proxy = None;
    if let Some(faults) = spec.get("faults") {
        let rules = faults["lose_answers"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .map(|rule| Rule {
                method: text(rule, "method").to_owned(),
                path: text(rule, "path").to_owned(),
                key: rule.get("order").and_then(Value::as_str).map(|order| {
                    let operation = rule
                        .get("operation")
                        .and_then(Value::as_str)
                        .unwrap_or("pay");
                    run.key(order, operation).as_str().to_owned()
                }),
                left: rule
                    .get("count")
                    .map(|c| c.as_u64().expect("count is a number")),
            })
            .collect();
        let upstream = server
            .base
            .trim_start_matches("http://")
            .parse()
            .expect("the server's address");
        proxy = Some(LoseProxy::start(upstream, rules).await);
    }
    let base = proxy
        .as_ref()
        .map_or(server.base.clone(), |p| p.base.clone());
    run.client = Client::builder(&base, SHOP, SECRET)
        .retry_policy(policy)
        // Behind the proxy every attempt is a connection of its own.
        .reuse_connections(proxy.is_none())
        .build()
        .expect("a client");

    run.run_steps().await;
    run.check_ledger().await;
    if let Some(proxy) = &proxy {
        check_retries(file, &proxy.recorded());
    }
    drop(proxy);
    drop(server);
}

// -- what the proxy saw -------------------------------------------------------------

/// Every request the proxy recorded under one `Idempotency-Key` carried the
/// same method, path and body bytes, and at least one key was sent more
/// than once: a proxy scenario that caused no retry proves nothing.
fn check_retries(file: &str, recorded: &[Recorded]) {
    let mut by_key: BTreeMap<&str, Vec<&Recorded>> = BTreeMap::new();
    for request in recorded {
        if let Some(key) = request.key.as_deref() {
            by_key.entry(key).or_default().push(request);
        }
    }
    for (key, requests) in &by_key {
        let first = requests[0];
        for (n, other) in requests.iter().enumerate().skip(1) {
            assert!(
                other.method == first.method && other.path == first.path,
                "{file}: key {key}: request {n} is {} {}, the first was {} {}",
                other.method,
                other.path,
                first.method,
                first.path
            );
            assert!(
                other.body == first.body,
                "{file}: key {key}: request {n} carried other body bytes:\n{}\nthe first:\n{}",
                String::from_utf8_lossy(&other.body),
                String::from_utf8_lossy(&first.body)
            );
        }
    }
    assert!(
        by_key.values().any(|requests| requests.len() > 1),
        "{file}: no key was sent more than once through the fault proxy (no retry happened): {:?}",
        by_key
            .iter()
            .map(|(k, r)| (*k, r.len()))
            .collect::<Vec<_>>()
    );
}

// -- explicit proofs with the fault proxy --------------------------------------------

/// A server and a fault proxy with `rules` in front of it, and a client
/// that talks through the proxy.
async fn behind_proxy(dir: &Path, rules: Vec<Rule>) -> (Process, LoseProxy, Client) {
    let server = start_server(dir, &[]).await;
    let upstream = server
        .base
        .trim_start_matches("http://")
        .parse()
        .expect("the server's address");
    let proxy = LoseProxy::start(upstream, rules).await;
    let client = Client::builder(&proxy.base, SHOP, SECRET)
        .reuse_connections(false)
        .build()
        .expect("a client");
    (server, proxy, client)
}

fn unique_reference(what: &str) -> String {
    format!(
        "{what}-rs-{}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_answers_are_retried_with_the_same_key_and_body_bytes() {
    let dir = tempfile::tempdir().expect("a scratch folder");
    let reference = unique_reference("lost");
    let key = IdempotencyKey::for_operation(&reference, "pay").expect("a valid key");
    let rules = vec![Rule {
        method: "POST".into(),
        path: "/v1/payments".into(),
        key: Some(key.as_str().to_owned()),
        left: Some(2),
    }];
    let (server, proxy, client) = behind_proxy(dir.path(), rules).await;
    let request = CreatePayment::new(
        Money::parse("15.00", "RUB").expect("an amount"),
        &reference,
        "tok_ok",
    );
    let result = client.pay(&key, &request).await.expect("the payment");
    assert!(
        matches!(result.outcome, Outcome::Paid(_)),
        "expected Paid, got {:?}",
        result.outcome
    );
    let sent = proxy.recorded_with_key(key.as_str());
    assert_eq!(sent.len(), 3, "two lost answers, then the replay: {sent:?}");
    for request in &sent {
        assert_eq!(request.key.as_deref(), Some(key.as_str()));
        assert_eq!(request.method, "POST");
        assert_eq!(request.path, "/v1/payments");
        assert_eq!(
            request.body, sent[0].body,
            "every retry carries the same body bytes"
        );
    }
    assert!(!sent[0].body.is_empty(), "the payment has a body");
    drop(proxy);
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reused_key_is_never_retried() {
    let dir = tempfile::tempdir().expect("a scratch folder");
    let (server, proxy, client) = behind_proxy(dir.path(), Vec::new()).await;
    let reference = unique_reference("reused");
    let key = IdempotencyKey::for_operation(&reference, "pay").expect("a valid key");
    let first = CreatePayment::new(
        Money::parse("15.00", "RUB").expect("an amount"),
        &reference,
        "tok_ok",
    );
    let result = client.pay(&key, &first).await.expect("the first payment");
    assert!(
        matches!(result.outcome, Outcome::Paid(_)),
        "expected Paid, got {:?}",
        result.outcome
    );
    let before = proxy.recorded_with_key(key.as_str()).len();
    assert_eq!(before, 1, "the first payment went through at once");

    let other = CreatePayment::new(
        Money::parse("16.00", "RUB").expect("an amount"),
        &reference,
        "tok_ok",
    );
    let error = client
        .pay(&key, &other)
        .await
        .expect_err("the same key with another amount");
    assert!(
        matches!(error, Error::KeyReused { .. }),
        "expected KeyReused, got {error}"
    );
    let sent = proxy.recorded_with_key(key.as_str());
    let second: Vec<&Recorded> = sent[before..].iter().collect();
    assert_eq!(
        second.len(),
        1,
        "a 422 mismatch is sent once, never retried: {second:?}"
    );
    assert_ne!(
        second[0].body, sent[0].body,
        "the second call carried the other amount"
    );
    assert_eq!(error.attempts(), 1);
    drop(proxy);
    drop(server);
}

fn recorded(key: &str, body: &str) -> Recorded {
    Recorded {
        method: "POST".into(),
        path: "/v1/payments".into(),
        key: Some(key.into()),
        body: body.as_bytes().to_vec(),
    }
}

#[test]
fn check_retries_accepts_identical_retries() {
    check_retries("t", &[recorded("k", "{}"), recorded("k", "{}")]);
}

#[test]
#[should_panic(expected = "other body bytes")]
fn check_retries_rejects_other_body_bytes() {
    check_retries(
        "t",
        &[recorded("k", "{\"a\":1}"), recorded("k", "{\"a\": 1}")],
    );
}

#[test]
#[should_panic(expected = "no key was sent more than once")]
fn check_retries_rejects_a_run_without_retries() {
    check_retries("t", &[recorded("k", "{}"), recorded("j", "{}")]);
}
