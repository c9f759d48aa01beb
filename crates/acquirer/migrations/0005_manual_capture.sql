-- Manual capture (issue 34): a charge may only authorize (`capture_method =
-- 'manual'`: a `succeeded` manual charge is an authorization that holds its
-- amount), captures take parts of it, and a void releases the rest.
--
-- Captures are deduplicated on their acquirer key like charges and refunds
-- (`deduplicated = 1`); `reference` is the caller's capture id, what a
-- caller without keys looks its captures up by. A charge has at most one
-- void. Rows are only ever inserted.

ALTER TABLE acquirer_ledger ADD COLUMN capture_method TEXT NOT NULL DEFAULT 'automatic'
    CHECK (capture_method IN ('automatic', 'manual'));

CREATE TABLE acquirer_captures (
    -- The acquirer's id of the capture: `cp_` and a UUIDv7.
    id            TEXT    NOT NULL PRIMARY KEY,
    charge_id     TEXT    NOT NULL REFERENCES acquirer_ledger (id),
    acquirer_key  TEXT    NOT NULL,
    reference     TEXT,
    amount_minor  INTEGER NOT NULL CHECK (amount_minor > 0),
    currency      TEXT    NOT NULL CHECK (length(currency) = 3),
    -- 1: the last capture; the rest of the authorization is released with it.
    last          INTEGER NOT NULL CHECK (last IN (0, 1)),
    created_at    INTEGER NOT NULL,
    deduplicated  INTEGER NOT NULL DEFAULT 1 CHECK (deduplicated IN (0, 1))
) STRICT;

CREATE UNIQUE INDEX acquirer_captures_key ON acquirer_captures (acquirer_key)
    WHERE deduplicated = 1;
CREATE INDEX acquirer_captures_charge ON acquirer_captures (charge_id, reference);

CREATE TABLE acquirer_voids (
    -- The acquirer's id of the void: `vd_` and a UUIDv7.
    id             TEXT    NOT NULL PRIMARY KEY,
    charge_id      TEXT    NOT NULL UNIQUE REFERENCES acquirer_ledger (id),
    acquirer_key   TEXT    NOT NULL,
    released_minor INTEGER NOT NULL CHECK (released_minor > 0),
    currency       TEXT    NOT NULL CHECK (length(currency) = 3),
    created_at     INTEGER NOT NULL
) STRICT;
