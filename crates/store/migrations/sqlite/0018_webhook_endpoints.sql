-- Issue 35: webhook endpoints a shop manages itself, and one delivery state
-- per (event, endpoint), as PostgreSQL's migration 0020 (see it for the
-- design). Times are INTEGER unix milliseconds.
CREATE TABLE webhook_endpoints (
    shop_id               TEXT NOT NULL REFERENCES shops (id),
    id                    TEXT NOT NULL,
    origin                TEXT NOT NULL CHECK (origin = 'operator' OR origin = 'api'),
    url                   TEXT NOT NULL,
    enabled_events        TEXT NOT NULL,
    description           TEXT,
    enabled               INTEGER NOT NULL DEFAULT 1,
    secret                TEXT,
    previous_secret       TEXT,
    previous_secret_until INTEGER,
    idempotency_key       TEXT,
    request_sha256        BLOB CHECK (length(request_sha256) = 32),
    secret_key            TEXT,
    secret_request_sha256 BLOB CHECK (length(secret_request_sha256) = 32),
    created_at            INTEGER NOT NULL,
    deleted_at            INTEGER,
    PRIMARY KEY (shop_id, id),
    CHECK ((previous_secret IS NULL) = (previous_secret_until IS NULL)),
    CHECK ((secret IS NULL) = (deleted_at IS NOT NULL))
) STRICT;

CREATE UNIQUE INDEX webhook_endpoints_by_request ON webhook_endpoints (shop_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE UNIQUE INDEX webhook_endpoints_one_operator ON webhook_endpoints (shop_id)
    WHERE origin = 'operator' AND deleted_at IS NULL;

CREATE TABLE event_deliveries (
    shop_id         TEXT NOT NULL,
    event_seq       INTEGER NOT NULL,
    endpoint_id     TEXT NOT NULL,
    payment_id      TEXT NOT NULL,
    due_since       INTEGER NOT NULL,
    attempts        INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL,
    locked_until    INTEGER,
    delivered_at    INTEGER,
    gave_up_at      INTEGER,
    last_status     INTEGER,
    last_error      TEXT,
    PRIMARY KEY (shop_id, event_seq, endpoint_id)
) STRICT;

CREATE INDEX event_deliveries_due ON event_deliveries (next_attempt_at)
    WHERE delivered_at IS NULL AND gave_up_at IS NULL;
CREATE INDEX event_deliveries_open_by_payment ON event_deliveries (payment_id, endpoint_id, event_seq)
    WHERE delivered_at IS NULL AND gave_up_at IS NULL;

-- The shop's one URL becomes its operator endpoint; a shop whose URL was
-- removed gets a deleted placeholder keeping its delivered and given-up
-- events (see PostgreSQL's 0020).
INSERT INTO webhook_endpoints (shop_id, id, origin, url, enabled_events, secret,
                               previous_secret, previous_secret_until, created_at)
SELECT id, 'we_' || lower(hex(randomblob(16))), 'operator', webhook_url, '*', webhook_secret,
       webhook_previous_secret, webhook_previous_secret_until,
       CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
FROM shops WHERE webhook_url IS NOT NULL;

INSERT INTO webhook_endpoints (shop_id, id, origin, url, enabled_events, enabled, created_at,
                               deleted_at)
SELECT s.id, 'we_' || lower(hex(randomblob(16))), 'operator', '', '*', 0,
       CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER),
       CAST((julianday('now') - 2440587.5) * 86400000 AS INTEGER)
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
   OR (w.deleted_at IS NULL AND e.next_attempt_at < 253370764800000);

DROP INDEX events_due;
ALTER TABLE events DROP COLUMN due_since;
ALTER TABLE events DROP COLUMN attempts;
ALTER TABLE events DROP COLUMN next_attempt_at;
ALTER TABLE events DROP COLUMN locked_until;
ALTER TABLE events DROP COLUMN delivered_at;
ALTER TABLE events DROP COLUMN gave_up_at;
ALTER TABLE events DROP COLUMN last_status;
ALTER TABLE events DROP COLUMN last_error;
ALTER TABLE shops DROP COLUMN webhook_url;
ALTER TABLE shops DROP COLUMN webhook_secret;
ALTER TABLE shops DROP COLUMN webhook_previous_secret;
ALTER TABLE shops DROP COLUMN webhook_previous_secret_until;
