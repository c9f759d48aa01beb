//! What the background worker keeps between passes, so that each pass
//! after the first compares only what is new.
//!
//! The worker ([`Reconciler::spawn`](super::Reconciler::spawn)) keeps a [`ReconcilerState`] in memory
//! and compares only what is new: each pass after the first covers our
//! payments from where the last pass ended less [`ReconcilerConfig::overlap`]
//! (2 min: rows committed a little after their `created_at`, pages read while
//! rows were being inserted), and the charges from there less the clock
//! slack, up to now plus the slack. Its work is proportional to what is new
//! (plus the fixed overlap and slack), not to the window. A **full pass**
//! over the whole window runs on start (a restarted worker remembers nothing,
//! so it begins with one), every [`ReconcilerConfig::full_every`] (6 h), and
//! at the next pass whenever the state could not keep something it should
//! (below).
//!
//! What an incremental pass could miss, and what closes it:
//!
//! - **A duplicate whose charges are far apart** (the second an hour after
//!   the first, the first long out of the incremental range): the Bloom
//!   filter outlives passes. An order is added to it once its charge is
//!   older than anything the next pass re-reads, and a filter generation
//!   lives at least a window plus twice the slack, so the later charge finds
//!   the earlier one's order there and fetches the whole group. Orders the
//!   current pass re-reads (the overlap) are in a second filter of this pass
//!   only, so re-reading them costs no look-up.
//! - **A payment that was pending when its range was compared and settles
//!   later** (missing charge, mismatch): every pending payment a pass sees is
//!   remembered (up to 10 000) and looked up again on each pass until it is
//!   final, then checked like a payment of the window: its charge by the
//!   acquirer's status look-up (a missing charge when it has none, a mismatch
//!   when it disagrees). Settling normally comes from the acquirer's own
//!   answer, so this only finds bugs, as the full pass would.
//! - **Duplicates waiting for a pending payment, or whose refund failed**
//!   (with `refund_duplicates`): their order is remembered (up to 1 000) and
//!   judged again on each pass from a fresh look-up, so the refund happens
//!   once the payment settles, as the next full pass would do it. Orders
//!   whose group look-up failed are remembered the same way, and payments
//!   whose status look-up failed are checked again.
//! - **Rows that commit after a pass read their part of the time** (a
//!   payment's `created_at` is its transaction's start; a charge is stamped
//!   before its insert commits; a page may be read while rows are inserted
//!   below its cursor): the overlap reads the last 2 minutes again. A row
//!   later than that (an acquirer that reports charges hours late) is only
//!   compared by the next full pass, if it is still in the window then.
//! - When one of these memories is full, or a pass failed after it had taken
//!   things out of them, the next pass is a full pass.
//!
//! A finding is reported by every pass whose range holds it: by the pass that
//! first sees it and the next one if it is in the overlap, then by each full
//! pass while it is in the window (a pass over the whole window every 60 s
//! used to report it on every pass).

use std::collections::HashSet;
use std::hash::Hash;

use chargeonce_core::{PaymentId, Reference, ShopId};
use time::OffsetDateTime;

use super::config::{ReconcilerConfig, duration};
use super::filter::ReferenceFilter;

/// Pending payments (and payments whose look-up failed) the worker
/// remembers to check again; past this, the next pass is a full pass.
const RECHECK_LIMIT: usize = 10_000;

/// Orders the worker remembers to judge again; past this, the next pass is
/// a full pass.
const REVISIT_LIMIT: usize = 1_000;

/// What the background worker remembers between passes, in memory only: a
/// restarted worker starts from nothing, and its first pass is a full pass.
/// Its size is bounded whatever the window holds: two 2 MiB filters of order
/// references, and at most 10 000 payments and 1 000 orders to check again.
#[derive(Debug, Clone, Default)]
pub struct ReconcilerState {
    /// Where the compared part of the last successful pass ended.
    pub(super) compared_to: Option<OffsetDateTime>,
    /// When the last full pass ran.
    pub(super) last_full: Option<OffsetDateTime>,
    /// Something could not be remembered: the next pass is a full pass.
    pub(super) full_due: bool,
    /// Orders that had a succeeded charge in the window, up to what the next
    /// pass re-reads.
    pub(super) references: ReferenceFilter,
    /// Payments to check again: pending ones (until they are final) and
    /// those whose status look-up failed.
    pub(super) recheck: HashSet<(ShopId, PaymentId)>,
    /// Orders to judge again: duplicates waiting for a refund, orders whose
    /// look-up failed.
    pub(super) revisit: HashSet<(ShopId, Reference)>,
}

impl ReconcilerState {
    /// A state that remembers nothing: its first pass is a full pass.
    pub fn new() -> Self {
        Self::default()
    }

    /// Where the compared part of the last successful pass ended.
    pub fn compared_to(&self) -> Option<OffsetDateTime> {
        self.compared_to
    }

    /// Whether a pass at `now` compares the whole window.
    pub fn next_pass_is_full(&self, config: &ReconcilerConfig, now: OffsetDateTime) -> bool {
        let window = duration(config.window);
        let every = duration(config.full_every);
        match (self.compared_to, self.last_full) {
            (Some(compared_to), Some(last_full)) => {
                self.full_due || now - last_full >= every || now - compared_to >= window
            }
            _ => true,
        }
    }

    /// Payments remembered to check again.
    pub fn rechecks(&self) -> usize {
        self.recheck.len()
    }

    /// Orders remembered to judge again.
    pub fn revisits(&self) -> usize {
        self.revisit.len()
    }

    /// Readies the memory for a pass at `now`. A full pass sees every order
    /// and payment of the window again, so it starts from nothing; an
    /// incremental one only starts a new filter generation once the current
    /// one is `generation` old (a window plus twice the slack).
    pub(super) fn begin(&mut self, full: bool, now: OffsetDateTime, generation: time::Duration) {
        if full {
            self.references.clear(now);
            self.recheck.clear();
            self.revisit.clear();
        } else {
            self.references.roll(now, generation);
        }
    }

    /// A pass at `now` succeeded: the next one starts from here. `overflowed`:
    /// it could not remember something, so the next pass is a full pass.
    pub(super) fn passed(&mut self, full: bool, now: OffsetDateTime, overflowed: bool) {
        self.full_due = overflowed;
        self.compared_to = Some(now);
        if full {
            self.last_full = Some(now);
        }
    }

    /// A pass failed: what it took out of the memory to check again may be
    /// lost, so the next pass compares everything. Where the last pass
    /// ended stays, so the next pass covers this one's part too.
    pub(super) fn failed(&mut self) {
        self.full_due = true;
    }

    /// Remembers a payment to check again on the next pass; `false` when
    /// the memory is full (then the next pass must be a full one).
    pub(super) fn recheck_later(&mut self, key: (ShopId, PaymentId)) -> bool {
        remember(&mut self.recheck, RECHECK_LIMIT, key)
    }

    /// Remembers an order to judge again on the next pass; `false` when the
    /// memory is full (then the next pass must be a full one).
    pub(super) fn revisit_later(&mut self, key: (ShopId, Reference)) -> bool {
        remember(&mut self.revisit, REVISIT_LIMIT, key)
    }
}

/// Adds `key` to a memory of at most `limit` keys; `false` when it is full
/// (a key already there is still remembered).
fn remember<K: Hash + Eq>(memory: &mut HashSet<K>, limit: usize, key: K) -> bool {
    if memory.len() < limit || memory.contains(&key) {
        memory.insert(key);
        true
    } else {
        false
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::fixtures::at;
    use super::*;

    #[test]
    fn the_first_pass_is_full_then_incremental_until_full_every() {
        let config = ReconcilerConfig {
            window: Duration::from_secs(3600),
            full_every: Duration::from_secs(6 * 3600),
            ..ReconcilerConfig::default()
        };
        let mut state = ReconcilerState::new();
        let t0 = at(1_800_000_000_000);
        assert!(state.next_pass_is_full(&config, t0));
        state.compared_to = Some(t0);
        state.last_full = Some(t0);
        assert!(!state.next_pass_is_full(&config, t0 + time::Duration::minutes(1)));
        assert!(state.next_pass_is_full(&config, t0 + time::Duration::hours(6)));
        assert!(
            state.next_pass_is_full(&config, t0 + time::Duration::minutes(61)),
            "a gap longer than the window"
        );
        state.full_due = true;
        assert!(state.next_pass_is_full(&config, t0 + time::Duration::minutes(1)));
    }
}
