//! How a pass cuts its part of the window into slices, so that it never
//! holds the window.
//!
//! A pass walks its part of the window in **slices**: a page of at most
//! [`slice_charges`](super::ReconcilerConfig::slice_charges) charges from the
//! ledger, in the ledger's order (`created_at`, then id:
//! [`AcquirerLedger::charges_page`](chargeonce_core::AcquirerLedger::charges_page),
//! keyset pagination), covering a stretch of time that adapts to hold about
//! two pages of our payments (at most
//! [`slice_span`](super::ReconcilerConfig::slice_span)); and our payments
//! created in the same stretch of time, read
//! [`batch`](super::ReconcilerConfig::batch) at a time
//! (`Store::payments_created_between`) and never kept beyond the page, except
//! the one each charge of the slice belongs to. The walk starts with the
//! charges, the clock slack before the compared range; our payments of that
//! stretch are read only to be found by their charges, not compared (they
//! are before the window, or an earlier pass compared them). The slices'
//! payment ranges split the walk's time exactly, and their charges split the
//! window's charges exactly, so each payment and each charge is compared
//! once. The pass therefore holds at most a slice of charges, their
//! payments, a page and a carry of payments ([`super::pass`]), whatever the
//! window's size; the report says how many it held at most
//! ([`ReconcileReport::peak_payments_held`](super::ReconcileReport::peak_payments_held),
//! [`ReconcileReport::peak_charges_held`](super::ReconcileReport::peak_charges_held)).
//!
//! This module is the arithmetic of it (where a slice ends, how long the
//! next one is); [`super::pass`] walks the slices.

use chargeonce_core::AcquirerCharge;
use time::OffsetDateTime;

/// `at - d`, saturating at the earliest time there is.
pub(super) fn before(at: OffsetDateTime, d: time::Duration) -> OffsetDateTime {
    at.checked_sub(d).unwrap_or(OffsetDateTime::UNIX_EPOCH)
}

/// `at + d`, saturating.
pub(super) fn after(at: OffsetDateTime, d: time::Duration) -> OffsetDateTime {
    at.checked_add(d).unwrap_or(at)
}

/// Where a slice ends: the end of our payments' time range and how many of
/// the page's charges belong to it.
///
/// `t` is where the slice starts (our clock), `span_end` the furthest it may
/// reach (`t` + the slice span, at most `now`), `page` the charges read after
/// the previous slice's last one and before `span_end` (or, for the last
/// span, before `now` plus the slack), `full` whether the page was full.
///
/// - A page that is not full holds every charge up to `span_end`: the slice
///   is all of it and ends at `span_end`.
/// - A full page ends at its last charge's time: the slice takes the charges
///   before that millisecond (the rest of it comes again in the next page),
///   and our payments before it.
/// - If that time is at or before `t` (more charges in one millisecond than
///   a page), the slice takes the whole page and no payments, and the next
///   page goes on.
/// - If it is at or after `now` (the slack after the window), the slice takes
///   the whole page and every payment up to `now`.
pub(super) fn slice_end(
    t: OffsetDateTime,
    span_end: OffsetDateTime,
    now: OffsetDateTime,
    full: bool,
    page: &[AcquirerCharge],
) -> (OffsetDateTime, usize) {
    let last = match page.last() {
        Some(last) if full => last.created_at,
        _ => return (span_end, page.len()),
    };
    if last <= t {
        return (t, page.len());
    }
    if last >= now {
        return (now, page.len());
    }
    let end = last.min(span_end);
    let take = page.iter().take_while(|c| c.created_at < end).count();
    (end, take)
}

/// The first slice's span.
pub(super) const FIRST_SPAN: time::Duration = time::Duration::seconds(10);

/// The next slice's span, after one that covered `covered` of time and held
/// `payments` of ours: aiming at `target` payments, at most twice the last
/// span, at most `longest`, at least a millisecond.
pub(super) fn next_span(
    span: time::Duration,
    covered: time::Duration,
    payments: u64,
    target: u64,
    longest: time::Duration,
) -> time::Duration {
    if covered <= time::Duration::ZERO {
        return span;
    }
    let grown = span.as_seconds_f64() * 2.0;
    let aimed = if payments == 0 {
        grown
    } else {
        (covered.as_seconds_f64() * target as f64 / payments as f64).min(grown)
    };
    let secs = aimed.min(longest.as_seconds_f64()).max(0.001);
    time::Duration::seconds_f64(secs)
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{at, charge};
    use super::*;

    #[test]
    fn a_page_that_is_not_full_is_the_whole_slice() {
        let page = [charge("a", 5, true, 0), charge("b", 7, true, 0)];
        assert_eq!(slice_end(at(0), at(60), at(100), false, &page), (at(60), 2));
        assert_eq!(slice_end(at(0), at(60), at(100), false, &[]), (at(60), 0));
    }

    #[test]
    fn a_full_page_ends_before_its_last_millisecond() {
        let page = [
            charge("a", 5, true, 0),
            charge("b", 7, true, 0),
            charge("c", 7, true, 0),
        ];
        // The charges of millisecond 7 come again with the next page.
        assert_eq!(slice_end(at(0), at(60), at(100), true, &page), (at(7), 1));
    }

    #[test]
    fn a_full_page_before_the_slice_or_in_one_millisecond_is_taken_whole() {
        let slack = [charge("a", -50, true, 0), charge("b", -40, true, 0)];
        assert_eq!(slice_end(at(0), at(60), at(100), true, &slack), (at(0), 2));
        let dense = [charge("a", 0, true, 0), charge("b", 0, true, 0)];
        assert_eq!(slice_end(at(0), at(60), at(100), true, &dense), (at(0), 2));
        let late = [charge("a", 99, true, 0), charge("b", 130, true, 0)];
        assert_eq!(
            slice_end(at(90), at(100), at(100), true, &late),
            (at(100), 2),
            "the slack after the window: every payment up to now"
        );
    }

    #[test]
    fn slices_grow_over_quiet_time_and_shrink_over_busy_time() {
        let s = time::Duration::seconds;
        let longest = s(600);
        assert_eq!(next_span(s(10), s(10), 0, 1000, longest), s(20), "doubles");
        assert_eq!(next_span(s(400), s(400), 0, 1000, longest), longest);
        assert_eq!(next_span(s(10), s(10), 500, 1000, longest), s(20));
        assert_eq!(next_span(s(10), s(10), 4000, 1000, longest), s_f(2.5));
        assert_eq!(
            next_span(s(10), s(2), 2000, 1000, longest),
            s(1),
            "a short slice"
        );
        assert_eq!(
            next_span(s(10), s(0), 5, 1000, longest),
            s(10),
            "covered nothing"
        );
        assert_eq!(
            next_span(s(1), s(1), u64::MAX, 1000, longest),
            time::Duration::MILLISECOND
        );
    }

    fn s_f(secs: f64) -> time::Duration {
        time::Duration::seconds_f64(secs)
    }
}
