-- Test mode (issue 35): as PostgreSQL's 0021. A shop's test mode is the
-- namespace `{shop}.test`: every object made with a test key is stored under
-- it, so every key, index and query that names the shop names the mode too.
-- Every shop gets the namespace's row (its objects' rows name it); the API
-- keys stay the shop's own and are found by idempotency key within their mode.

-- A row's mode is the one its id names (`x = 'a' OR x = 'b'`, as 0006 writes
-- a choice). The namespace's row holds no secret of the shop's: the column is
-- not read since API keys, and random bytes fill it.
ALTER TABLE shops ADD COLUMN mode TEXT NOT NULL DEFAULT 'live'
    CHECK ((mode = 'live' OR mode = 'test') AND (mode = 'test') = (id LIKE '%.test'));

INSERT INTO shops (id, secret_sha256, created_at, mode)
SELECT id || '.test', randomblob(32), created_at, 'test' FROM shops WHERE mode = 'live';

DROP INDEX api_keys_by_request;
CREATE UNIQUE INDEX api_keys_by_request ON api_keys (shop_id, mode, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
