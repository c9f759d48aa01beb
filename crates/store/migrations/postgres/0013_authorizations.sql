-- Authorizations (issue 34): a payment made with `capture_method = 'manual'`
-- only holds its amount at the acquirer; captures take parts of it, each under
-- its own key, until one is final or the hold is used up; a void (or the
-- authorization's expiry) releases the rest.
--
-- The hold lives on the payment's row, so one row lock serialises every move
-- of one authorization (captures from several instances, a void racing a
-- capture) and the CHECK below keeps the money invariants whatever a
-- statement does: captured plus reserved never exceeds the amount, refunds
-- never exceed what was captured. `hold` is the judgement's state
-- (chargeonce_core::authorization::Hold), NULL exactly for payments charged
-- at once; `status` keeps saying what the acquirer's charge call did
-- (`succeeded`: authorized), and the payment's shown status is derived from
-- both. Adding columns with constant defaults rewrites nothing. A CHECK that
-- evaluates to NULL passes, so a NULL `hold` takes its own branch and the
-- function's comparisons of a manual row never see one (its columns are NOT
-- NULL but `hold` and the expiry, checked first).
ALTER TABLE payments
    ADD COLUMN capture_method           TEXT NOT NULL DEFAULT 'automatic',
    ADD COLUMN hold                     TEXT,
    ADD COLUMN authorization_expires_at TIMESTAMPTZ,
    ADD COLUMN captured_minor           BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN capture_reserved_minor   BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN captures_in_flight       INTEGER NOT NULL DEFAULT 0;
-- The check of a manual row lives in a function: PostgreSQL prepares every
-- CHECK expression of a table for each statement that writes a row of it, so
-- the hot path (a payment charged at once: one insert, one settle) pays for
-- the whole expression tree on every statement even though only its first
-- branch is evaluated. Written inline it cost the fresh-payment pgbench script
-- (bench/fresh_payment.sql) about 6 % of its throughput here; behind a
-- plpgsql call (not inlined) about 2 %. The rule is the same.
CREATE FUNCTION payments_hold_valid(
    capture_method TEXT, hold TEXT, authorization_expires_at TIMESTAMPTZ, amount_minor BIGINT,
    captured_minor BIGINT, capture_reserved_minor BIGINT, captures_in_flight INTEGER,
    refund_reserved_minor BIGINT
) RETURNS BOOLEAN LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    RETURN capture_method = 'manual'
        AND hold IN ('open', 'closing', 'releasing_void', 'releasing_expiry', 'captured',
            'released_void', 'released_expiry')
        AND authorization_expires_at IS NOT NULL
        AND captured_minor >= 0 AND capture_reserved_minor >= 0
        AND captured_minor + capture_reserved_minor <= amount_minor
        AND captures_in_flight >= 0
        AND (captures_in_flight = 0) = (capture_reserved_minor = 0)
        AND refund_reserved_minor <= captured_minor;
END
$$;
ALTER TABLE payments ADD CONSTRAINT payments_hold_check CHECK (
    CASE WHEN hold IS NULL
         THEN capture_method = 'automatic' AND authorization_expires_at IS NULL
              AND captured_minor = 0 AND capture_reserved_minor = 0 AND captures_in_flight = 0
         ELSE payments_hold_valid(capture_method, hold, authorization_expires_at, amount_minor,
              captured_minor, capture_reserved_minor, captures_in_flight, refund_reserved_minor)
    END
);

-- An authorization released with nothing captured took no money: its order is
-- free again, as after a decline. `live_reference` (migration 0009) is
-- generated, and PostgreSQL 15 cannot change a generated column's expression,
-- so it is dropped and added again with its unique index (one rewrite of the
-- table, here). The settle of a payment still changes none of its inputs but
-- `status`, so it stays a HOT update.
DROP INDEX payments_one_live_per_order;
ALTER TABLE payments DROP COLUMN live_reference;
ALTER TABLE payments ADD COLUMN live_reference TEXT
    GENERATED ALWAYS AS (
        CASE WHEN status IN ('pending', 'succeeded')
              AND (hold IS NULL OR captured_minor > 0
                   OR hold NOT IN ('released_void', 'released_expiry'))
             THEN reference END
    ) STORED;
CREATE UNIQUE INDEX payments_one_live_per_order ON payments (shop_id, live_reference);

-- The expiry worker's queue: open holds by when they expire (and those whose
-- release by expiry was begun, to resume it). Only manual
-- payments enter it; a payment charged at once never changes `hold` (NULL),
-- so its updates stay HOT.
CREATE INDEX payments_holds_expiring ON payments (authorization_expires_at)
    WHERE hold IN ('open', 'releasing_expiry');

-- One row per capture, keyed by shop first (the distribution column of
-- docs/scaling.md). Its acquirer key is derived from its id, unique per shop.
CREATE TABLE captures (
    shop_id             TEXT NOT NULL REFERENCES shops (id),
    id                  TEXT NOT NULL,
    payment_id          TEXT NOT NULL REFERENCES payments (id),
    idempotency_key     TEXT NOT NULL,
    amount_minor        BIGINT NOT NULL CHECK (amount_minor > 0),
    currency            TEXT NOT NULL CHECK (length(currency) = 3),
    is_final            BOOLEAN NOT NULL,
    status              TEXT NOT NULL CHECK (status IN ('pending', 'succeeded', 'failed')),
    acquirer_key        TEXT NOT NULL,
    provider_capture_id TEXT,
    failure_code        TEXT,
    created_at          TIMESTAMPTZ NOT NULL,
    updated_at          TIMESTAMPTZ NOT NULL DEFAULT now(),
    PRIMARY KEY (shop_id, id),
    UNIQUE (shop_id, acquirer_key),
    CHECK ((status = 'failed') = (failure_code IS NOT NULL))
);
CREATE INDEX captures_by_payment ON captures (shop_id, payment_id, created_at, id);

-- A capture key names its capture; a void key names its payment (recovery
-- point `void_requested`). Merchant events name the capture they are of.
ALTER TABLE idempotency_keys ADD COLUMN capture_id TEXT;
ALTER TABLE idempotency_keys ADD CONSTRAINT idempotency_keys_capture_fkey
    FOREIGN KEY (shop_id, capture_id) REFERENCES captures (shop_id, id)
    DEFERRABLE INITIALLY DEFERRED;
ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_recovery_point_check;
ALTER TABLE idempotency_keys ADD CONSTRAINT idempotency_keys_recovery_point_check
    CHECK (recovery_point IN ('payment_created', 'order_already_paid', 'refund_created',
        'cancel_requested', 'capture_created', 'void_requested', 'finished')) NOT VALID;
ALTER TABLE idempotency_keys VALIDATE CONSTRAINT idempotency_keys_recovery_point_check;

ALTER TABLE events ADD COLUMN capture_id TEXT;
ALTER TABLE events DROP CONSTRAINT events_event_type_check;
ALTER TABLE events ADD CONSTRAINT events_event_type_check
    CHECK (event_type IN ('payment.succeeded', 'payment.declined', 'payment.canceled',
        'payment.authorized', 'payment.voided', 'payment.expired',
        'capture.succeeded', 'capture.failed',
        'refund.succeeded', 'refund.failed')) NOT VALID;
ALTER TABLE events VALIDATE CONSTRAINT events_event_type_check;
