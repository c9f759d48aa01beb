//! One call of each kind an intent makes (pay, refund, cancel), through
//! the client SDK, recorded as the history's [`CallRecord`]s; and the
//! repeats of an uncertain call with the same key until its outcome is
//! known.

use std::time::{Duration, Instant};

use chargeonce_client::{
    CaptureOutcome, CreateCapture, CreatePayment, CreateRefund, Error as ClientError,
    IdempotencyKey, Outcome, RefundOutcome, VoidOutcome,
};

use crate::clients::Clients;
use crate::error::ChaosError;
use crate::history::{AttemptRecord, CallKind, CallRecord, CallResult, Shown};
use crate::intent::{Intent, money};

/// How many times a client comes back with the same key after an uncertain call.
const ROUNDS: usize = 3;

fn shown_payment(p: &chargeonce_client::Payment) -> Shown {
    Shown {
        id: p.id.clone(),
        shop_id: p.shop_id.clone(),
        status: p.status.as_str().to_owned(),
        amount_minor: p.amount.minor_units(),
        parent: p.reference.clone(),
        metadata: p.metadata.clone(),
    }
}

fn shown_refund(r: &chargeonce_client::Refund) -> Shown {
    Shown {
        id: r.id.clone(),
        shop_id: r.shop_id.clone(),
        status: r.status.clone(),
        amount_minor: r.amount.minor_units(),
        parent: r.payment_id.clone(),
        metadata: Default::default(),
    }
}

fn shown_capture(c: &chargeonce_client::Capture) -> Shown {
    Shown {
        id: c.id.clone(),
        shop_id: c.shop_id.clone(),
        status: c.status.as_str().to_owned(),
        amount_minor: c.amount.minor_units(),
        parent: c.payment_id.clone(),
        metadata: Default::default(),
    }
}

/// A payment as a void's answer showed it: its status is its
/// authorization's (`voided`, `succeeded`, `authorized`, ...).
fn shown_authorization(p: &chargeonce_client::Payment) -> Shown {
    let status = p
        .authorization_status
        .map_or_else(|| p.status.as_str(), |s| s.as_str());
    Shown {
        status: status.to_owned(),
        ..shown_payment(p)
    }
}

fn refused(error: &ClientError) -> CallResult {
    match error.problem() {
        Some(problem) => CallResult::Refused {
            status: problem.status,
            code: problem.code.as_str().to_owned(),
        },
        None => CallResult::Error {
            message: error.to_string(),
        },
    }
}

/// One payment call through `instance`.
pub(crate) async fn pay_call(
    clients: &Clients,
    intent: &Intent,
    kind: CallKind,
    instance: usize,
    request: &CreatePayment,
) -> CallRecord {
    let started = Instant::now();
    let client = clients.get(intent.shop, instance);
    let (attempts, result) = match client.pay(&intent.key, request).await {
        Ok(paid) => (
            paid.attempts.iter().map(AttemptRecord::of).collect(),
            match &paid.outcome {
                Outcome::Paid(p) => CallResult::Paid(shown_payment(p)),
                Outcome::Declined(p) => CallResult::Declined(shown_payment(p)),
                Outcome::Canceled(p) => CallResult::Canceled(shown_payment(p)),
                Outcome::Uncertain { .. } => CallResult::Uncertain,
            },
        ),
        Err(error) => (Vec::new(), refused(&error)),
    };
    CallRecord {
        intent: intent.index,
        kind,
        instance,
        attempts,
        result,
        took: started.elapsed(),
    }
}

/// Makes a call, and again (same key, next instance, after a pause) while
/// it ends uncertain: a user coming back, up to [`ROUNDS`] calls.
pub(crate) async fn until_known<F, Fut>(
    instances: usize,
    first_instance: usize,
    mut call: F,
) -> Vec<CallRecord>
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = CallRecord>,
{
    let mut calls = Vec::new();
    for round in 0..ROUNDS {
        let record = call((first_instance + round) % instances).await;
        let again = record.result == CallResult::Uncertain;
        calls.push(record);
        if !again {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    calls
}

/// A payment call, repeated while uncertain.
pub(crate) async fn pay_until_known(
    clients: &Clients,
    intent: &Intent,
    kind: CallKind,
    first_instance: usize,
    request: &CreatePayment,
) -> Vec<CallRecord> {
    until_known(clients.instances(), first_instance, |instance| {
        pay_call(clients, intent, kind, instance, request)
    })
    .await
}

/// One refund call through `instance`.
pub(crate) async fn refund_call(
    clients: &Clients,
    intent: &Intent,
    number: u8,
    payment_id: &str,
    key: &IdempotencyKey,
    request: &CreateRefund,
    instance: usize,
) -> CallRecord {
    let started = Instant::now();
    let client = clients.get(intent.shop, instance);
    let (attempts, result) = match client.refund(payment_id, key, request).await {
        Ok(done) => (
            done.attempts.iter().map(AttemptRecord::of).collect(),
            match &done.outcome {
                RefundOutcome::Refunded(r) => CallResult::Refunded(shown_refund(r)),
                RefundOutcome::Failed(r) => CallResult::RefundFailed(shown_refund(r)),
                RefundOutcome::Uncertain { .. } => CallResult::Uncertain,
            },
        ),
        Err(error) => (Vec::new(), refused(&error)),
    };
    CallRecord {
        intent: intent.index,
        kind: CallKind::Refund(number),
        instance,
        attempts,
        result,
        took: started.elapsed(),
    }
}

/// Refund number `number` of the intent's payment, repeated while uncertain.
pub(crate) async fn refund_until_known(
    clients: &Clients,
    intent: &Intent,
    number: u8,
    payment_id: &str,
    minor: i64,
    first_instance: usize,
) -> Result<Vec<CallRecord>, ChaosError> {
    let key = IdempotencyKey::for_operation(&intent.reference, &format!("refund-{number}"))
        .map_err(|e| ChaosError::Setup(format!("refund key: {e}")))?;
    let request = CreateRefund::partial(money(minor)?);
    Ok(
        until_known(clients.instances(), first_instance, |instance| {
            refund_call(
                clients, intent, number, payment_id, &key, &request, instance,
            )
        })
        .await,
    )
}

/// One cancel call through `instance`.
pub(crate) async fn cancel_call(
    clients: &Clients,
    intent: &Intent,
    payment_id: &str,
    key: &IdempotencyKey,
    instance: usize,
) -> CallRecord {
    let started = Instant::now();
    let client = clients.get(intent.shop, instance);
    let (attempts, result) = match client.cancel(payment_id, key).await {
        Ok(done) => (
            done.attempts.iter().map(AttemptRecord::of).collect(),
            match done.outcome.payment() {
                Some(p) => CallResult::CancelEnded(shown_payment(p)),
                None => CallResult::Uncertain,
            },
        ),
        Err(error) => (Vec::new(), refused(&error)),
    };
    CallRecord {
        intent: intent.index,
        kind: CallKind::Cancel,
        instance,
        attempts,
        result,
        took: started.elapsed(),
    }
}

/// A cancel of the intent's payment a moment after it was sent: the
/// payment is found by its order (the intent's own amount), then canceled
/// under the key `cancel`, repeated while uncertain. No call when the
/// payment never showed up.
pub(crate) async fn cancel_soon(
    clients: &Clients,
    intent: &Intent,
    delay: Duration,
    instance: usize,
) -> Result<Vec<CallRecord>, ChaosError> {
    let key = IdempotencyKey::for_operation(&intent.reference, "cancel")
        .map_err(|e| ChaosError::Setup(format!("cancel key: {e}")))?;
    tokio::time::sleep(delay).await;
    let client = clients.get(intent.shop, instance);
    let mut payment_id = None;
    for _ in 0..20 {
        if let Ok(payments) = client.payments_for(&intent.reference).await {
            payment_id = payments
                .into_iter()
                .find(|p| p.amount.minor_units() == intent.amount_minor)
                .map(|p| p.id);
        }
        if payment_id.is_some() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let Some(payment_id) = payment_id else {
        return Ok(Vec::new());
    };
    Ok(until_known(clients.instances(), instance, |instance| {
        cancel_call(clients, intent, &payment_id, &key, instance)
    })
    .await)
}

/// One capture call through `instance`.
pub(crate) async fn capture_call(
    clients: &Clients,
    intent: &Intent,
    number: u8,
    payment_id: &str,
    key: &IdempotencyKey,
    request: &CreateCapture,
    instance: usize,
) -> CallRecord {
    let started = Instant::now();
    let client = clients.get(intent.shop, instance);
    let (attempts, result) = match client.capture(payment_id, key, request).await {
        Ok(done) => (
            done.attempts.iter().map(AttemptRecord::of).collect(),
            match &done.outcome {
                CaptureOutcome::Captured(c) => CallResult::Captured(shown_capture(c)),
                CaptureOutcome::Failed(c) => CallResult::CaptureFailed(shown_capture(c)),
                CaptureOutcome::Uncertain { .. } => CallResult::Uncertain,
            },
        ),
        Err(error) => (Vec::new(), refused(&error)),
    };
    CallRecord {
        intent: intent.index,
        kind: CallKind::Capture(number),
        instance,
        attempts,
        result,
        took: started.elapsed(),
    }
}

/// Capture number `number` of the intent's authorization (`minor`, final
/// when `last`), repeated while uncertain.
pub(crate) async fn capture_until_known(
    clients: &Clients,
    intent: &Intent,
    number: u8,
    payment_id: &str,
    (minor, last): (i64, bool),
    first_instance: usize,
) -> Result<Vec<CallRecord>, ChaosError> {
    let key = IdempotencyKey::for_operation(&intent.reference, &format!("capture-{number}"))
        .map_err(|e| ChaosError::Setup(format!("capture key: {e}")))?;
    let mut request = CreateCapture::part(money(minor)?);
    if last {
        request = request.last();
    }
    Ok(
        until_known(clients.instances(), first_instance, |instance| {
            capture_call(
                clients, intent, number, payment_id, &key, &request, instance,
            )
        })
        .await,
    )
}

/// One void call through `instance`.
pub(crate) async fn void_call(
    clients: &Clients,
    intent: &Intent,
    payment_id: &str,
    key: &IdempotencyKey,
    instance: usize,
) -> CallRecord {
    let started = Instant::now();
    let client = clients.get(intent.shop, instance);
    let (attempts, result) = match client.void(payment_id, key).await {
        Ok(done) => (
            done.attempts.iter().map(AttemptRecord::of).collect(),
            match &done.outcome {
                VoidOutcome::Voided(p) => CallResult::Voided(shown_authorization(p)),
                VoidOutcome::Failed { payment, .. } => {
                    CallResult::VoidFailed(shown_authorization(payment))
                }
                VoidOutcome::Uncertain { .. } => CallResult::Uncertain,
            },
        ),
        Err(error) => (Vec::new(), refused(&error)),
    };
    CallRecord {
        intent: intent.index,
        kind: CallKind::Void,
        instance,
        attempts,
        result,
        took: started.elapsed(),
    }
}

/// The void of the intent's authorization, repeated while uncertain.
pub(crate) async fn void_until_known(
    clients: &Clients,
    intent: &Intent,
    payment_id: &str,
    first_instance: usize,
) -> Result<Vec<CallRecord>, ChaosError> {
    let key = IdempotencyKey::for_operation(&intent.reference, "void")
        .map_err(|e| ChaosError::Setup(format!("void key: {e}")))?;
    Ok(
        until_known(clients.instances(), first_instance, |instance| {
            void_call(clients, intent, payment_id, &key, instance)
        })
        .await,
    )
}
