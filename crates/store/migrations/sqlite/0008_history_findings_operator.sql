-- A payment's history, the reconciler's findings, the operator's credential (issue 17).
-- Times are unix milliseconds, as everywhere in this store.

-- An append-only log per payment (and its refunds), written by the store in the
-- same transaction as each change it records. `event` is the entry as JSON
-- (chargeonce_core::history::HistoryEvent, tagged by `type`); `kind` repeats its
-- tag. Kept as long as the payment (payments are never deleted). `seq` is the
-- rowid: increasing, so a payment's entries are in order by it.
CREATE TABLE payment_history (
    seq         INTEGER PRIMARY KEY,
    payment_id  TEXT NOT NULL,
    refund_id   TEXT,
    at          INTEGER NOT NULL,
    kind        TEXT NOT NULL,
    event       TEXT NOT NULL
) STRICT;
CREATE INDEX payment_history_by_payment ON payment_history (payment_id, seq);

-- A key's repeats by answer (see the PostgreSQL migration).
ALTER TABLE idempotency_keys ADD COLUMN replayed INTEGER NOT NULL DEFAULT 0;
ALTER TABLE idempotency_keys ADD COLUMN last_replayed_at INTEGER;
ALTER TABLE idempotency_keys ADD COLUMN conflicted INTEGER NOT NULL DEFAULT 0;
ALTER TABLE idempotency_keys ADD COLUMN last_conflicted_at INTEGER;
ALTER TABLE idempotency_keys ADD COLUMN mismatched INTEGER NOT NULL DEFAULT 0;
ALTER TABLE idempotency_keys ADD COLUMN last_mismatched_at INTEGER;

-- What the reconciler found (see the PostgreSQL migration).
CREATE TABLE reconciliation_findings (
    id                  INTEGER PRIMARY KEY,
    identity            TEXT NOT NULL UNIQUE,
    kind                TEXT NOT NULL
        CHECK (kind = 'duplicate_charge' OR kind = 'orphan_charge'
            OR kind = 'missing_charge' OR kind = 'mismatch'),
    shop_id             TEXT NOT NULL,
    reference           TEXT NOT NULL,
    payment_id          TEXT,
    charge_ids          TEXT NOT NULL,
    amount_minor        INTEGER,
    currency            TEXT,
    detail              TEXT NOT NULL,
    first_seen          INTEGER NOT NULL,
    last_seen           INTEGER NOT NULL,
    seen                INTEGER NOT NULL DEFAULT 1,
    resolved_at         INTEGER,
    resolution          TEXT CHECK (resolution = 'refunded' OR resolution = 'manual'),
    resolved_by         TEXT,
    resolution_note     TEXT,
    refunded_charge_ids TEXT,
    CHECK ((resolved_at IS NULL) = (resolution IS NULL))
) STRICT;
CREATE INDEX findings_by_last_seen ON reconciliation_findings (last_seen DESC, id DESC);
CREATE INDEX findings_by_payment ON reconciliation_findings (payment_id)
    WHERE payment_id IS NOT NULL;

-- The operator console's one credential (see the PostgreSQL migration).
CREATE TABLE operator_credential (
    id            INTEGER PRIMARY KEY CHECK (id = 1),
    secret_sha256 BLOB NOT NULL CHECK (length(secret_sha256) = 32),
    created_at    INTEGER NOT NULL
) STRICT;

-- Every event of one payment, in order (the console's payment page), where only
-- the undelivered ones were indexed: the full index replaces the partial one,
-- which the relay's "no earlier undelivered event of this payment" probe used,
-- so a fresh payment's event still costs one index entry here.
DROP INDEX events_open_by_payment;
CREATE INDEX events_by_payment ON events (payment_id, seq);
