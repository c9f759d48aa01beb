-- chargeonce on SQLite (the embedded store): shops, payments, idempotency keys.
-- Times are INTEGER unix milliseconds, compared with SQLite's own clock.

CREATE TABLE shops (
    id            TEXT PRIMARY KEY,
    secret_sha256 BLOB NOT NULL CHECK (length(secret_sha256) = 32),
    created_at    INTEGER NOT NULL
) STRICT;

CREATE TABLE payments (
    id                  TEXT PRIMARY KEY,
    shop_id             TEXT NOT NULL REFERENCES shops (id),
    idempotency_key     TEXT NOT NULL,
    reference           TEXT NOT NULL,
    amount_minor        INTEGER NOT NULL CHECK (amount_minor > 0),
    currency            TEXT NOT NULL CHECK (length(currency) = 3),
    token               TEXT NOT NULL,
    status              TEXT NOT NULL CHECK (status IN ('pending', 'succeeded', 'declined')),
    acquirer_key        TEXT NOT NULL UNIQUE,
    provider_payment_id TEXT,
    decline_code        TEXT,
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL
) STRICT;

-- One order has at most one live (pending or succeeded) payment, whatever keys are used.
CREATE UNIQUE INDEX payments_one_live_per_order
    ON payments (shop_id, reference) WHERE status IN ('pending', 'succeeded');
CREATE INDEX payments_by_reference ON payments (shop_id, reference, created_at);

CREATE TABLE idempotency_keys (
    shop_id          TEXT NOT NULL REFERENCES shops (id),
    key              TEXT NOT NULL,
    fingerprint      BLOB NOT NULL CHECK (length(fingerprint) = 32),
    method           TEXT NOT NULL,
    path             TEXT NOT NULL,
    recovery_point   TEXT NOT NULL CHECK (recovery_point IN ('payment_created', 'order_already_paid', 'finished')),
    lease_token      TEXT,
    locked_until     INTEGER,
    payment_id       TEXT REFERENCES payments (id) DEFERRABLE INITIALLY DEFERRED,
    response_status  INTEGER,
    response_headers TEXT,
    response_body    BLOB,
    created_at       INTEGER NOT NULL,
    expires_at       INTEGER NOT NULL,
    -- The final arbiter of races: one row per (shop, key).
    PRIMARY KEY (shop_id, key),
    CHECK ((recovery_point = 'finished') = (response_status IS NOT NULL))
) STRICT;

CREATE INDEX idempotency_keys_expired ON idempotency_keys (expires_at) WHERE recovery_point = 'finished';
CREATE INDEX idempotency_keys_unfinished ON idempotency_keys (locked_until) WHERE recovery_point <> 'finished';
