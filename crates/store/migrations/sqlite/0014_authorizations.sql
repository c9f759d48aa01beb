-- Authorizations (issue 34): a payment made with `capture_method = 'manual'`
-- only holds its amount at the acquirer; captures take parts of it, each under
-- its own key, until one is final or the hold is used up; a void (or the
-- authorization's expiry) releases the rest.
--
-- The hold lives on the payment's row, so the one writer (and, in
-- PostgreSQL, the row lock) serialises every move of one authorization, and
-- the CHECK keeps the money invariants whatever a statement does: captured
-- plus reserved never exceeds the amount, refunds never exceed what was
-- captured. `hold` is the judgement's state
-- (chargeonce_core::authorization::Hold), NULL exactly for payments charged
-- at once; `status` keeps saying what the acquirer's charge call did
-- (`succeeded`: authorized). An authorization released with nothing
-- captured took no money: it leaves its order's live slot for its own id, as
-- a declined payment does. A capture key names its capture, a void key its
-- payment (`void_requested`); merchant events name their capture.
--
-- SQLite cannot change a CHECK constraint in place: the three tables are
-- rebuilt as migrations 0006 and 0012 did (new table, copy, drop, rename,
-- indexes), with foreign keys off; the store checks `PRAGMA foreign_key_check`
-- after. The captures table is new.

CREATE TABLE payments_v14 (
    id                  TEXT PRIMARY KEY,
    shop_id             TEXT NOT NULL REFERENCES shops (id),
    idempotency_key     TEXT NOT NULL,
    reference           TEXT NOT NULL,
    amount_minor        INTEGER NOT NULL CHECK (amount_minor > 0),
    currency            TEXT NOT NULL CHECK (length(currency) = 3),
    token               TEXT NOT NULL,
    status              TEXT NOT NULL
        CHECK (status = 'pending' OR status = 'succeeded' OR status = 'declined'
            OR status = 'canceled'),
    acquirer_key        TEXT NOT NULL UNIQUE,
    provider_payment_id TEXT,
    decline_code        TEXT,
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL,
    refund_reserved_minor INTEGER NOT NULL DEFAULT 0
        CHECK (refund_reserved_minor >= 0 AND refund_reserved_minor <= amount_minor),
    refunded_minor      INTEGER NOT NULL DEFAULT 0
        CHECK (refunded_minor >= 0 AND refunded_minor <= refund_reserved_minor),
    claimed_by          TEXT,
    order_slot          TEXT NOT NULL DEFAULT ''
        CHECK (order_slot = ''
            OR ((status = 'declined' OR status = 'canceled'
                 OR (hold IS NOT NULL
                     AND (hold = 'released_void' OR hold = 'released_expiry')
                     AND captured_minor = 0))
                AND order_slot = id)),
    metadata            TEXT CHECK (metadata IS NULL OR substr(metadata, 1, 1) = '{'),
    capture_method      TEXT NOT NULL DEFAULT 'automatic',
    hold                TEXT,
    authorization_expires_at INTEGER,
    captured_minor      INTEGER NOT NULL DEFAULT 0,
    capture_reserved_minor INTEGER NOT NULL DEFAULT 0,
    captures_in_flight  INTEGER NOT NULL DEFAULT 0,
    CHECK ((capture_method = 'automatic' AND hold IS NULL AND authorization_expires_at IS NULL
            AND captured_minor = 0 AND capture_reserved_minor = 0 AND captures_in_flight = 0)
        OR (capture_method = 'manual' AND hold IS NOT NULL
            AND (hold = 'open' OR hold = 'closing' OR hold = 'releasing_void'
                OR hold = 'releasing_expiry' OR hold = 'captured' OR hold = 'released_void'
                OR hold = 'released_expiry')
            AND authorization_expires_at IS NOT NULL
            AND captured_minor >= 0 AND capture_reserved_minor >= 0
            AND captured_minor + capture_reserved_minor <= amount_minor
            AND captures_in_flight >= 0
            AND (captures_in_flight = 0) = (capture_reserved_minor = 0)
            AND refund_reserved_minor <= captured_minor))
) STRICT;
INSERT INTO payments_v14 (id, shop_id, idempotency_key, reference, amount_minor, currency,
    token, status, acquirer_key, provider_payment_id, decline_code, created_at, updated_at,
    refund_reserved_minor, refunded_minor, claimed_by, order_slot, metadata)
SELECT id, shop_id, idempotency_key, reference, amount_minor, currency,
    token, status, acquirer_key, provider_payment_id, decline_code, created_at, updated_at,
    refund_reserved_minor, refunded_minor, claimed_by, order_slot, metadata
FROM payments;
DROP TABLE payments;
ALTER TABLE payments_v14 RENAME TO payments;
CREATE INDEX payments_pending ON payments (created_at) WHERE status = 'pending';
CREATE INDEX payments_created_at ON payments (created_at);
CREATE UNIQUE INDEX payments_by_order ON payments (shop_id, reference, order_slot);
CREATE INDEX payments_by_shop ON payments (shop_id, created_at, id);
CREATE INDEX payments_holds_expiring ON payments (authorization_expires_at)
    WHERE hold = 'open' OR hold = 'releasing_expiry';

CREATE TABLE captures (
    shop_id             TEXT NOT NULL REFERENCES shops (id),
    id                  TEXT NOT NULL,
    payment_id          TEXT NOT NULL REFERENCES payments (id),
    idempotency_key     TEXT NOT NULL,
    amount_minor        INTEGER NOT NULL CHECK (amount_minor > 0),
    currency            TEXT NOT NULL CHECK (length(currency) = 3),
    is_final            INTEGER NOT NULL CHECK (is_final = 0 OR is_final = 1),
    status              TEXT NOT NULL
        CHECK (status = 'pending' OR status = 'succeeded' OR status = 'failed'),
    acquirer_key        TEXT NOT NULL,
    provider_capture_id TEXT,
    failure_code        TEXT,
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL,
    PRIMARY KEY (shop_id, id),
    UNIQUE (shop_id, acquirer_key),
    CHECK ((status = 'failed') = (failure_code IS NOT NULL))
) STRICT;
CREATE INDEX captures_by_payment ON captures (shop_id, payment_id, created_at, id);

CREATE TABLE idempotency_keys_v14 (
    shop_id          TEXT NOT NULL REFERENCES shops (id),
    key              TEXT NOT NULL,
    fingerprint      BLOB NOT NULL CHECK (length(fingerprint) = 32),
    method           TEXT NOT NULL,
    path             TEXT NOT NULL,
    recovery_point   TEXT NOT NULL
        CHECK (recovery_point = 'payment_created' OR recovery_point = 'order_already_paid'
            OR recovery_point = 'refund_created' OR recovery_point = 'cancel_requested'
            OR recovery_point = 'capture_created' OR recovery_point = 'void_requested'
            OR recovery_point = 'finished'),
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
    last_repeat_at   INTEGER,
    lease_holder     TEXT,
    replayed         INTEGER NOT NULL DEFAULT 0,
    last_replayed_at INTEGER,
    conflicted       INTEGER NOT NULL DEFAULT 0,
    last_conflicted_at INTEGER,
    mismatched       INTEGER NOT NULL DEFAULT 0,
    last_mismatched_at INTEGER,
    capture_id       TEXT,
    FOREIGN KEY (shop_id, capture_id) REFERENCES captures (shop_id, id)
        DEFERRABLE INITIALLY DEFERRED,
    -- The final arbiter of races: one row per (shop, key).
    PRIMARY KEY (shop_id, key),
    CHECK ((recovery_point = 'finished') = (response_status IS NOT NULL))
) STRICT;
INSERT INTO idempotency_keys_v14 (shop_id, key, fingerprint, method, path, recovery_point,
    lease_token, locked_until, payment_id, response_status, response_headers, response_body,
    created_at, expires_at, replays, refund_id, last_repeat_at, lease_holder, replayed,
    last_replayed_at, conflicted, last_conflicted_at, mismatched, last_mismatched_at)
SELECT shop_id, key, fingerprint, method, path, recovery_point,
    lease_token, locked_until, payment_id, response_status, response_headers, response_body,
    created_at, expires_at, replays, refund_id, last_repeat_at, lease_holder, replayed,
    last_replayed_at, conflicted, last_conflicted_at, mismatched, last_mismatched_at
FROM idempotency_keys;
DROP TABLE idempotency_keys;
ALTER TABLE idempotency_keys_v14 RENAME TO idempotency_keys;
CREATE INDEX idempotency_keys_expired ON idempotency_keys (expires_at) WHERE recovery_point = 'finished';
CREATE INDEX idempotency_keys_unfinished ON idempotency_keys (locked_until) WHERE recovery_point <> 'finished';
CREATE INDEX idempotency_keys_by_payment ON idempotency_keys (payment_id);
CREATE INDEX idempotency_keys_by_refund ON idempotency_keys (refund_id)
    WHERE refund_id IS NOT NULL;
CREATE INDEX idempotency_keys_by_capture ON idempotency_keys (shop_id, capture_id)
    WHERE capture_id IS NOT NULL;

CREATE TABLE events_v14 (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    id              TEXT NOT NULL UNIQUE,
    shop_id         TEXT NOT NULL REFERENCES shops (id),
    event_type      TEXT NOT NULL
        CHECK (event_type = 'payment.succeeded' OR event_type = 'payment.declined'
            OR event_type = 'payment.canceled'
            OR event_type = 'payment.authorized' OR event_type = 'payment.voided'
            OR event_type = 'payment.expired'
            OR event_type = 'capture.succeeded' OR event_type = 'capture.failed'
            OR event_type = 'refund.succeeded' OR event_type = 'refund.failed'),
    payment_id      TEXT NOT NULL REFERENCES payments (id),
    refund_id       TEXT REFERENCES refunds (id),
    payload         BLOB NOT NULL,
    created_at      INTEGER NOT NULL,
    due_since       INTEGER NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL,
    locked_until    INTEGER,
    delivered_at    INTEGER,
    gave_up_at      INTEGER,
    last_status     INTEGER,
    last_error      TEXT,
    capture_id      TEXT
) STRICT;
INSERT INTO events_v14 (seq, id, shop_id, event_type, payment_id, refund_id, payload,
    created_at, due_since, attempts, next_attempt_at, locked_until, delivered_at, gave_up_at,
    last_status, last_error)
SELECT seq, id, shop_id, event_type, payment_id, refund_id, payload,
    created_at, due_since, attempts, next_attempt_at, locked_until, delivered_at, gave_up_at,
    last_status, last_error
FROM events;
-- AUTOINCREMENT never reuses a sequence number, even one whose row is gone:
-- the new table starts from the old one's high-water mark (as in 0006).
INSERT INTO sqlite_sequence (name, seq)
SELECT 'events_v14', seq FROM sqlite_sequence WHERE name = 'events'
    AND NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'events_v14');
UPDATE sqlite_sequence
SET seq = MAX(seq, COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0))
WHERE name = 'events_v14';
DROP TABLE events;
ALTER TABLE events_v14 RENAME TO events;
CREATE INDEX events_by_shop ON events (shop_id, seq);
CREATE INDEX events_due ON events (next_attempt_at)
    WHERE delivered_at IS NULL AND gave_up_at IS NULL;
CREATE INDEX events_by_payment ON events (payment_id, seq);
