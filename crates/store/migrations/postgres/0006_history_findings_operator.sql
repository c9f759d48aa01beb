-- A payment's history, the reconciler's findings, the operator's credential (issue 17).

-- An append-only log per payment (and its refunds), written by the store in the
-- same transaction as each change it records. `event` is the entry as JSON
-- (chargeonce_core::history::HistoryEvent, tagged by `type`); `kind` repeats its
-- tag for queries that count entries. Kept as long as the payment (payments are
-- never deleted). One index: a payment's entries in order.
CREATE TABLE payment_history (
    payment_id  TEXT NOT NULL,
    seq         BIGINT GENERATED ALWAYS AS IDENTITY,
    refund_id   TEXT,
    at          TIMESTAMPTZ NOT NULL DEFAULT now(),
    kind        TEXT NOT NULL,
    event       TEXT NOT NULL,
    PRIMARY KEY (payment_id, seq)
);

-- A key's repeats by answer, counted by the statement that reads the key for a
-- repeat (no write of their own) and by the batches of repeats an instance
-- answered from its cache. `replays`/`last_repeat_at` stay the total.
ALTER TABLE idempotency_keys
    ADD COLUMN replayed           BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN last_replayed_at   TIMESTAMPTZ,
    ADD COLUMN conflicted         BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN last_conflicted_at TIMESTAMPTZ,
    ADD COLUMN mismatched         BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN last_mismatched_at TIMESTAMPTZ;

-- What the reconciler found, one row per disagreement (`identity`: kind, shop,
-- order and sorted charge ids), seen again on later passes, resolved once.
CREATE TABLE reconciliation_findings (
    id                  BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    identity            TEXT NOT NULL UNIQUE,
    kind                TEXT NOT NULL
        CHECK (kind IN ('duplicate_charge', 'orphan_charge', 'missing_charge', 'mismatch')),
    shop_id             TEXT NOT NULL,
    reference           TEXT NOT NULL,
    payment_id          TEXT,
    charge_ids          TEXT NOT NULL,            -- a JSON array of strings
    amount_minor        BIGINT,
    currency            TEXT,
    detail              TEXT NOT NULL,
    first_seen          TIMESTAMPTZ NOT NULL DEFAULT now(),
    last_seen           TIMESTAMPTZ NOT NULL DEFAULT now(),
    seen                BIGINT NOT NULL DEFAULT 1,
    resolved_at         TIMESTAMPTZ,
    resolution          TEXT CHECK (resolution IN ('refunded', 'manual')),
    resolved_by         TEXT,
    resolution_note     TEXT,
    refunded_charge_ids TEXT,                     -- a JSON array, for 'refunded'
    CHECK ((resolved_at IS NULL) = (resolution IS NULL))
);
CREATE INDEX findings_by_last_seen ON reconciliation_findings (last_seen DESC, id DESC);
CREATE INDEX findings_by_payment ON reconciliation_findings (payment_id)
    WHERE payment_id IS NOT NULL;

-- The operator console's one credential: the SHA-256 of its secret, created at
-- the first start (or given by flag). Never a shop's secret.
CREATE TABLE operator_credential (
    id            SMALLINT PRIMARY KEY CHECK (id = 1),
    secret_sha256 BYTEA NOT NULL CHECK (length(secret_sha256) = 32),
    created_at    TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- Every event of one payment, in order (the console's payment page), where only
-- the undelivered ones were indexed: the full index replaces the partial one,
-- which the relay's "no earlier undelivered event of this payment" probe used,
-- so a fresh payment's event still costs one index entry here.
DROP INDEX events_open_by_payment;
CREATE INDEX events_by_payment ON events (payment_id, seq);
