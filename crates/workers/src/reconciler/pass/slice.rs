//! One slice of a pass ([`Pass::slice`]): **read pages** (our payments of its stretch of time, a
//! page at a time, each attached to its charges, those of the compared range
//! compared) → **attach charges** (a charge whose payment was not among the
//! pages gets it by a targeted look-up) → **judge orders** (duplicates,
//! orphans and mismatches, by the rules) → remember the slice's orders.
//!
//! What spans slices is settled by targeted look-ups, not by holding more:
//!
//! - **A charge whose payment is not among its slice's payments** (created a
//!   little earlier, in the previous slice; long pending, created outside the
//!   window): the store's payment by id.
//! - **A final payment whose named charge is not in its slice** (the charge
//!   came a little later): carried to the next slice and looked for there;
//!   if it is not there either, the acquirer's status look-up, as before.
//! - **An order whose charges are in different slices** (or different
//!   passes): every slice remembers the orders of its succeeded charges in a
//!   fixed-size Bloom filter (2 MiB, [`filter`](super::super::filter)). A charge whose order
//!   may have been seen before, or that shares its slice with another charge
//!   of its order, makes the pass fetch the order's whole group from the
//!   acquirer
//!   ([`AcquirerLedger::charges_for_reference`](chargeonce_core::AcquirerLedger::charges_for_reference)).
//!   The group is judged once, in the slice that holds its latest charge; an
//!   earlier slice only notes the order. A false positive of the filter costs
//!   one look-up, never a finding; it has no false negatives.
//! - **An orphan candidate** (a charge holding money whose payment we do not
//!   have) also fetches its order's group: if the order has another
//!   succeeded charge anywhere in the window, later slices included, the
//!   charge is part of a duplicate, not an orphan.

use std::collections::{BTreeMap, HashMap};

use chargeonce_core::{AcquirerCharge, Payment, PaymentId, Reference, ShopId};
use time::OffsetDateTime;

use super::Pass;
use crate::reconciler::ReconcileError;
use crate::reconciler::rules::{
    ChargeVerdict, charge_after_cancel, check_charge, named_in, needs_group, orphan,
};
use crate::reconciler::slicing::after;

/// The charges of one slice (in ledger order), indexed, and our payment of
/// each once it is found.
struct SliceCharges<'c> {
    charges: &'c [AcquirerCharge],
    /// Each charge's place by its id.
    ids: HashMap<&'c str, usize>,
    /// The charges made for each payment id.
    by_payment: HashMap<&'c PaymentId, Vec<usize>>,
    /// Our payment of each charge, once found.
    payments: Vec<Option<Payment>>,
    /// How many charges have their payment.
    attached: usize,
}

impl<'c> SliceCharges<'c> {
    fn new(charges: &'c [AcquirerCharge]) -> Self {
        let ids = charges
            .iter()
            .enumerate()
            .map(|(i, c)| (c.id(), i))
            .collect();
        let mut by_payment: HashMap<&PaymentId, Vec<usize>> = HashMap::new();
        for (i, charge) in charges.iter().enumerate() {
            by_payment.entry(&charge.payment_id).or_default().push(i);
        }
        Self {
            charges,
            ids,
            by_payment,
            payments: vec![None; charges.len()],
            attached: 0,
        }
    }

    /// Attaches a payment of ours to the charges made for it (by the same
    /// shop: a payment id is only unique within a shop).
    fn attach(&mut self, payment: &Payment) {
        let Some(indexes) = self.by_payment.get(&payment.id) else {
            return;
        };
        for &i in indexes {
            if let (Some(slot), Some(charge)) = (self.payments.get_mut(i), self.charges.get(i))
                && slot.is_none()
                && charge.shop_id == payment.shop_id
            {
                *slot = Some(payment.clone());
                self.attached += 1;
            }
        }
    }
}

impl Pass<'_> {
    /// One slice: `charges` (in ledger order), and our payments created in
    /// `[from, to)`; those before the pass's range are read only to match
    /// charges, the others are compared. `carry` brings the previous slice's
    /// final payments whose named charge it did not hold, and takes this
    /// slice's. Returns how many payments it compared.
    pub(super) async fn slice(
        &mut self,
        charges: Vec<AcquirerCharge>,
        from: OffsetDateTime,
        to: OffsetDateTime,
        span: time::Duration,
        carry: &mut Vec<Payment>,
    ) -> Result<u64, ReconcileError> {
        self.report.slices += 1;
        self.report.charges_compared += charges.len();
        self.held(carry.len(), charges.len());
        let mut slice = SliceCharges::new(&charges);

        // The previous slice's final payments whose charge came in this one.
        for payment in std::mem::take(carry) {
            if !named_in(&payment, &slice.ids) {
                self.check_missing(&payment).await;
            }
        }

        let compared = self.read_pages(&mut slice, from, to, span, carry).await?;
        self.attach_charges(&mut slice, carry.len()).await?;
        self.judge_orders(&slice).await?;
        self.remember_orders(&charges);
        Ok(compared)
    }

    /// Our payments created in `[from, to)`, a page at a time, in ranges of
    /// at most a span (a page reads its whole range of the `created_at`
    /// index): each is attached to its charges in the slice, and those of
    /// the pass's range are compared. A final one whose named charge is not
    /// in the slice goes into `carry`, for the next slice. Returns how many
    /// payments it compared.
    async fn read_pages(
        &mut self,
        slice: &mut SliceCharges<'_>,
        from: OffsetDateTime,
        to: OffsetDateTime,
        span: time::Duration,
        carry: &mut Vec<Payment>,
    ) -> Result<u64, ReconcileError> {
        let batch = self.config.batch.max(1);
        let mut compared = 0u64;
        let owned_from = from.max(self.start);
        let ranges = [(from, owned_from.min(to), false), (owned_from, to, true)];
        for (range_from, range_to, owned) in ranges {
            let mut part_from = range_from;
            while part_from < range_to {
                let part_to = after(part_from, span).min(range_to);
                let mut last: Option<PaymentId> = None;
                loop {
                    let page = self
                        .reconciler
                        .store
                        .payments_created_between(part_from, part_to, last.as_ref(), batch)
                        .await?;
                    let more = page.len() >= batch as usize;
                    last = page.last().map(|p| p.id.clone());
                    self.held(
                        slice.attached + page.len() + carry.len(),
                        slice.charges.len(),
                    );
                    // The other mode's payments are its reconciler's.
                    let mode = self.reconciler.mode;
                    for payment in page.into_iter().filter(|p| p.shop_id.mode() == mode) {
                        slice.attach(&payment);
                        if !owned {
                            continue;
                        }
                        self.report.payments_compared += 1;
                        compared += 1;
                        if !payment.status.is_final() {
                            self.recheck_later(&payment);
                        } else if !named_in(&payment, &slice.ids) {
                            if carry.len() < batch as usize {
                                carry.push(payment);
                            } else {
                                self.check_missing(&payment).await;
                            }
                        }
                    }
                    if !more {
                        break;
                    }
                }
                part_from = part_to;
            }
        }
        Ok(compared)
    }

    /// Charges whose payment was not among the pages: one look-up each.
    /// `carried`: the payments carried to the next slice, held meanwhile.
    async fn attach_charges(
        &mut self,
        slice: &mut SliceCharges<'_>,
        carried: usize,
    ) -> Result<(), ReconcileError> {
        let charges = slice.charges;
        for (charge, slot) in charges.iter().zip(slice.payments.iter_mut()) {
            if slot.is_none() {
                *slot = self.payment_of(&charge.shop_id, &charge.payment_id).await?;
                if slot.is_some() {
                    slice.attached += 1;
                }
            }
        }
        self.held(slice.attached + carried, charges.len());
        for payment in slice.payments.iter().flatten() {
            if !payment.status.is_final() {
                self.recheck_later(payment);
            }
        }
        Ok(())
    }

    /// Duplicates, orphans and mismatches among the slice's charges, each
    /// with its payment, as the rules judge them.
    async fn judge_orders(&mut self, slice: &SliceCharges<'_>) -> Result<(), ReconcileError> {
        let charges = slice.charges;
        // Duplicates: the orders of this slice's succeeded charges.
        let mut orders: BTreeMap<(&str, &str), Vec<usize>> = BTreeMap::new();
        for (i, charge) in charges.iter().enumerate() {
            if charge.outcome.is_succeeded() {
                orders
                    .entry((charge.shop_id.as_str(), charge.reference.as_str()))
                    .or_default()
                    .push(i);
            }
        }
        // Per order looked up: whether it has two succeeded charges or more
        // in the window (`None`: the look-up failed).
        let mut grouped: HashMap<(&str, &str), Option<bool>> = HashMap::new();
        for (&(shop, reference), local) in &orders {
            let Some(&first) = local.first() else {
                continue;
            };
            let seen_before = self.seen.may_contain(shop, reference)
                || self.state.references.may_contain(shop, reference);
            if !needs_group(local.len(), seen_before) {
                continue;
            }
            let Some(charge) = charges.get(first) else {
                continue;
            };
            let (shop_id, order) = (charge.shop_id.clone(), charge.reference.clone());
            let judged = self.judge_if_latest(&shop_id, &order, slice).await?;
            grouped.insert((shop, reference), judged);
        }

        // Orphans and mismatches, charge by charge.
        for (charge, payment) in charges.iter().zip(slice.payments.iter()) {
            match check_charge(charge, payment.as_ref()) {
                ChargeVerdict::OrphanUnlessGrouped => {
                    let key = (charge.shop_id.as_str(), charge.reference.as_str());
                    let in_group = match grouped.get(&key) {
                        Some(known) => *known,
                        None => {
                            let (shop_id, order) =
                                (charge.shop_id.clone(), charge.reference.clone());
                            let looked = self
                                .group_of(&shop_id, &order)
                                .await
                                .map(|group| group.len() >= 2);
                            match looked {
                                Ok(in_group) => Some(in_group),
                                Err(error) => {
                                    self.error(error);
                                    self.revisit_later(&shop_id, &order);
                                    None
                                }
                            }
                        }
                    };
                    // In a group: the group's finding covers it.
                    if in_group == Some(false) {
                        self.find(orphan(charge)).await;
                    }
                }
                ChargeVerdict::Mismatch(finding) => self.find(finding).await,
                ChargeVerdict::AfterCancel => {
                    if let Some(payment) = payment {
                        self.refund_after_cancel(charge, payment).await;
                    }
                }
                ChargeVerdict::Nothing => {}
            }
        }
        Ok(())
    }

    /// Refunds a charge that landed for a payment we canceled, always (the
    /// merchant was told nothing was taken), and records it: a finding
    /// resolved as refunded, in the payment's history. A refund that fails
    /// leaves the finding open; the order is judged again next pass.
    async fn refund_after_cancel(&mut self, charge: &AcquirerCharge, payment: &Payment) {
        let refunded = match self.reconciler.ledger.refund(charge.id()).await {
            Ok(done) => {
                tracing::warn!(payment = %payment.id, charge = charge.id(), refund = %done.id, "a charge landed after its payment was canceled; refunded");
                vec![charge.id().to_owned()]
            }
            Err(error) => {
                self.error(format!(
                    "refund of {} after cancel of {}: {error}",
                    charge.id(),
                    payment.id
                ));
                self.revisit_later(&payment.shop_id, &payment.reference);
                Vec::new()
            }
        };
        self.find(charge_after_cancel(payment, charge, refunded))
            .await;
    }

    /// Remembers the orders of a slice's succeeded charges for the slices
    /// and passes after it.
    fn remember_orders(&mut self, charges: &[AcquirerCharge]) {
        for charge in charges.iter().filter(|c| c.outcome.is_succeeded()) {
            let (shop, reference) = (charge.shop_id.as_str(), charge.reference.as_str());
            self.seen.insert(shop, reference);
            if charge.created_at < self.reread_from {
                self.state.references.insert(shop, reference);
            }
        }
    }

    /// Fetches an order's group and judges it if its latest charge is in
    /// this slice (else the slice that holds it does). `Some(true)`: the
    /// order has two succeeded charges or more in the window; `None`: the
    /// look-up failed (reported; the order is judged again next pass).
    async fn judge_if_latest(
        &mut self,
        shop_id: &ShopId,
        reference: &Reference,
        slice: &SliceCharges<'_>,
    ) -> Result<Option<bool>, ReconcileError> {
        let group = match self.group_of(shop_id, reference).await {
            Ok(group) => group,
            Err(error) => {
                self.error(error);
                self.revisit_later(shop_id, reference);
                return Ok(None);
            }
        };
        if group.len() < 2 {
            return Ok(Some(false));
        }
        if !group
            .last()
            .is_some_and(|latest| slice.ids.contains_key(latest.id()))
        {
            return Ok(Some(true));
        }
        let mut members = Vec::with_capacity(group.len());
        for charge in group {
            let here = slice
                .ids
                .get(charge.id())
                .and_then(|&i| slice.payments.get(i));
            let payment = match here {
                Some(payment) => payment.clone(),
                None => self.payment_of(&charge.shop_id, &charge.payment_id).await?,
            };
            members.push((charge, payment));
        }
        self.held(
            slice.payments.iter().flatten().count() + members.len(),
            slice.charges.len() + members.len(),
        );
        self.judge_order(shop_id, reference, &members).await;
        Ok(Some(true))
    }
}
