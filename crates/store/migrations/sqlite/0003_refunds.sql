-- Issue 6: refunds.
--
-- A refund reserves its amount on the payment in phase 1 (a conditional
-- update in the same transaction as the key row and the refund row), so
-- concurrent refunds under different keys never exceed the captured amount.
-- A refund the acquirer refuses gives its reservation back. The payment's
-- status never changes for a refund: the one-live-payment-per-order index
-- keeps seeing a refunded payment as `succeeded`.
ALTER TABLE payments ADD COLUMN refund_reserved_minor INTEGER NOT NULL DEFAULT 0
    CHECK (refund_reserved_minor >= 0 AND refund_reserved_minor <= amount_minor);
ALTER TABLE payments ADD COLUMN refunded_minor INTEGER NOT NULL DEFAULT 0
    CHECK (refunded_minor >= 0 AND refunded_minor <= refund_reserved_minor);

CREATE TABLE refunds (
    id                 TEXT PRIMARY KEY,
    shop_id            TEXT NOT NULL REFERENCES shops (id),
    payment_id         TEXT NOT NULL REFERENCES payments (id),
    idempotency_key    TEXT NOT NULL,
    amount_minor       INTEGER NOT NULL CHECK (amount_minor > 0),
    currency           TEXT NOT NULL CHECK (length(currency) = 3),
    status             TEXT NOT NULL CHECK (status IN ('pending', 'succeeded', 'failed')),
    -- Derived from the refund id at claim; never the payment's.
    acquirer_key       TEXT NOT NULL UNIQUE,
    provider_refund_id TEXT,
    failure_code       TEXT,
    created_at         INTEGER NOT NULL,
    updated_at         INTEGER NOT NULL
) STRICT;

CREATE INDEX refunds_by_payment ON refunds (payment_id, created_at);

-- SQLite cannot change a CHECK constraint in place: the key table is rebuilt
-- with the new recovery point and the refund column.
CREATE TABLE idempotency_keys_v3 (
    shop_id          TEXT NOT NULL REFERENCES shops (id),
    key              TEXT NOT NULL,
    fingerprint      BLOB NOT NULL CHECK (length(fingerprint) = 32),
    method           TEXT NOT NULL,
    path             TEXT NOT NULL,
    recovery_point   TEXT NOT NULL CHECK (recovery_point IN ('payment_created', 'order_already_paid', 'refund_created', 'finished')),
    lease_token      TEXT,
    locked_until     INTEGER,
    payment_id       TEXT REFERENCES payments (id) DEFERRABLE INITIALLY DEFERRED,
    response_status  INTEGER,
    response_headers TEXT,
    response_body    BLOB,
    created_at       INTEGER NOT NULL,
    expires_at       INTEGER NOT NULL,
    replays          INTEGER NOT NULL DEFAULT 0,
    refund_id        TEXT REFERENCES refunds (id) DEFERRABLE INITIALLY DEFERRED,
    -- The final arbiter of races: one row per (shop, key).
    PRIMARY KEY (shop_id, key),
    CHECK ((recovery_point = 'finished') = (response_status IS NOT NULL))
) STRICT;

INSERT INTO idempotency_keys_v3 (shop_id, key, fingerprint, method, path, recovery_point,
    lease_token, locked_until, payment_id, response_status, response_headers, response_body,
    created_at, expires_at, replays)
SELECT shop_id, key, fingerprint, method, path, recovery_point,
    lease_token, locked_until, payment_id, response_status, response_headers, response_body,
    created_at, expires_at, replays
FROM idempotency_keys;

DROP TABLE idempotency_keys;
ALTER TABLE idempotency_keys_v3 RENAME TO idempotency_keys;

CREATE INDEX idempotency_keys_expired ON idempotency_keys (expires_at) WHERE recovery_point = 'finished';
CREATE INDEX idempotency_keys_unfinished ON idempotency_keys (locked_until) WHERE recovery_point <> 'finished';
