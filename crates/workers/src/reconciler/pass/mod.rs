//! One pass in progress: the walk over its part of the window, slice by
//! slice ([`super::slicing`]), with what it reads, looks up and refunds. The
//! judging itself is [`super::rules`]'s; a pass only gathers what the rules
//! need and acts on their verdicts.
//!
//! Each slice ([`slice`](mod@slice)) goes: read pages → attach charges → judge orders.
//! An incremental pass first checks again what the worker's memory holds
//! ([`super::state`]: payments that were pending, orders waiting for a
//! refund or a look-up), then walks its range.

use chargeonce_core::acquirer::look_up;
use chargeonce_core::{AcquirerCharge, LedgerCursor, Payment, PaymentId, Reference, ShopId};
use time::OffsetDateTime;

use super::config::{ReconcilerConfig, duration};
use super::filter::Bloom;
use chargeonce_core::findings::NewFinding;

use super::report::ReconcileReport;
use super::rules::{agrees, duplicate, has_attempt, judge, mismatch, missing, orphan};
use super::slicing::{FIRST_SPAN, after, before, next_span, slice_end};
use super::state::ReconcilerState;
use super::{ReconcileError, Reconciler};

mod slice;

/// One pass in progress.
pub(super) struct Pass<'a> {
    reconciler: &'a Reconciler,
    config: &'a ReconcilerConfig,
    state: &'a mut ReconcilerState,
    report: &'a mut ReconcileReport,
    now: OffsetDateTime,
    /// The window's start: our payments from here are in the window.
    from: OffsetDateTime,
    /// Our payments from here on are compared by this pass.
    start: OffsetDateTime,
    slack: time::Duration,
    /// The acquirer's charges from here on are compared by this pass.
    charges_from: OffsetDateTime,
    /// An order's group is its succeeded charges in `[group_from, group_to)`.
    group_from: OffsetDateTime,
    group_to: OffsetDateTime,
    /// Charges from here on are read again by the next pass: their orders go
    /// into this pass's filter only.
    reread_from: OffsetDateTime,
    /// Orders of the succeeded charges of this pass's earlier slices.
    seen: Bloom,
    /// The state could not remember something: the next pass is full.
    overflowed: bool,
}

impl<'a> Pass<'a> {
    /// A pass as of `now` over our payments from `start` (the window starts
    /// at `from`), with the worker's memory.
    pub(super) fn new(
        reconciler: &'a Reconciler,
        config: &'a ReconcilerConfig,
        state: &'a mut ReconcilerState,
        report: &'a mut ReconcileReport,
        now: OffsetDateTime,
        from: OffsetDateTime,
        start: OffsetDateTime,
    ) -> Self {
        let slack = duration(config.clock_slack);
        let overlap = duration(config.overlap);
        Self {
            reconciler,
            config,
            state,
            report,
            now,
            from,
            start,
            slack,
            charges_from: before(start, slack),
            group_from: before(from, slack),
            group_to: after(now, slack),
            // What the next pass re-reads starts here (if it is incremental).
            reread_from: before(before(now, overlap), slack),
            seen: Bloom::default(),
            overflowed: false,
        }
    }

    /// Whether the state could not remember something this pass: then the
    /// next pass is a full pass.
    pub(super) fn overflowed(&self) -> bool {
        self.overflowed
    }

    /// The comparison: for an incremental pass, first what it remembers to
    /// check again, then its range; for a full pass, the whole window.
    pub(super) async fn run(&mut self, full: bool) -> Result<(), ReconcileError> {
        if !full {
            self.recheck_payments().await?;
            self.revisit_orders().await?;
        }
        self.compare().await
    }

    /// Reports a finding; once a batch of them waits, records them in the
    /// store. A window full of disagreements (say, an acquirer ledger that
    /// lost its data) must not be held in memory whole until the pass ends.
    async fn find(&mut self, finding: NewFinding) {
        self.reconciler.find(self.config, self.report, finding);
        if self.report.found.len() >= self.config.batch.max(1) as usize {
            self.reconciler.record(self.config, self.report).await;
        }
    }

    fn error(&mut self, error: String) {
        self.report.push_error(self.config.max_findings, error);
    }

    fn held(&mut self, payments: usize, charges: usize) {
        self.report.peak_payments_held = self.report.peak_payments_held.max(payments);
        self.report.peak_charges_held = self.report.peak_charges_held.max(charges);
    }

    /// Remembers a payment to check again on the next pass.
    fn recheck_later(&mut self, payment: &Payment) {
        if payment.created_at < self.from {
            return;
        }
        if !self
            .state
            .recheck_later((payment.shop_id.clone(), payment.id.clone()))
        {
            self.overflowed = true;
        }
    }

    /// Remembers an order to judge again on the next pass.
    fn revisit_later(&mut self, shop_id: &ShopId, reference: &Reference) {
        if !self
            .state
            .revisit_later((shop_id.clone(), reference.clone()))
        {
            self.overflowed = true;
        }
    }

    /// One payment of ours, from the store.
    async fn payment_of(
        &mut self,
        shop_id: &ShopId,
        id: &PaymentId,
    ) -> Result<Option<Payment>, ReconcileError> {
        self.report.store_lookups += 1;
        Ok(self.reconciler.store.payment(shop_id, id).await?)
    }

    /// An order's group: its succeeded charges in the window, oldest first.
    async fn group_of(
        &mut self,
        shop_id: &ShopId,
        reference: &Reference,
    ) -> Result<Vec<AcquirerCharge>, String> {
        self.report.acquirer_lookups += 1;
        let charges = self
            .reconciler
            .ledger
            .charges_for_reference(shop_id, reference)
            .await
            .map_err(|e| {
                format!(
                    "charges of order {} of shop {shop_id}: {e}",
                    reference.as_str()
                )
            })?;
        let mut group: Vec<AcquirerCharge> = charges
            .into_iter()
            .filter(|c| {
                c.outcome.is_succeeded()
                    && c.created_at >= self.group_from
                    && c.created_at < self.group_to
            })
            .collect();
        group.sort_by(|a, b| (a.created_at, a.id()).cmp(&(b.created_at, b.id())));
        Ok(group)
    }

    /// A final payment whose named charge was not among the charges read
    /// next to it: the acquirer's status look-up decides.
    async fn check_missing(&mut self, payment: &Payment) {
        if has_attempt(payment) {
            self.known_charge(payment).await;
        }
    }

    /// The acquirer's status look-up of a final payment of ours: its charge
    /// when the acquirer has one. One it does not know is a missing charge;
    /// a look-up without an answer is reported, and the payment is checked
    /// again next pass.
    async fn known_charge(&mut self, payment: &Payment) -> Option<AcquirerCharge> {
        self.report.acquirer_lookups += 1;
        let known = look_up(
            self.reconciler.acquirer.as_ref(),
            &payment.shop_id,
            &payment.id,
            &payment.acquirer_key,
        )
        .await;
        match known {
            Ok(Some(charge)) => Some(charge),
            Ok(None) => {
                self.find(missing(payment)).await;
                None
            }
            Err(error) => {
                self.error(format!("status of payment {}: {error}", payment.id));
                self.recheck_later(payment);
                None
            }
        }
    }

    /// Judges an order's group (two or more succeeded charges, oldest
    /// first, each with our payment if we have it): a finding while an
    /// extra charge holds money, refunds when asked and decided.
    async fn judge_order(
        &mut self,
        shop_id: &ShopId,
        reference: &Reference,
        group: &[(AcquirerCharge, Option<Payment>)],
    ) {
        let verdict = judge(group);
        if verdict.holding.is_empty() {
            // Every extra charge was given back: nothing left to find.
            return;
        }
        let refund = self.config.refund_duplicates;
        if refund && verdict.undecided {
            tracing::warn!(%shop_id, reference = reference.as_str(), "duplicate charges wait for a pending payment to settle before any is refunded");
        }
        let mut refunded = Vec::new();
        let mut failed = false;
        if refund && !verdict.undecided {
            for &i in &verdict.holding {
                let Some((charge, _)) = group.get(i) else {
                    continue;
                };
                match self.reconciler.ledger.refund(charge.id()).await {
                    Ok(done) => {
                        tracing::warn!(charge = charge.id(), refund = %done.id, "duplicate charge refunded");
                        refunded.push(charge.id().to_owned());
                    }
                    Err(error) => {
                        failed = true;
                        self.error(format!("refund of duplicate {}: {error}", charge.id()));
                    }
                }
            }
        }
        if refund && (verdict.undecided || failed) {
            self.revisit_later(shop_id, reference);
        }
        self.find(duplicate(shop_id, reference, group, &verdict, refunded))
            .await;
    }

    /// Incremental passes: payments that were pending (or could not be
    /// checked) when their part of the window was compared, now final.
    async fn recheck_payments(&mut self) -> Result<(), ReconcileError> {
        let keys: Vec<(ShopId, PaymentId)> = self.state.recheck.drain().collect();
        for (shop_id, id) in keys {
            let Some(payment) = self.payment_of(&shop_id, &id).await? else {
                continue;
            };
            // Out of the window: no pass compares it any more. In this
            // pass's range: compared there (and remembered again if pending).
            if payment.created_at < self.from || payment.created_at >= self.start {
                continue;
            }
            if !payment.status.is_final() {
                self.recheck_later(&payment);
                continue;
            }
            if !has_attempt(&payment) {
                continue;
            }
            if let Some(charge) = self.known_charge(&payment).await {
                let named = payment.provider_payment_id.as_deref() == Some(charge.id());
                let in_window = charge.created_at >= self.group_from;
                // A charge this pass reads is compared with its payment there.
                let read_here = charge.created_at >= self.charges_from;
                if named && in_window && !read_here && !agrees(&payment, &charge) {
                    self.find(mismatch(&payment, &charge)).await;
                }
            }
        }
        Ok(())
    }

    /// Incremental passes: orders to judge again (duplicates waiting for a
    /// refund, orders whose look-up failed), from a fresh look-up.
    async fn revisit_orders(&mut self) -> Result<(), ReconcileError> {
        let orders: Vec<(ShopId, Reference)> = self.state.revisit.drain().collect();
        for (shop_id, reference) in orders {
            let charges = match self.group_of(&shop_id, &reference).await {
                Ok(group) => group,
                Err(error) => {
                    self.error(error);
                    self.revisit_later(&shop_id, &reference);
                    continue;
                }
            };
            match charges.last() {
                None => continue,
                // This pass reads the group's latest charge and judges it there.
                Some(latest) if latest.created_at >= self.charges_from => continue,
                Some(_) => {}
            }
            let mut group = Vec::with_capacity(charges.len());
            for charge in charges {
                let payment = self.payment_of(&charge.shop_id, &charge.payment_id).await?;
                group.push((charge, payment));
            }
            self.held(group.len(), group.len());
            match group.as_slice() {
                [(charge, None)] if charge.holds_money() => self.find(orphan(charge)).await,
                [_] => {}
                _ => self.judge_order(&shop_id, &reference, &group).await,
            }
        }
        Ok(())
    }

    /// Compares this pass's part of the window, slice by slice.
    async fn compare(&mut self) -> Result<(), ReconcileError> {
        let longest = duration(self.config.slice_span).max(time::Duration::MILLISECOND);
        let mut span = FIRST_SPAN.min(longest);
        let target = 2 * u64::from(self.config.batch.max(1));
        let limit = self.config.slice_charges.max(1);
        let charges_to = after(self.now, self.slack);
        // The walk starts where the charges do, the clock slack before the
        // range: our payments there are read (not compared: an earlier pass,
        // or nobody, owns them) so that the charges there find theirs
        // without a look-up each.
        let mut t = self.charges_from;
        let mut cursor: Option<LedgerCursor> = None;
        let mut carry: Vec<Payment> = Vec::new();
        loop {
            let span_end = after(t, span).min(self.now);
            let page_to = if span_end >= self.now {
                charges_to
            } else {
                span_end
            };
            let mut page = self
                .reconciler
                .ledger
                .charges_page(self.charges_from, page_to, cursor.as_ref(), limit)
                .await
                .map_err(|e| ReconcileError::Acquirer(e.to_string()))?;
            let full = page.len() >= limit as usize;
            let (end, take) = slice_end(t, span_end, self.now, full, &page);
            page.truncate(take);
            if let Some(last) = page.last() {
                cursor = Some(LedgerCursor::after(last));
            }
            let payments = self.slice(page, t, end, span, &mut carry).await?;
            span = next_span(span, end - t, payments, target, longest);
            t = end;
            if !full && t >= self.now {
                break;
            }
        }
        for payment in std::mem::take(&mut carry) {
            self.check_missing(&payment).await;
        }
        Ok(())
    }
}
