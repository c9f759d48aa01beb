-- Issue 35: shops make and roll their own keys through /v1/api-keys, with
-- an Idempotency-Key. The key a request made keeps that idempotency key and
-- the fingerprint of the request, so that a repeat (a lost answer, a retry)
-- finds it instead of making a second key; the unique index settles two
-- concurrent repeats (they also take the shop's row lock one after the
-- other). Kept as long as the key row: a repeat a year later still finds
-- its key. Keys the operator makes carry none.
ALTER TABLE api_keys
    ADD COLUMN idempotency_key TEXT,
    ADD COLUMN request_sha256  BYTEA CHECK (length(request_sha256) = 32),
    ADD CONSTRAINT api_keys_request_whole
        CHECK ((idempotency_key IS NULL) = (request_sha256 IS NULL));

CREATE UNIQUE INDEX api_keys_by_request ON api_keys (shop_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
