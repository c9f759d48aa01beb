-- The acquirer simulator's ledger: one row per charge attempt, the ground truth
-- of how much money moved. Rows are only ever inserted, never updated or deleted.
CREATE TABLE IF NOT EXISTS acquirer_ledger (
    -- The acquirer's id of the attempt: `ch_` and a UUIDv7.
    id            TEXT    NOT NULL PRIMARY KEY,
    -- The caller's idempotency key at the acquirer: one attempt per key, ever.
    acquirer_key  TEXT    NOT NULL UNIQUE,
    shop_id       TEXT    NOT NULL,
    payment_id    TEXT    NOT NULL,
    reference     TEXT    NOT NULL,
    -- Integer minor units of `currency` (kopecks for RUB). Never a float.
    amount_minor  INTEGER NOT NULL CHECK (amount_minor > 0),
    currency      TEXT    NOT NULL CHECK (length(currency) = 3),
    status        TEXT    NOT NULL CHECK (status IN ('succeeded', 'declined')),
    decline_code  TEXT,
    -- Unix time in milliseconds.
    created_at    INTEGER NOT NULL,
    CHECK ((status = 'declined') = (decline_code IS NOT NULL))
) STRICT;

CREATE INDEX IF NOT EXISTS acquirer_ledger_created_at ON acquirer_ledger (created_at, id);
CREATE INDEX IF NOT EXISTS acquirer_ledger_reference ON acquirer_ledger (shop_id, reference);
