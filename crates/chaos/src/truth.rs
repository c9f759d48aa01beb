//! The truth after the run: what the database holds (payments, their
//! histories, refunds) and what the acquirer's ledger says moved, as plain
//! values the checker judges ([`Truth`]); reading it ([`read`]), and the
//! books it adds up to.

use std::collections::HashMap;
use std::path::Path;

use chargeonce_acquirer::{ChargeStatus, Simulator, SimulatorConfig};
use chargeonce_core::history::HistoryEvent;
use chargeonce_core::{
    CaptureMethod, Cursor, PageLimit, PageRequest, PaymentId, PaymentStatus, RefundId, ShopId,
    Store,
};
use serde::Serialize;

use crate::error::ChaosError;
use crate::history::{self, CallResult};

/// A payment as the database holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DbPayment {
    /// `pay_...`.
    pub id: String,
    /// Its shop.
    pub shop_id: String,
    /// Its order.
    pub reference: String,
    /// In minor units.
    pub amount_minor: i64,
    /// `pending`, `succeeded`, `declined`.
    pub status: String,
    /// The acquirer's charge id, once known.
    pub provider_payment_id: Option<String>,
    /// What succeeded refunds gave back.
    pub refunded_minor: i64,
    /// Its metadata.
    pub metadata: std::collections::BTreeMap<String, String>,
    /// Only authorized (`capture_method` `manual`): then `hold` says
    /// where its hold stands.
    pub manual: bool,
    /// The hold's state as stored (`open`, `closing`, `releasing_void`,
    /// `captured`, `released_expiry`, ...); empty when charged at once.
    pub hold: String,
    /// What its captures took (the books' side), in minor units.
    pub captured_minor: i64,
    /// What it took from the customer: its amount when charged at once and
    /// succeeded, its captures when authorized, else 0.
    pub taken_minor: i64,
}

/// A refund as the database holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DbRefund {
    /// `re_...`.
    pub id: String,
    /// Its shop.
    pub shop_id: String,
    /// The refunded payment.
    pub payment_id: String,
    /// `pending`, `succeeded`, `failed`.
    pub status: String,
    /// In minor units.
    pub amount_minor: i64,
}

/// A capture as the database holds it (every capture of every
/// authorization of the run's shops).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DbCapture {
    /// `cap_...`.
    pub id: String,
    /// Its shop.
    pub shop_id: String,
    /// The captured payment.
    pub payment_id: String,
    /// `pending`, `succeeded`, `failed`.
    pub status: String,
    /// In minor units.
    pub amount_minor: i64,
    /// What the acquirer holds under its reference (our capture id): the
    /// amount of each capture found, in minor units.
    pub at_acquirer: Vec<i64>,
}

/// A charge attempt in the acquirer's ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerCharge {
    /// `ch_...`.
    pub id: String,
    /// The shop it was made for.
    pub shop_id: String,
    /// Our payment id it carried.
    pub payment_id: String,
    /// The order.
    pub reference: String,
    /// In minor units.
    pub amount_minor: i64,
    /// Whether money moved (for an authorization: whether it was
    /// authorized).
    pub succeeded: bool,
    /// Only authorized.
    pub manual: bool,
    /// What captures took from an authorization.
    pub captured_minor: i64,
    /// An authorization whose rest was released by a void.
    pub voided: bool,
    /// An authorization closed by its last capture.
    pub closed: bool,
    /// What it took from the customer: the amount of a succeeded charge
    /// made at once, the captures of an authorization.
    pub taken_minor: i64,
}

/// A refund in the acquirer's ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerRefund {
    /// The refunded charge.
    pub charge_id: String,
    /// In minor units.
    pub amount_minor: i64,
}

/// Where things stand once everything settled.
#[derive(Debug, Clone, Default)]
pub struct Truth {
    /// Every payment in the database.
    pub payments: Vec<DbPayment>,
    /// The refunds the clients were told about, read back from the database
    /// (by the shop that made them).
    pub refunds: Vec<DbRefund>,
    /// Every charge attempt at the acquirer.
    pub charges: Vec<LedgerCharge>,
    /// Every refund at the acquirer.
    pub ledger_refunds: Vec<LedgerRefund>,
    /// Every capture of the run's authorizations in the database, with
    /// what the acquirer holds under each one's reference.
    pub captures: Vec<DbCapture>,
    /// Each payment's history as the store recorded it, oldest first, by
    /// payment id (a payment without an entry has an empty history).
    pub histories: HashMap<String, Vec<HistoryEvent>>,
    /// Pending payments in the whole database, counted from their rows.
    pub pending_rows: u64,
    /// Pending payments as the store's overview counts them: on PostgreSQL
    /// the payments of unfinished keys and of the pending queue
    /// (`pending_payments`, filled by a key finished while its payment is
    /// pending, emptied by every settle); on SQLite the partial index.
    pub pending_counted: u64,
}

/// The database's payments of the run's shops with their histories, the
/// refunds the clients were told about, and the acquirer's ledger.
pub(crate) async fn read(
    store: &dyn Store,
    shops: &[String],
    history: &[history::CallRecord],
    ledger_path: &Path,
) -> Result<Truth, ChaosError> {
    let mut truth = Truth::default();
    let from = time::OffsetDateTime::UNIX_EPOCH;
    let to = time::OffsetDateTime::now_utc() + time::Duration::days(1);
    let mut after = None;
    loop {
        let page = store
            .payments_created_between(from, to, after.as_ref(), 1000)
            .await?;
        let Some(last) = page.last() else { break };
        after = Some(last.id.clone());
        truth.pending_rows += page
            .iter()
            .filter(|p| p.status == PaymentStatus::Pending)
            .count() as u64;
        truth.payments.extend(
            page.iter()
                .filter(|p| shops.iter().any(|s| s == p.shop_id.as_str()))
                .map(|p| DbPayment {
                    id: p.id.as_str().to_owned(),
                    shop_id: p.shop_id.as_str().to_owned(),
                    reference: p.reference.as_str().to_owned(),
                    amount_minor: p.amount.minor_units(),
                    status: p.status.as_str().to_owned(),
                    provider_payment_id: p.provider_payment_id.clone(),
                    refunded_minor: p.refunded_minor,
                    metadata: p.metadata.as_map().clone(),
                    manual: p.capture.method() == CaptureMethod::Manual,
                    hold: p
                        .authorization()
                        .map(|h| h.hold().as_str().to_owned())
                        .unwrap_or_default(),
                    captured_minor: p.authorization().map_or(0, |h| h.captured_minor()),
                    taken_minor: taken(p),
                }),
        );
    }
    truth.pending_counted = store.counts().await?.pending_payments;
    // Each payment's history, through the store's history role (the
    // operator's read: any shop).
    for payment in &truth.payments {
        let Ok(id) = PaymentId::parse(&payment.id) else {
            continue;
        };
        let entries = store.payment_history(None, &id).await?;
        truth.histories.insert(
            payment.id.clone(),
            entries.into_iter().map(|entry| entry.event).collect(),
        );
    }
    let mut seen = std::collections::HashSet::new();
    for call in history {
        let (CallResult::Refunded(shown) | CallResult::RefundFailed(shown)) = &call.result else {
            continue;
        };
        if !seen.insert(shown.id.clone()) {
            continue;
        }
        // Read back as the shop the answer named; the checker compares it
        // with the shop that asked.
        let (Ok(shop), Ok(id)) = (
            ShopId::new(shown.shop_id.clone()),
            RefundId::parse(&shown.id),
        ) else {
            continue;
        };
        if let Some(r) = store.refund(&shop, &id).await? {
            truth.refunds.push(DbRefund {
                id: r.id.as_str().to_owned(),
                shop_id: r.shop_id.as_str().to_owned(),
                payment_id: r.payment_id.as_str().to_owned(),
                status: r.status.as_str().to_owned(),
                amount_minor: r.amount.minor_units(),
            });
        }
    }
    let sim = Simulator::open(ledger_path, SimulatorConfig::default()).await?;
    truth.charges = sim
        .ledger()
        .await?
        .into_iter()
        .map(|e| LedgerCharge {
            taken_minor: e.taken_minor(),
            id: e.id,
            shop_id: e.shop_id.as_str().to_owned(),
            payment_id: e.payment_id.as_str().to_owned(),
            reference: e.reference.as_str().to_owned(),
            amount_minor: e.amount.minor_units(),
            succeeded: e.status == ChargeStatus::Succeeded,
            manual: e.capture_method == CaptureMethod::Manual,
            captured_minor: e.captured_minor,
            voided: e.voided,
            closed: e.closed,
        })
        .collect();
    truth.captures = captures(store, &truth.payments, &sim).await?;
    truth.ledger_refunds = sim
        .refunds()
        .await?
        .into_iter()
        .map(|r| LedgerRefund {
            charge_id: r.charge_id,
            amount_minor: r.amount_minor,
        })
        .collect();
    sim.close().await;
    Ok(truth)
}

/// What a payment took from the customer, by the books.
fn taken(p: &chargeonce_core::Payment) -> i64 {
    match (p.capture.method(), p.authorization()) {
        (_, Some(hold)) => hold.captured_minor(),
        (CaptureMethod::Automatic, None) if p.status == PaymentStatus::Succeeded => {
            p.amount.minor_units()
        }
        _ => 0,
    }
}

/// Every capture of the authorizations among `payments`, each with what
/// the acquirer holds under its reference.
async fn captures(
    store: &dyn Store,
    payments: &[DbPayment],
    sim: &Simulator,
) -> Result<Vec<DbCapture>, ChaosError> {
    let mut out = Vec::new();
    for p in payments.iter().filter(|p| p.manual) {
        let (Ok(shop), Ok(id)) = (ShopId::new(p.shop_id.clone()), PaymentId::parse(&p.id)) else {
            continue;
        };
        let limit = PageLimit::new(chargeonce_core::MAX_PAGE_LIMIT).unwrap_or_default();
        let mut page = PageRequest {
            limit,
            cursor: Cursor::Newest,
        };
        loop {
            let listed = store.list_captures(&shop, &id, &page).await?;
            for c in &listed.items {
                let at_acquirer = match &p.provider_payment_id {
                    Some(charge) => sim
                        .captures_of(charge, Some(c.id.as_str()))
                        .await?
                        .into_iter()
                        .map(|r| r.amount_minor)
                        .collect(),
                    None => Vec::new(),
                };
                out.push(DbCapture {
                    id: c.id.as_str().to_owned(),
                    shop_id: c.shop_id.as_str().to_owned(),
                    payment_id: c.payment_id.as_str().to_owned(),
                    status: c.status.as_str().to_owned(),
                    amount_minor: c.amount.minor_units(),
                    at_acquirer,
                });
            }
            match (listed.has_more, listed.items.last()) {
                (true, Some(last)) => {
                    page = PageRequest {
                        limit,
                        cursor: Cursor::After(last.id.clone()),
                    }
                }
                _ => break,
            }
        }
    }
    Ok(out)
}

/// What the database and the ledger held at the end.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Books {
    /// Payments succeeded.
    pub payments_succeeded: usize,
    /// Payments declined.
    pub payments_declined: usize,
    /// Payments canceled (nothing taken).
    pub payments_canceled: usize,
    /// Payments still pending (must be 0).
    pub payments_pending: usize,
    /// Charge attempts in the ledger.
    pub ledger_charges: usize,
    /// Of which succeeded.
    pub ledger_succeeded: usize,
    /// Refunds in the ledger.
    pub ledger_refunds: usize,
    /// Money moved, in minor units.
    pub ledger_total_minor: i128,
    /// Payments that only authorized, and got authorized.
    pub authorizations: usize,
    /// Their captures that succeeded.
    pub captures_succeeded: usize,
    /// Their captures the acquirer refused.
    pub captures_failed: usize,
    /// Authorizations whose rest a void released.
    pub released_by_void: usize,
    /// Authorizations whose rest the expirer released.
    pub released_by_expiry: usize,
    /// Entries in the payments' histories.
    pub history_entries: usize,
    /// Payments whose history has an entry.
    pub payments_with_history: usize,
}

/// The counts and totals of the report's books.
pub(crate) fn books(truth: &Truth) -> Books {
    Books {
        payments_succeeded: truth
            .payments
            .iter()
            .filter(|p| p.status == "succeeded")
            .count(),
        payments_declined: truth
            .payments
            .iter()
            .filter(|p| p.status == "declined")
            .count(),
        payments_canceled: truth
            .payments
            .iter()
            .filter(|p| p.status == "canceled")
            .count(),
        payments_pending: truth
            .payments
            .iter()
            .filter(|p| p.status == "pending")
            .count(),
        ledger_charges: truth.charges.len(),
        ledger_succeeded: truth.charges.iter().filter(|c| c.succeeded).count(),
        ledger_refunds: truth.ledger_refunds.len(),
        ledger_total_minor: truth
            .charges
            .iter()
            .filter(|c| c.succeeded)
            .map(|c| i128::from(c.amount_minor))
            .sum(),
        authorizations: truth
            .payments
            .iter()
            .filter(|p| p.manual && p.status == "succeeded")
            .count(),
        captures_succeeded: truth
            .captures
            .iter()
            .filter(|c| c.status == "succeeded")
            .count(),
        captures_failed: truth
            .captures
            .iter()
            .filter(|c| c.status == "failed")
            .count(),
        released_by_void: truth
            .payments
            .iter()
            .filter(|p| p.hold == "released_void")
            .count(),
        released_by_expiry: truth
            .payments
            .iter()
            .filter(|p| p.hold == "released_expiry")
            .count(),
        history_entries: truth.histories.values().map(Vec::len).sum(),
        payments_with_history: truth.histories.values().filter(|h| !h.is_empty()).count(),
    }
}
