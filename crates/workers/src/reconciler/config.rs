//! The reconciler's settings, and how a configured duration becomes a
//! `time` one.

use std::time::Duration;

/// Reconciler settings.
#[derive(Debug, Clone, Copy)]
pub struct ReconcilerConfig {
    /// Pause between passes (the background worker).
    pub interval: Duration,
    /// How old a pending payment must be before the acquirer is asked about it.
    pub pending_after: Duration,
    /// How far back the books are compared.
    pub window: Duration,
    /// Pending payments resolved per pass, and payments read per page.
    pub batch: u32,
    /// Refund duplicate charges at the acquirer.
    pub refund_duplicates: bool,
    /// The most acquirer charges one slice of the window holds.
    pub slice_charges: u32,
    /// The longest stretch of time one slice covers. Slices start at 10 s
    /// (or this, if shorter) and adapt to hold about two pages
    /// ([`Self::batch`]) of our payments: a page of payments is read from
    /// the slice's range of the `created_at` index, so a slice with many
    /// pages would read its range many times.
    pub slice_span: Duration,
    /// How far the acquirer's clock may be from ours: the window's charges
    /// are read this much wider on both sides.
    pub clock_slack: Duration,
    /// How far before the end of the last pass an incremental pass starts.
    pub overlap: Duration,
    /// How often the background worker compares the whole window again.
    pub full_every: Duration,
    /// Findings (and errors) kept in a report; the rest are logged and
    /// counted, not kept.
    pub max_findings: usize,
}

impl Default for ReconcilerConfig {
    fn default() -> Self {
        Self {
            interval: Duration::from_secs(60),
            pending_after: Duration::from_secs(30),
            window: Duration::from_secs(24 * 60 * 60),
            batch: 500,
            refund_duplicates: false,
            slice_charges: 5000,
            slice_span: Duration::from_secs(10 * 60),
            clock_slack: Duration::from_secs(5 * 60),
            overlap: Duration::from_secs(2 * 60),
            full_every: Duration::from_secs(6 * 60 * 60),
            max_findings: 1000,
        }
    }
}

/// A configured duration as a `time` one (saturating).
pub(super) fn duration(d: Duration) -> time::Duration {
    time::Duration::try_from(d).unwrap_or(time::Duration::MAX)
}
