-- Issue 6: merchant events through a transactional outbox (see the PostgreSQL
-- migration for the design). Times are INTEGER unix milliseconds.

ALTER TABLE shops ADD COLUMN webhook_url TEXT;
ALTER TABLE shops ADD COLUMN webhook_secret TEXT;

CREATE TABLE events (
    seq             INTEGER PRIMARY KEY AUTOINCREMENT,
    id              TEXT NOT NULL UNIQUE,
    shop_id         TEXT NOT NULL REFERENCES shops (id),
    event_type      TEXT NOT NULL CHECK (event_type IN
                        ('payment.succeeded', 'payment.declined', 'refund.succeeded', 'refund.failed')),
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

CREATE INDEX events_by_shop ON events (shop_id, seq);
CREATE INDEX events_due ON events (next_attempt_at)
    WHERE delivered_at IS NULL AND gave_up_at IS NULL;
CREATE INDEX events_open_by_payment ON events (payment_id, seq)
    WHERE delivered_at IS NULL AND gave_up_at IS NULL;
