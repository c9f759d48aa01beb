//! The ledger: one row per charge attempt, in SQLite. All of the simulator's SQL
//! lives here.
//!
//! The file is in WAL mode with `synchronous=FULL`. Charges are written by
//! one writer thread per process that commits the charges arriving together
//! in one transaction and one fsync (group commit, [`chargeonce_sqlite`]);
//! several processes may share the file, their transactions then take turns
//! on SQLite's lock. The schema is migrated by sqlx's migrator.
//!
//! This module holds the [`Ledger`] handle; `open` opens the file (or an
//! in-memory ledger), `rows` reads ledger rows, `charges` records and finds
//! charges, `refunds` records and lists refunds, and `outbox` keeps the
//! webhook events.

use chargeonce_sqlite::Database;

/// The columns of a ledger row, with the refunded and captured amounts, and
/// whether it was voided, joined in. Every query that reads charges selects
/// these, `FROM acquirer_ledger l`.
macro_rules! charge_columns {
    () => {
        "l.id, l.acquirer_key, l.shop_id, l.payment_id, l.reference, l.amount_minor, \
         l.currency, l.status, l.decline_code, l.created_at, l.capture_method, l.trace_id, \
         COALESCE((SELECT SUM(r.amount_minor) FROM acquirer_refunds r WHERE r.charge_id = l.id), 0) \
             AS refunded_minor, \
         COALESCE((SELECT SUM(c.amount_minor) FROM acquirer_captures c WHERE c.charge_id = l.id), 0) \
             AS captured_minor, \
         EXISTS (SELECT 1 FROM acquirer_captures c WHERE c.charge_id = l.id AND c.last = 1) \
             AS closed, \
         EXISTS (SELECT 1 FROM acquirer_voids v WHERE v.charge_id = l.id) AS voided \
         FROM acquirer_ledger l"
    };
}

mod captures;
mod charges;
mod open;
mod outbox;
mod refunds;
mod rows;

pub(crate) use captures::{CaptureRow, NewCaptureRow, VoidRow};
pub(crate) use outbox::OutboxEvent;
pub(crate) use refunds::{NewRefundRow, RefundRow};
pub(crate) use rows::unix_millis;

/// The ledger tables behind a writer thread and reader threads.
#[derive(Debug, Clone)]
pub(crate) struct Ledger {
    db: Database,
}

impl Ledger {
    /// Closes every connection (checkpointing the WAL when it is the last).
    pub(crate) async fn close(&self) {
        self.db.close().await;
    }
}
