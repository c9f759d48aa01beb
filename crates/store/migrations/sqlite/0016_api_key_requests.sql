-- Issue 35: the idempotency key and request fingerprint of a key made or
-- rolled through /v1/api-keys, as PostgreSQL's migration 0018.
ALTER TABLE api_keys ADD COLUMN idempotency_key TEXT;
ALTER TABLE api_keys ADD COLUMN request_sha256 BLOB
    CHECK (request_sha256 IS NULL OR length(request_sha256) = 32);

CREATE UNIQUE INDEX api_keys_by_request ON api_keys (shop_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
