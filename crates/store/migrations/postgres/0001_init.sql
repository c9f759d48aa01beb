-- chargeonce on PostgreSQL: shops, payments, idempotency keys.
-- Lease deadlines and expiry are compared with the database's now(), never an instance's clock.

CREATE TABLE shops (
    id            TEXT PRIMARY KEY,
    secret_sha256 BYTEA NOT NULL CHECK (length(secret_sha256) = 32),
    created_at    TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE payments (
    id                  TEXT PRIMARY KEY,
    shop_id             TEXT NOT NULL REFERENCES shops (id),
    idempotency_key     TEXT NOT NULL,
    reference           TEXT NOT NULL,
    amount_minor        BIGINT NOT NULL CHECK (amount_minor > 0),
    currency            TEXT NOT NULL CHECK (length(currency) = 3),
    token               TEXT NOT NULL,
    status              TEXT NOT NULL CHECK (status IN ('pending', 'succeeded', 'declined')),
    acquirer_key        TEXT NOT NULL UNIQUE,
    provider_payment_id TEXT,
    decline_code        TEXT,
    created_at          TIMESTAMPTZ NOT NULL,
    updated_at          TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- One order has at most one live (pending or succeeded) payment, whatever keys are used.
CREATE UNIQUE INDEX payments_one_live_per_order
    ON payments (shop_id, reference) WHERE status IN ('pending', 'succeeded');
CREATE INDEX payments_by_reference ON payments (shop_id, reference, created_at);

CREATE TABLE idempotency_keys (
    shop_id          TEXT NOT NULL REFERENCES shops (id),
    key              TEXT NOT NULL,
    fingerprint      BYTEA NOT NULL CHECK (length(fingerprint) = 32),
    method           TEXT NOT NULL,
    path             TEXT NOT NULL,
    recovery_point   TEXT NOT NULL CHECK (recovery_point IN ('payment_created', 'order_already_paid', 'finished')),
    lease_token      UUID,
    locked_until     TIMESTAMPTZ,
    payment_id       TEXT REFERENCES payments (id) DEFERRABLE INITIALLY DEFERRED,
    response_status  INTEGER,
    response_headers TEXT,
    response_body    BYTEA,
    created_at       TIMESTAMPTZ NOT NULL DEFAULT now(),
    expires_at       TIMESTAMPTZ NOT NULL,
    -- The final arbiter of races: one row per (shop, key).
    PRIMARY KEY (shop_id, key),
    CHECK ((recovery_point = 'finished') = (response_status IS NOT NULL))
);

CREATE INDEX idempotency_keys_expired ON idempotency_keys (expires_at) WHERE recovery_point = 'finished';
CREATE INDEX idempotency_keys_unfinished ON idempotency_keys (locked_until) WHERE recovery_point <> 'finished';
