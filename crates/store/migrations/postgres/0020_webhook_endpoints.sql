-- Issue 35: webhook endpoints are objects a shop manages itself, several per
-- shop, each with the event types it wants and its own signing secret, and
-- every event is delivered to each matching endpoint with a delivery state of
-- its own.
--
-- `enabled_events` is `*` (every type) or the wanted types joined by commas
-- (event types hold no comma). The secret is kept in clear: signing needs it;
-- it is never logged nor shown again after the answer that made it. A secret
-- rolled over keeps signing (a second `v1=`) until `previous_secret_until`.
-- `origin` tells the endpoint the operator's `shops set-webhook` manages
-- (at most one per shop) from those the shop made through the API. A deleted
-- endpoint keeps its row (its deliveries name it) without its secrets.
CREATE TABLE webhook_endpoints (
    shop_id               TEXT NOT NULL REFERENCES shops (id),
    id                    TEXT NOT NULL,
    origin                TEXT NOT NULL CHECK (origin IN ('operator', 'api')),
    url                   TEXT NOT NULL,
    enabled_events        TEXT NOT NULL,
    description           TEXT,
    enabled               BOOLEAN NOT NULL DEFAULT true,
    secret                TEXT,
    previous_secret       TEXT,
    previous_secret_until TIMESTAMPTZ,
    -- The Idempotency-Key of the request that made the endpoint, and of the
    -- one that made its current secret (a create or a roll), each with the
    -- fingerprint of its request: a repeat finds what it made.
    idempotency_key       TEXT,
    request_sha256        BYTEA CHECK (length(request_sha256) = 32),
    secret_key            TEXT,
    secret_request_sha256 BYTEA CHECK (length(secret_request_sha256) = 32),
    created_at            TIMESTAMPTZ NOT NULL DEFAULT now(),
    deleted_at            TIMESTAMPTZ,
    PRIMARY KEY (shop_id, id),
    CONSTRAINT webhook_endpoints_previous_whole
        CHECK ((previous_secret IS NULL) = (previous_secret_until IS NULL)),
    CONSTRAINT webhook_endpoints_secret_while_live
        CHECK ((secret IS NULL) = (deleted_at IS NOT NULL))
);

CREATE UNIQUE INDEX webhook_endpoints_by_request ON webhook_endpoints (shop_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE UNIQUE INDEX webhook_endpoints_one_operator ON webhook_endpoints (shop_id)
    WHERE origin = 'operator' AND deleted_at IS NULL;

-- One row per (event, endpoint): the delivery state that was on the event.
-- Written with the event, in the transaction of its transition, for every
-- enabled endpoint whose filter matches. `payment_id` and `event_seq` keep a
-- payment's events in order per endpoint. No foreign keys: a check on every
-- delivery insert would lock the endpoint's row (KEY SHARE, a write to its
-- page) from every concurrent payment of the shop, as 0008 found for shops;
-- only the stores write these rows, with the event and endpoint at hand.
CREATE TABLE event_deliveries (
    shop_id         TEXT NOT NULL,
    event_seq       BIGINT NOT NULL,
    endpoint_id     TEXT NOT NULL,
    payment_id      TEXT NOT NULL,
    due_since       TIMESTAMPTZ NOT NULL DEFAULT now(),
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    locked_until    TIMESTAMPTZ,
    delivered_at    TIMESTAMPTZ,
    gave_up_at      TIMESTAMPTZ,
    last_status     INTEGER,
    last_error      TEXT,
    PRIMARY KEY (shop_id, event_seq, endpoint_id)
);

CREATE INDEX event_deliveries_due ON event_deliveries (next_attempt_at)
    WHERE delivered_at IS NULL AND gave_up_at IS NULL;
CREATE INDEX event_deliveries_open_by_payment ON event_deliveries (payment_id, endpoint_id, event_seq)
    WHERE delivered_at IS NULL AND gave_up_at IS NULL;

-- The shop's one URL becomes its first endpoint (the operator's), and the
-- delivery state of its events (those not parked for want of a URL) that
-- endpoint's deliveries. A shop whose URL was removed gets a deleted
-- placeholder that keeps which of its events were delivered or given up, so
-- that a URL set again does not send them again; its open events keep no
-- delivery, and the next operator endpoint takes them, as a URL set again
-- always did.
INSERT INTO webhook_endpoints (shop_id, id, origin, url, enabled_events, secret,
                               previous_secret, previous_secret_until)
SELECT id, 'we_' || md5(random()::text || id), 'operator', webhook_url, '*', webhook_secret,
       webhook_previous_secret, webhook_previous_secret_until
FROM shops WHERE webhook_url IS NOT NULL;

INSERT INTO webhook_endpoints (shop_id, id, origin, url, enabled_events, enabled, deleted_at)
SELECT s.id, 'we_' || md5(random()::text || s.id), 'operator', '', '*', false, now()
FROM shops s
WHERE s.webhook_url IS NULL
  AND EXISTS (SELECT 1 FROM events e WHERE e.shop_id = s.id
                AND (e.delivered_at IS NOT NULL OR e.gave_up_at IS NOT NULL));

INSERT INTO event_deliveries (shop_id, event_seq, endpoint_id, payment_id, due_since, attempts,
                              next_attempt_at, delivered_at, gave_up_at, last_status, last_error)
SELECT e.shop_id, e.seq, w.id, e.payment_id, e.due_since, e.attempts, e.next_attempt_at,
       e.delivered_at, e.gave_up_at, e.last_status, e.last_error
FROM events e JOIN webhook_endpoints w ON w.shop_id = e.shop_id
WHERE e.delivered_at IS NOT NULL OR e.gave_up_at IS NOT NULL
   OR (w.deleted_at IS NULL AND e.next_attempt_at < '9999-01-01');

-- The event row keeps what happened; where it went is in its deliveries.
DROP INDEX events_due;
ALTER TABLE events
    DROP COLUMN due_since,
    DROP COLUMN attempts,
    DROP COLUMN next_attempt_at,
    DROP COLUMN locked_until,
    DROP COLUMN delivered_at,
    DROP COLUMN gave_up_at,
    DROP COLUMN last_status,
    DROP COLUMN last_error;
ALTER TABLE shops
    DROP CONSTRAINT shops_webhook_url_and_secret,
    DROP CONSTRAINT shops_webhook_previous_whole,
    DROP COLUMN webhook_url,
    DROP COLUMN webhook_secret,
    DROP COLUMN webhook_previous_secret,
    DROP COLUMN webhook_previous_secret_until;
