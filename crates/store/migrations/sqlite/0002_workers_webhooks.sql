-- Issue 3: the completer, the reconciler, inbound acquirer webhooks, repeat counts.

-- How many requests came with a key after its first one (replays, 409s, 422s,
-- resumed retries): many point at client timeouts or double submits.
ALTER TABLE idempotency_keys ADD COLUMN replays INTEGER NOT NULL DEFAULT 0;

-- The reconciler asks the acquirer about pending payments, oldest first...
CREATE INDEX payments_pending ON payments (created_at) WHERE status = 'pending';
-- ...and compares payments created in a time window with the acquirer's ledger.
CREATE INDEX payments_created_at ON payments (created_at);

-- Acquirer events received (webhooks): the event id is the acquirer's and is
-- the same on every delivery, so a repeat is found here and changes nothing.
CREATE TABLE acquirer_events (
    event_id     TEXT PRIMARY KEY,
    event_type   TEXT NOT NULL,
    acquirer_key TEXT NOT NULL,
    shop_id      TEXT NOT NULL,
    -- What the event did: settled, unchanged, unknown_payment.
    result       TEXT NOT NULL CHECK (result IN ('settled', 'unchanged', 'unknown_payment')),
    received_at  INTEGER NOT NULL
) STRICT;
