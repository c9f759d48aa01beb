-- Issue 35: a shop's webhook signing secret is rolled with an overlap. The
-- secret it replaced keeps signing (a second `v1=` on every delivery) until
-- `webhook_previous_secret_until`, so a receiver can switch secrets without
-- refusing a delivery. Kept in clear like the current one: signing needs it.
ALTER TABLE shops
    ADD COLUMN webhook_previous_secret       TEXT,
    ADD COLUMN webhook_previous_secret_until TIMESTAMPTZ,
    ADD CONSTRAINT shops_webhook_previous_whole
        CHECK ((webhook_previous_secret IS NULL) = (webhook_previous_secret_until IS NULL));
