-- Partial refunds: a charge may be refunded in several parts, each once per
-- refund key (the caller's acquirer key of the refund), never beyond the
-- charge. The reconciler's whole refunds use the key `refund-<charge id>`.
CREATE TABLE acquirer_refunds_v3 (
    id            TEXT    NOT NULL PRIMARY KEY,
    charge_id     TEXT    NOT NULL REFERENCES acquirer_ledger (id),
    -- A repeat with the same key finds this row and refunds nothing more.
    acquirer_key  TEXT    NOT NULL UNIQUE,
    amount_minor  INTEGER NOT NULL CHECK (amount_minor > 0),
    currency      TEXT    NOT NULL CHECK (length(currency) = 3),
    created_at    INTEGER NOT NULL
) STRICT;

INSERT INTO acquirer_refunds_v3 (id, charge_id, acquirer_key, amount_minor, currency, created_at)
SELECT id, charge_id, 'refund-' || charge_id, amount_minor, currency, created_at
FROM acquirer_refunds;

DROP TABLE acquirer_refunds;
ALTER TABLE acquirer_refunds_v3 RENAME TO acquirer_refunds;
CREATE INDEX acquirer_refunds_charge ON acquirer_refunds (charge_id);
