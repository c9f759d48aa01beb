-- Issue 6: merchant events through a transactional outbox.
--
-- An event row is inserted in the same transaction as the transition it
-- reports (a payment settling, a refund ending), and only when that
-- conditional update changed a row, so there is one event per transition and
-- none for a change that rolled back. The relay delivers it afterwards.

-- Where a shop's events go, and the secret they are signed with (it must be
-- kept in clear to sign; it is never logged nor shown by the API).
ALTER TABLE shops
    ADD COLUMN webhook_url    TEXT,
    ADD COLUMN webhook_secret TEXT,
    ADD CONSTRAINT shops_webhook_url_and_secret CHECK ((webhook_url IS NULL) = (webhook_secret IS NULL));

CREATE TABLE events (
    -- Commit order of the events of one payment (its transitions are
    -- serialised by the payment row), hence their delivery order; also the
    -- order of listings.
    seq             BIGSERIAL PRIMARY KEY,
    id              TEXT NOT NULL UNIQUE,
    shop_id         TEXT NOT NULL REFERENCES shops (id),
    event_type      TEXT NOT NULL CHECK (event_type IN
                        ('payment.succeeded', 'payment.declined', 'refund.succeeded', 'refund.failed')),
    payment_id      TEXT NOT NULL REFERENCES payments (id),
    refund_id       TEXT REFERENCES refunds (id),
    -- The JSON body, delivered byte for byte on every attempt.
    payload         BYTEA NOT NULL,
    created_at      TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- Delivery: the give-up clock starts at due_since (written, or resent by hand).
    due_since       TIMESTAMPTZ NOT NULL DEFAULT now(),
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    -- A relay's claim on one attempt; other relays skip it until then.
    locked_until    TIMESTAMPTZ,
    delivered_at    TIMESTAMPTZ,
    gave_up_at      TIMESTAMPTZ,
    last_status     INTEGER,
    last_error      TEXT
);

CREATE INDEX events_by_shop ON events (shop_id, seq);
CREATE INDEX events_due ON events (next_attempt_at)
    WHERE delivered_at IS NULL AND gave_up_at IS NULL;
CREATE INDEX events_open_by_payment ON events (payment_id, seq)
    WHERE delivered_at IS NULL AND gave_up_at IS NULL;
