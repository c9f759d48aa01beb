-- Cancel (issue 31): a pending payment can end `canceled` (a look-up after
-- the settle window found no charge: nothing was taken, and the order is
-- free again), a cancel request has a key of its own (recovery point
-- `cancel_requested`, naming the payment), and the merchant hears of it
-- (`payment.canceled`).
--
-- A canceled payment leaves its order's live slot for its own id, as a
-- declined one does (migration 0010), so the order can be paid again.
--
-- SQLite cannot change a CHECK constraint in place: the three tables are
-- rebuilt as migration 0006 did (new table, copy, drop, rename, indexes),
-- with foreign keys off; the store checks `PRAGMA foreign_key_check` after.

CREATE TABLE payments_v12 (
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
            OR ((status = 'declined' OR status = 'canceled') AND order_slot = id))
) STRICT;
INSERT INTO payments_v12 (id, shop_id, idempotency_key, reference, amount_minor, currency,
    token, status, acquirer_key, provider_payment_id, decline_code, created_at, updated_at,
    refund_reserved_minor, refunded_minor, claimed_by, order_slot)
SELECT id, shop_id, idempotency_key, reference, amount_minor, currency,
    token, status, acquirer_key, provider_payment_id, decline_code, created_at, updated_at,
    refund_reserved_minor, refunded_minor, claimed_by, order_slot
FROM payments;
DROP TABLE payments;
ALTER TABLE payments_v12 RENAME TO payments;
CREATE INDEX payments_pending ON payments (created_at) WHERE status = 'pending';
CREATE INDEX payments_created_at ON payments (created_at);
CREATE UNIQUE INDEX payments_by_order ON payments (shop_id, reference, order_slot);
CREATE INDEX payments_by_shop ON payments (shop_id, created_at, id);

CREATE TABLE idempotency_keys_v12 (
    shop_id          TEXT NOT NULL REFERENCES shops (id),
    key              TEXT NOT NULL,
    fingerprint      BLOB NOT NULL CHECK (length(fingerprint) = 32),
    method           TEXT NOT NULL,
    path             TEXT NOT NULL,
    recovery_point   TEXT NOT NULL
        CHECK (recovery_point = 'payment_created' OR recovery_point = 'order_already_paid'
            OR recovery_point = 'refund_created' OR recovery_point = 'cancel_requested'
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
    -- The final arbiter of races: one row per (shop, key).
    PRIMARY KEY (shop_id, key),
    CHECK ((recovery_point = 'finished') = (response_status IS NOT NULL))
) STRICT;
INSERT INTO idempotency_keys_v12 (shop_id, key, fingerprint, method, path, recovery_point,
    lease_token, locked_until, payment_id, response_status, response_headers, response_body,
    created_at, expires_at, replays, refund_id, last_repeat_at, lease_holder, replayed,
    last_replayed_at, conflicted, last_conflicted_at, mismatched, last_mismatched_at)
SELECT shop_id, key, fingerprint, method, path, recovery_point,
    lease_token, locked_until, payment_id, response_status, response_headers, response_body,
    created_at, expires_at, replays, refund_id, last_repeat_at, lease_holder, replayed,
    last_replayed_at, conflicted, last_conflicted_at, mismatched, last_mismatched_at
FROM idempotency_keys;
DROP TABLE idempotency_keys;
ALTER TABLE idempotency_keys_v12 RENAME TO idempotency_keys;
CREATE INDEX idempotency_keys_expired ON idempotency_keys (expires_at) WHERE recovery_point = 'finished';
CREATE INDEX idempotency_keys_unfinished ON idempotency_keys (locked_until) WHERE recovery_point <> 'finished';
CREATE INDEX idempotency_keys_by_payment ON idempotency_keys (payment_id);
CREATE INDEX idempotency_keys_by_refund ON idempotency_keys (refund_id)
    WHERE refund_id IS NOT NULL;

CREATE TABLE events_v12 (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    id              TEXT NOT NULL UNIQUE,
    shop_id         TEXT NOT NULL REFERENCES shops (id),
    event_type      TEXT NOT NULL
        CHECK (event_type = 'payment.succeeded' OR event_type = 'payment.declined'
            OR event_type = 'payment.canceled'
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
    last_error      TEXT
) STRICT;
INSERT INTO events_v12 (seq, id, shop_id, event_type, payment_id, refund_id, payload,
    created_at, due_since, attempts, next_attempt_at, locked_until, delivered_at, gave_up_at,
    last_status, last_error)
SELECT seq, id, shop_id, event_type, payment_id, refund_id, payload,
    created_at, due_since, attempts, next_attempt_at, locked_until, delivered_at, gave_up_at,
    last_status, last_error
FROM events;
-- AUTOINCREMENT never reuses a sequence number, even one whose row is gone:
-- the new table starts from the old one's high-water mark (as in 0006).
INSERT INTO sqlite_sequence (name, seq)
SELECT 'events_v12', seq FROM sqlite_sequence WHERE name = 'events'
    AND NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'events_v12');
UPDATE sqlite_sequence
SET seq = MAX(seq, COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'events'), 0))
WHERE name = 'events_v12';
DROP TABLE events;
ALTER TABLE events_v12 RENAME TO events;
CREATE INDEX events_by_shop ON events (shop_id, seq);
CREATE INDEX events_due ON events (next_attempt_at)
    WHERE delivered_at IS NULL AND gave_up_at IS NULL;
CREATE INDEX events_by_payment ON events (payment_id, seq);
