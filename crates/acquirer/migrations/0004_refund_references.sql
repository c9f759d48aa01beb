-- Refunds at a provider that ignores keys (issue 13): without idempotency one
-- acquirer key can have several refund rows, so the key stays unique only
-- among rows recorded while idempotency was on (`deduplicated = 1`), as for
-- charges. Each refund carries the caller's reference (our refund id), by
-- which a caller that cannot rely on keys looks it up before sending it again.
-- SQLite cannot drop a UNIQUE constraint, so the table is rebuilt.
CREATE TABLE acquirer_refunds_v4 (
    id            TEXT    NOT NULL PRIMARY KEY,
    charge_id     TEXT    NOT NULL REFERENCES acquirer_ledger (id),
    acquirer_key  TEXT    NOT NULL,
    -- The caller's id of the refund; NULL for whole refunds by charge id.
    reference     TEXT,
    amount_minor  INTEGER NOT NULL CHECK (amount_minor > 0),
    currency      TEXT    NOT NULL CHECK (length(currency) = 3),
    created_at    INTEGER NOT NULL,
    -- 1 when recorded by an idempotent acquirer (one row per key), 0 otherwise.
    deduplicated  INTEGER NOT NULL DEFAULT 1 CHECK (deduplicated IN (0, 1))
) STRICT;

INSERT INTO acquirer_refunds_v4 (id, charge_id, acquirer_key, reference, amount_minor, currency,
                                 created_at, deduplicated)
SELECT id, charge_id, acquirer_key, NULL, amount_minor, currency, created_at, 1
FROM acquirer_refunds;

DROP TABLE acquirer_refunds;
ALTER TABLE acquirer_refunds_v4 RENAME TO acquirer_refunds;
CREATE UNIQUE INDEX acquirer_refunds_key ON acquirer_refunds (acquirer_key) WHERE deduplicated = 1;
CREATE INDEX acquirer_refunds_charge ON acquirer_refunds (charge_id, reference);
