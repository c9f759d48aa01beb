-- Issue 3: the standalone acquirer.
--
-- 1. The ledger may run without idempotency (like some real providers): then
--    one acquirer key can have several rows. The key stays unique among the
--    rows recorded while idempotency was on (`deduplicated = 1`). SQLite cannot
--    drop a UNIQUE constraint, so the table is rebuilt.
-- 2. Refunds: the money given back for a charge (whole charges, once each).
-- 3. An outbox of webhook events, delivered at least once.

CREATE TABLE acquirer_ledger_v2 (
    id            TEXT    NOT NULL PRIMARY KEY,
    -- The key the caller sent; unique among deduplicated rows.
    acquirer_key  TEXT    NOT NULL,
    shop_id       TEXT    NOT NULL,
    -- The caller's payment id: its reference for the charge.
    payment_id    TEXT    NOT NULL,
    reference     TEXT    NOT NULL,
    amount_minor  INTEGER NOT NULL CHECK (amount_minor > 0),
    currency      TEXT    NOT NULL CHECK (length(currency) = 3),
    status        TEXT    NOT NULL CHECK (status IN ('succeeded', 'declined')),
    decline_code  TEXT,
    created_at    INTEGER NOT NULL,
    -- 1 when recorded by an idempotent acquirer (one row per key), 0 otherwise.
    deduplicated  INTEGER NOT NULL DEFAULT 1 CHECK (deduplicated IN (0, 1)),
    CHECK ((status = 'declined') = (decline_code IS NOT NULL))
) STRICT;

INSERT INTO acquirer_ledger_v2
    (id, acquirer_key, shop_id, payment_id, reference, amount_minor, currency, status,
     decline_code, created_at, deduplicated)
SELECT id, acquirer_key, shop_id, payment_id, reference, amount_minor, currency, status,
       decline_code, created_at, 1
FROM acquirer_ledger;

DROP TABLE acquirer_ledger;
ALTER TABLE acquirer_ledger_v2 RENAME TO acquirer_ledger;

CREATE UNIQUE INDEX acquirer_ledger_key ON acquirer_ledger (acquirer_key) WHERE deduplicated = 1;
CREATE INDEX acquirer_ledger_created_at ON acquirer_ledger (created_at, id);
CREATE INDEX acquirer_ledger_reference ON acquirer_ledger (shop_id, reference);
CREATE INDEX acquirer_ledger_payment ON acquirer_ledger (payment_id);

CREATE TABLE acquirer_refunds (
    id            TEXT    NOT NULL PRIMARY KEY,
    -- Whole charges are refunded, once: a repeat finds this row.
    charge_id     TEXT    NOT NULL UNIQUE REFERENCES acquirer_ledger (id),
    amount_minor  INTEGER NOT NULL CHECK (amount_minor > 0),
    currency      TEXT    NOT NULL CHECK (length(currency) = 3),
    created_at    INTEGER NOT NULL
) STRICT;

CREATE TABLE acquirer_events (
    -- The event id: the same on every delivery attempt.
    id            TEXT    NOT NULL PRIMARY KEY,
    charge_id     TEXT    NOT NULL,
    type          TEXT    NOT NULL,
    -- The event as JSON, exactly as delivered.
    payload       TEXT    NOT NULL,
    created_at    INTEGER NOT NULL,
    -- Unix ms of the next delivery attempt.
    due_at        INTEGER NOT NULL,
    attempts      INTEGER NOT NULL DEFAULT 0,
    delivered_at  INTEGER
) STRICT;

CREATE INDEX acquirer_events_due ON acquirer_events (due_at) WHERE delivered_at IS NULL;
